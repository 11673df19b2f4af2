/**
 * Ctrl-C in `miniapp users bulk-create` against a real serve that hashes at
 * its default cost (so that rows are sent well ahead of their answers):
 * nothing more is sent, serve answers what was sent, the progress line is
 * cleared, and the counts printed are what serve did (the rows sent are the
 * rows answered, and the users stored are the users said to be created). A
 * second Ctrl-C cancels without waiting, and says what is not known.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { plain, Sandbox } from '../../helpers/cli.js';
import { startTestServe } from '../../helpers/serve.js';
import type { RunningServe } from '../../../src/server/serve.js';
import { runLive } from './harness.js';

let sb: Sandbox;
let running: RunningServe;
let env: Record<string, string>;

beforeEach(async () => {
  sb = new Sandbox();
  // The default cost of `serve --password-hash-cost`: each row takes serve a while, as on a real machine.
  running = await startTestServe({ grpc: { host: '127.0.0.1', port: 0 }, hashCost: 14 });
  env = { MINIAPP_GRPC_ADDR: running.grpc!.address, MINIAPP_GRPC_TOKEN: running.adminToken! };
});
afterEach(async () => {
  await running.close();
  sb.dispose();
});

/** The users serve holds, as `users list --json` reads them. */
async function users(): Promise<number> {
  const listed = await sb.run(['users', 'list', '--json'], { env });
  expect(listed.code, listed.stderr).toBe(0);
  return (JSON.parse(listed.stdout) as unknown[]).length;
}

function fileOf(rows: number): string {
  const file = join(sb.root, 'users.jsonl');
  writeFileSync(
    file,
    `${Array.from({ length: rows }, (_, i) => JSON.stringify({ username: `user${i}`, email: `user${i}@example.com`, password: 'correct-horse' })).join('\n')}\n`,
  );
  return file;
}

async function until(condition: () => Promise<boolean> | boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`never saw ${what}`);
}

const INTERRUPTED =
  /error: interrupted \(SIGINT\): (\d+) rows? sent, (\d+) created, (\d+) failed, as serve answered for every row sent; the rest of \S+ was not sent\n/;

describe('users bulk-create interrupted', () => {
  it("stops sending at once, waits for serve's answer to what was sent, clears its line, and prints counts that are true", { timeout: 120_000 }, async () => {
    const file = fileOf(2000);
    const live = runLive(sb, ['users', 'bulk-create', file], env, { terminal: true });
    await until(async () => (await users()) >= 20, 'the first users created');
    live.interrupt();
    expect(await live.done).toBe(130);
    const stderr = live.stderr.text;
    const said = INTERRUPTED.exec(plain(stderr));
    expect(said, stderr.slice(-600)).not.toBeNull();
    const [sent, created, failed] = [said![1], said![2], said![3]].map(Number) as [number, number, number];
    // Every row sent was answered: created or refused, nothing in between.
    expect(sent).toBe(created + failed);
    expect(failed).toBe(0);
    expect(sent).toBeLessThan(2000);
    // What serve holds is what was said, and stays so: the call ended when serve had answered the last row sent.
    expect(await users()).toBe(created);
    // While it waited, the line said so; then it was cleared, and nothing was drawn after the message.
    expect(plain(stderr)).toContain("stopping (SIGINT): nothing more is sent; waiting for serve's answer to the rows sent (Ctrl-C again to stop without it)\n");
    expect(plain(stderr)).toMatch(/ · stopping: \d+ answers? to come/);
    const shown = plain(stderr);
    const at = shown.indexOf('error: interrupted');
    expect(shown.slice(0, at).endsWith('\r\x1b[2K')).toBe(true);
    expect(shown.slice(at)).not.toContain('\r');
    expect(plain(stderr)).toContain('to go on, run it again with --skip-existing');
    expect(await users()).toBe(created);
  });

  it('a second Ctrl-C cancels without waiting, and says how many rows sent had no answer', { timeout: 120_000 }, async () => {
    const file = fileOf(2000);
    const live = runLive(sb, ['users', 'bulk-create', file], env, { terminal: true });
    await until(async () => (await users()) >= 20, 'the first users created');
    live.interrupt();
    await until(() => live.stderr.text.includes('stopping (SIGINT)'), 'the stopping line');
    live.interrupt();
    expect(await live.done).toBe(130);
    const text = plain(live.stderr.text);
    const cancelled =
      /error: interrupted \(SIGINT, then cancelled\): (\d+) rows? sent, (\d+) created, (\d+) failed; (\d+) rows? sent had no answer when the call was cancelled, and serve may have created some of them; the rest of \S+ was not sent\n/.exec(
        text,
      );
    const answered = INTERRUPTED.exec(text);
    // Which of the two depends on whether serve answered the last row before the second Ctrl-C; either is true.
    expect(cancelled ?? answered, text.slice(-600)).not.toBeNull();
    if (cancelled) {
      const [sent, created, failed, unanswered] = [cancelled[1], cancelled[2], cancelled[3], cancelled[4]].map(Number) as [number, number, number, number];
      expect(sent).toBe(created + failed + unanswered);
      expect(unanswered).toBeGreaterThan(0);
      // Some of the unanswered may have been stored, none beyond them.
      const stored = await users();
      expect(stored).toBeGreaterThanOrEqual(created);
      expect(stored).toBeLessThanOrEqual(created + unanswered);
    }
  });

  it('with --skip-existing counts the users already there as skipped, not failed, and does not list them as failures', { timeout: 120_000 }, async () => {
    const file = fileOf(2000);
    const first = runLive(sb, ['users', 'bulk-create', file], env, { terminal: true });
    await until(async () => (await users()) >= 20, 'the first users created');
    first.interrupt();
    await first.done;
    const said = INTERRUPTED.exec(plain(first.stderr.text));
    const made = Number(said![2]);
    const again = runLive(sb, ['users', 'bulk-create', file, '--skip-existing'], env, { terminal: true });
    await until(async () => (await users()) >= made + 20, 'more users created');
    again.interrupt();
    expect(await again.done).toBe(130);
    const text = plain(again.stderr.text);
    const counted =
      /error: interrupted \(SIGINT\): (\d+) rows sent, (\d+) created, (\d+) skipped already there, (\d+) failed, as serve answered for every row sent/.exec(
        text,
      );
    expect(counted, text.slice(-600)).not.toBeNull();
    expect(Number(counted![3])).toBe(made);
    expect(Number(counted![4])).toBe(0);
    expect(text).not.toContain('ALREADY_EXISTS');
    expect(text).toMatch(/ · created \d+ · skipped \d+ · failed 0/);
  });
});
