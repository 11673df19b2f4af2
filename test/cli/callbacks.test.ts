/** `miniapp callbacks list --limit` through the in-process CLI, on a data dir serve could have written. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Sandbox, plain } from '../helpers/cli.js';
import { openStore } from '../../src/store/store.js';
import { UnlinkEventStore } from '../../src/store/unlink-events.js';

let sb: Sandbox;
beforeEach(async () => {
  sb = new Sandbox();
  const store = await openStore({ kind: 'sqlite', dataDir: join(sb.root, 'data') });
  const events = new UnlinkEventStore(store.sql);
  for (const [minute, userKey] of [
    [0, 1001],
    [1, 1002],
    [2, 1001],
    [3, 1003],
  ] as const) {
    await events.record({
      receivedAt: new Date(Date.UTC(2026, 10, 21, 12, minute)).toISOString(),
      userKey,
      referrer: 'UNLINK',
      method: 'POST',
      source: '127.0.0.1',
    });
  }
  await store.close();
});
afterEach(() => sb.dispose());

describe('callbacks list --limit', () => {
  it('lists the N most recent, oldest first, with the other filters applied first', async () => {
    const two = await sb.run(['callbacks', 'list', '--limit', '2', '--json']);
    expect(two.code, two.stderr).toBe(0);
    expect((JSON.parse(two.stdout) as { userKey: number }[]).map((e) => e.userKey)).toEqual([1001, 1003]);
    const ofUser = await sb.run(['callbacks', 'list', '--user-key', '1001', '--limit', '1']);
    expect(ofUser.stdout.split('\t').slice(0, 2)).toEqual(['2026-11-21T12:02:00.000Z', '1001']);
    const all = await sb.run(['callbacks', 'list', '--limit', '10', '--json']);
    expect(JSON.parse(all.stdout)).toHaveLength(4);
  });

  it('says on a terminal that there are more', async () => {
    const result = await sb.run(['callbacks', 'list', '--limit', '3', '--no-color'], { tty: true });
    expect(result.code).toBe(0);
    expect(plain(result.stdout).match(/│ 2026-/g)).toHaveLength(3);
    expect(result.stderr).toContain('the 3 most recent of 4; a larger --limit shows more');
  });
});

describe('callbacks list and text from the caller of the callback', () => {
  it('shows control characters of a referrer as \\xHH on a terminal and piped, never sends them; --json keeps them exact', async () => {
    // Anyone who can reach the callback (no --callback-auth) chooses the referrer: a window title, a screen clear, a bell.
    const referrer = 'X\u001b]0;PWNED\u0007\u001b[2J\r\u009b31mY\u007f';
    const store = await openStore({ kind: 'sqlite', dataDir: join(sb.root, 'data') });
    await new UnlinkEventStore(store.sql).record({
      receivedAt: new Date(Date.UTC(2026, 10, 21, 13)).toISOString(),
      userKey: 7,
      referrer,
      method: 'GET',
      source: '127.0.0.1',
    });
    await store.close();
    const shown = 'X\\x1b]0;PWNED\\x07\\x1b[2J \\x9b31mY\\x7f';
    for (const options of [{ tty: true }, {}]) {
      const result = await sb.run(['callbacks', 'list', '--user-key', '7', '--no-color'], options);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
      expect(result.stdout).toContain(shown);
    }
    const json = await sb.run(['callbacks', 'list', '--user-key', '7', '--json']);
    expect(JSON.parse(json.stdout)[0].referrer).toBe(referrer);
  });
});
