/**
 * What a person sees of the CLI's tables and live screens, in real tmux
 * panes of 80x24 and 160x50: the built CLI (bin/miniapp.cjs) as typed at a
 * shell, against a real `miniapp serve` process, read back with
 * capture-pane. `doctor` shows its own colours as colours (not as escaped
 * text) and its details whole; `users watch` keeps each e-mail whole on one
 * row; `monitor metrics` redraws one screen in place, never taller than the
 * terminal; `decrypt` never cuts a value (a CI copied off the screen); and
 * the `users list` footer keeps the next page's command whole; and Ctrl-C
 * in `insights media --all` says how far it got, its progress line gone.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, launch } from '../helpers/launcher.js';
import { startServeProcess, type ServeProcess } from '../helpers/chaos.js';
import { Tmux, shellQuote, type Pane } from '../helpers/tmux.js';
import { AAD_HEX, KEY_HEX, envelope, seal } from '../helpers/vectors.js';
import { startGraphSandbox } from '../insights/graph-sandbox.js';
import { SANDBOX_GRAPH_TOKENS } from '../../src/sandbox/graph/data.js';

const SIZES = [
  [80, 24],
  [160, 50],
] as const;

const tmux = new Tmux();
let home: string;
let serve: ServeProcess;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'miniapp-screens-'));
  // serve stores its gRPC address and admin token in the profile of this home, as on a person's machine.
  serve = await startServeProcess({ home, grpcPort: await freePort() });
});
afterAll(async () => {
  tmux.kill();
  await serve?.stop();
  serve?.dispose();
  rmSync(home, { recursive: true, force: true });
});

function env(extra: Record<string, string> = {}): Record<string, string> {
  return { HOME: home, MINIAPP_CONFIG_DIR: join(home, 'config'), MINIAPP_DATA_DIR: join(home, 'data'), ...extra };
}

/** The CLI in a fresh pane, as typed at a shell; the pane then shows `[exit N]` under its output and keeps it. */
async function inPane(width: number, height: number, args: string[], extra: Record<string, string> = {}): Promise<{ pane: Pane; screen: string[] }> {
  const line = `${shellQuote(process.execPath)} ${shellQuote(BIN)} ${args.map(shellQuote).join(' ')}; echo "[exit $?]"; exec sleep 3600`;
  const pane = await tmux.session(width, height, `sh -c ${shellQuote(line)}`, env(extra));
  const screen = await pane.waitFor('the command to end', (rows) => rows.some((row) => row.startsWith('[exit')) && rows);
  return { pane, screen };
}

function cli(args: string[]): string {
  const result = launch(home, args);
  expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(0);
  return result.stdout;
}

describe('doctor on a colour terminal', () => {
  for (const [width, height] of SIZES) {
    it(`shows its statuses in colour, not as escaped codes, and every detail whole, at ${width}x${height}`, { timeout: 60_000 }, async () => {
      // An empty profile: three checks fail (exit 1), the others warn or skip; nothing is sent anywhere.
      const { pane, screen } = await inPane(width, height, ['doctor'], { MINIAPP_CONFIG_DIR: join(home, `doctor-${width}`) });
      expect(screen).toContain('[exit 1]');
      const table = screen.filter((row) => row.startsWith('│'));
      expect(screen.join('\n')).not.toMatch(/\\x1b|\x1b/);
      // The status column is as wide as its header and no wider.
      expect(table[0]).toMatch(/^│ check +│ status │ detail +│$/);
      expect(table.find((row) => row.startsWith('│ decrypt key '))).toMatch(/│ FAIL {3}│/);
      for (const row of screen) expect([...row].length, row).toBeLessThanOrEqual(width);
      expect(screen.join('\n')).not.toContain('…');
      // Each detail is whole: its lines, read in order, say it all (the command to copy among them).
      const detail = (check: string) => {
        const at = table.findIndex((row) => row.startsWith(`│ ${check} `));
        const rows = [table[at]!];
        for (const row of table.slice(at + 1))
          if (/^│ +│/.test(row)) rows.push(row);
          else break;
        return rows.map((row) => row.split('│')[3]!.trim()).join(' ');
      };
      expect(detail('decrypt AAD')).toBe('not set: `miniapp config set decrypt-aad text:VALUE` (or hex:HEX)');
      expect(detail('partner API')).toBe('base-url is not set');
      // The tool's own colours are colours: red FAIL, yellow warn, as the terminal draws them.
      const styled = (await pane.styled()).join('\n');
      expect(styled).toMatch(/\x1b\[31mFAIL\x1b\[39m/);
      expect(styled).toMatch(/\x1b\[33mwarn\x1b\[39m/);
    });
  }
});

describe('users watch in a terminal', () => {
  for (const [width, height] of SIZES) {
    it(`keeps each e-mail whole on one row, and every row within ${width} columns, at ${width}x${height}`, { timeout: 60_000 }, async () => {
      const name = `watcher${width}`;
      const line = `${shellQuote(process.execPath)} ${shellQuote(BIN)} users watch --types created --count 2; echo "[exit $?]"; exec sleep 3600`;
      const pane = await tmux.session(width, height, `sh -c ${shellQuote(line)}`, env());
      await pane.waitFor('the watch header', (rows) => rows.some((row) => /^ +seq +time +event +id +username +email$/.test(row)));
      const long = `${name}.with.a.rather.long.address@example-company.com`;
      cli(['users', 'create', '--username', name, '--email', long, '--password', 'correct-horse']);
      cli(['users', 'create', '--username', `${name}b`, '--email', `${name}b@example.com`, '--password', 'correct-horse']);
      const screen = await pane.waitFor('the end of the watch', (rows) => rows.includes('[exit 0]') && rows);
      for (const row of screen) expect([...row].length, row).toBeLessThan(width);
      // The long address whole on a row; the short one on its event's row.
      expect(screen.some((row) => row.endsWith(long) && (row.trim() === long || new RegExp(`CREATED +\\d+ +${name} +\\S+$`).test(row)))).toBe(true);
      const short = screen.find((row) => row.includes(`${name}b@example.com`));
      expect(short).toMatch(new RegExp(`CREATED +\\d+ +${name}b +${name}b@example\\.com$`));
      if (width >= 120) {
        expect(short).toMatch(/ \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z +CREATED/);
      } else {
        // The time of day under a line for its day.
        expect(short).toMatch(/ \d\d:\d\d:\d\d +CREATED/);
        expect(screen).toContain(`── ${new Date().toISOString().slice(0, 10)} (UTC) ──`);
      }
    });
  }
});

describe('monitor metrics in a terminal', () => {
  for (const [width, height] of SIZES) {
    it(`redraws one screen in place, never taller or wider than ${width}x${height}`, { timeout: 60_000 }, async () => {
      // Requests on many routes: more series than an 80x24 screen holds.
      for (const path of ['/health', '/health/ready', '/api/v2/blog/posts', '/api/v1/blog/posts', '/nope', '/api/auth/me', '/api/v2/openapi.json']) {
        for (const method of ['GET', 'POST']) await fetch(`${serve.info.url}${path}`, { method }).then((response) => response.arrayBuffer());
      }
      const { pane, screen } = await inPane(width, height, ['monitor', 'metrics', '--name', 'miniapp_http_', '--interval', '300ms', '--count', '4']);
      expect(screen).toContain('[exit 0]');
      for (const row of screen) expect([...row].length, row).toBeLessThan(width);
      const history = await pane.joined();
      // Four snapshots drawn over each other: the title once in all the terminal holds, not once a refresh.
      expect(history.filter((row) => row.includes('every 300ms · Ctrl-C stops'))).toHaveLength(1);
      expect(screen.some((row) => /^series +value +per second$/.test(row))).toBe(true);
      expect(screen.some((row) => /^ {2}\{method="GET",route="\/health",status="200"\} +\d+/.test(row))).toBe(true);
      if (height === 24) expect(screen.some((row) => /^… \d+ more lines \(a taller terminal, --name or --json shows them\)$/.test(row))).toBe(true);
    });
  }
});

describe('decrypt in a terminal', () => {
  for (const [width, height] of SIZES) {
    it(`never cuts a value people copy (the 88-character ci), at ${width}x${height}`, { timeout: 60_000 }, async () => {
      const ci = createHash('sha512').update(`screens:${width}`).digest('base64');
      expect(ci).toHaveLength(88);
      const file = join(home, `me-${width}.json`);
      writeFileSync(file, JSON.stringify(envelope({ userKey: 1001, scope: 'user_ci user_name', name: seal('김민지'), ci: seal(ci), di: null })));
      const { pane, screen } = await inPane(width, height, ['decrypt', file], { MINIAPP_DECRYPT_KEY: KEY_HEX, MINIAPP_DECRYPT_AAD: AAD_HEX });
      expect(screen).toContain('[exit 0]');
      expect(screen.join('\n')).not.toContain('…');
      // Whole in what the terminal holds, its soft wrap joined again as a selection copies it.
      expect((await pane.joined()).some((row) => row.includes(ci))).toBe(true);
      expect(screen.some((row) => /^name +김민지$/.test(row) || /│ name +│ 김민지 +│/.test(row))).toBe(true);
    });
  }
});

describe('users list in a terminal', () => {
  it("keeps the next page's command whole in its footer at 80x24", { timeout: 60_000 }, async () => {
    for (let i = 0; i < 3; i++) cli(['users', 'create', '--username', `lister${i}`, '--email', `lister${i}@example.com`, '--password', 'correct-horse']);
    const { screen } = await inPane(80, 24, ['users', 'list', '--page-size', '2']);
    expect(screen).toContain('[exit 0]');
    const next = screen.find((row) => row.trim().startsWith('miniapp users list --page-size 2 --page-token '));
    expect(next, screen.join('\n')).toMatch(/^ {2}miniapp users list --page-size 2 --page-token \S+$/);
    // The words before it are broken between words, never inside one.
    const footer = screen.slice(
      screen.findIndex((row) => /^1-2 of \d+ users/.test(row)),
      screen.indexOf(next!),
    );
    expect(footer.join(' ')).toMatch(/^1-2 of \d+ users \(page 1 of \d+\); --all for every user; next page:$/);
  });
});

describe('insights media --all interrupted in a terminal', () => {
  it('says how far it got after Ctrl-C (exit 130), with its progress line gone, at 80x24', { timeout: 60_000 }, async () => {
    // Five calls an hour: the reading stops, pacing itself for the rest of the window, with its progress line drawn.
    const graph = await startGraphSandbox({ media: 1000, rateLimit: { calls: 5, windowMs: 3_600_000 } });
    try {
      const line = `${shellQuote(process.execPath)} ${shellQuote(BIN)} insights media --all --metrics reach > /dev/null; echo "[exit $?]"; exec sleep 3600`;
      // bash, as a person's shell: Ctrl-C reaches it too, and it goes on to the next command when the CLI handled the
      // signal and exited 130 (sh would end there).
      const pane = await tmux.session(
        80,
        24,
        `bash -c ${shellQuote(line)}`,
        env({ MINIAPP_GRAPH_URL: graph.url, MINIAPP_GRAPH_TOKEN: SANDBOX_GRAPH_TOKENS.page }),
      );
      await pane.waitFor('the progress line, waiting', (rows) => rows.some((row) => /^reading media · pages \d+\/\d+ .*(pacing|rate limited)/.test(row)));
      await pane.keys('C-c');
      const screen = await pane.waitFor('the end', (rows) => rows.includes('[exit 130]') && rows);
      // The message as written (the terminal wrapped it; joined again).
      const said = (await pane.joined()).join('\n');
      expect(said).toMatch(
        /error: interrupted \(SIGINT\) after reading \d+ pages of media \(\d+ items, \d+ calls\): nothing was written, since it would have been partial/,
      );
      // The line was cleared: the terminal's ^C echo fitted on it, and nothing of it is left.
      expect(screen.some((row) => row.startsWith('reading media'))).toBe(false);
      for (const row of screen) expect([...row].length, row).toBeLessThanOrEqual(80);
    } finally {
      await graph.close();
    }
  });
});
