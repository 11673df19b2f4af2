/**
 * `miniapp monitor dashboard` as a person sees it: the built CLI in a real
 * tmux pane (80x24, then widened to 160x50) at a shell, against a real
 * `miniapp serve` process under a small bounded load. It shows non-zero
 * rates within three snapshots, says "reconnecting" while serve restarts
 * and goes on after, uses a larger terminal, and `q` gives the terminal
 * back as it was (main screen, cursor shown, the same stty settings).
 * Piped or redirected, it is refused in one line pointing at
 * `monitor metrics --json`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN } from '../helpers/launcher.js';
import { startServeProcess, type ServeProcess } from '../helpers/chaos.js';
import { Tmux, shellQuote, type Pane } from '../helpers/tmux.js';

const REFUSAL = 'error: monitor dashboard draws on a terminal; piped or as JSON, use `miniapp monitor metrics --json`\n';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * A small bounded load on serve's HTTP side: one request at a time, a blog list and a 404 in turn, at most
 * `most` requests, until stopped.
 */
function load(url: string, most = 400): { stop: () => Promise<void> } {
  let stopped = false;
  const running = (async () => {
    for (let i = 0; i < most && !stopped; i++) {
      await fetch(`${url}${i % 2 === 0 ? '/api/v2/blog/posts' : '/no-such-page'}`)
        .then((response) => response.arrayBuffer())
        .catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await running;
    },
  };
}

/** The "now" value and the sparkline of a row of the dashboard (`HTTP req/s   12.3  ▁▂▅`). */
function row(screen: string[], label: string): { value: number; points: number } | undefined {
  const line = screen.find((text) => text.startsWith(label));
  const match = line && /^\S+(?: \S+)*? {2,}(-|[\d.]+k?)(?: {2}(.*))?$/.exec(line);
  if (!match) return undefined;
  const value = match[1] === '-' ? 0 : Number.parseFloat(match[1]!) * (match[1]!.endsWith('k') ? 1000 : 1);
  return { value, points: [...(match[2] ?? '')].length };
}

describe('monitor dashboard', () => {
  const tmux = new Tmux();
  let home: string;
  let serve: ServeProcess | undefined;
  let grpcPort: number;

  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), 'miniapp-dashboard-'));
    grpcPort = await freePort();
    serve = await startServeProcess({ home, grpcPort, extraArgs: ['--log-level', 'info'] });
  });
  afterAll(async () => {
    tmux.kill();
    await serve?.stop();
    serve?.dispose();
    rmSync(home, { recursive: true, force: true });
  });

  it('is refused piped or redirected, in one line pointing at monitor metrics --json (exit 2)', () => {
    const args = [BIN, 'monitor', 'dashboard', '--addr', serve!.info.grpc.address, '--token', serve!.info.adminToken];
    const env = { PATH: process.env.PATH, HOME: home, MINIAPP_CONFIG_DIR: join(home, 'config') };
    const piped = spawnSync(process.execPath, args, { env, encoding: 'utf8' });
    expect(piped.status).toBe(2);
    expect(piped.stdout).toBe('');
    expect(piped.stderr).toBe(REFUSAL);
    const file = join(home, 'out.txt');
    const fd = openSync(file, 'w');
    try {
      const redirected = spawnSync(process.execPath, args, { env, encoding: 'utf8', stdio: ['ignore', fd, 'pipe'] });
      expect(redirected.status).toBe(2);
      expect(redirected.stderr).toBe(REFUSAL);
    } finally {
      closeSync(fd);
    }
    expect(readFileSync(file, 'utf8')).toBe('');
  });

  it('shows live rates under load, survives a restart of serve, uses a larger terminal, and q restores the terminal', { timeout: 180_000 }, async () => {
    let traffic = load(serve!.info.url);
    let pane: Pane | undefined;
    try {
      const env = { HOME: home, MINIAPP_CONFIG_DIR: join(home, 'config'), PS1: '$ ' };
      pane = await tmux.session(80, 24, 'bash --norc --noprofile', env);
      await pane.waitFor('the shell prompt', (screen) => screen.some((line) => line.startsWith('$')));
      await pane.keys('-l', `stty -g > ${shellQuote(join(home, 'stty-before'))}; clear; echo marker-before`);
      await pane.keys('Enter');
      await pane.waitFor('the marker', (screen) => screen.includes('marker-before'));
      const command = [process.execPath, BIN, 'monitor', 'dashboard', '--addr', serve!.info.grpc.address, '--token', serve!.info.adminToken, '--interval', '1s']
        .map(shellQuote)
        .join(' ');
      await pane.keys('-l', `${command}; echo "[exit $?]"; stty -g > ${shellQuote(join(home, 'stty-after'))}`);
      await pane.keys('Enter');

      // Full screen, cursor hidden, live; the first non-zero HTTP rate comes with at most three points drawn.
      await pane.waitFor('the live dashboard', (screen) => screen[0]?.includes('· live') && screen);
      expect(await pane.format('#{alternate_on} #{cursor_flag}')).toBe('1 0');
      const first = await pane.waitFor('a non-zero HTTP rate', (screen) => {
        const http = row(screen, 'HTTP req/s');
        return http && http.value > 0 ? { http, screen } : undefined;
      });
      expect(first.http.points).toBeGreaterThanOrEqual(1);
      expect(first.http.points).toBeLessThanOrEqual(3);
      const frame = await pane.waitFor('the 404s among the errors', (screen) => screen.some((line) => /^errors .*HTTP 404×\d+/.test(line)) && screen);
      for (const label of ['HTTP p99', 'gRPC req/s', 'gRPC p99', 'orders/min', 'payments/min', 'in flight', 'webhooks', 'database', '── log']) {
        expect(
          frame.some((line) => line.startsWith(label)),
          label,
        ).toBe(true);
      }
      expect(frame.find((line) => line.startsWith('database'))).toMatch(/ready$/);
      expect(frame.find((line) => line.startsWith('in flight'))).toMatch(/HTTP \d+ · gRPC \d+/);
      // The 80x24 screen holds all of it, the log lines below, nothing past the edge.
      const logAt = frame.findIndex((line) => line.startsWith('── log'));
      expect(frame.slice(logAt + 1).some((line) => /\d\d:\d\d:\d\d\.\d{3} INFO/.test(line))).toBe(true);
      for (const line of frame) expect([...line].length, line).toBeLessThan(80);

      // A larger terminal: longer sparklines and rules, more log lines.
      await pane.resize(160, 50);
      const wide = await pane.waitFor('the wider dashboard', (screen) => {
        const rule = screen.find((line) => line.startsWith('── log'));
        return rule && [...rule].length > 140 && screen;
      });
      expect(wide.length).toBeGreaterThan(40);
      for (const line of wide) expect([...line].length, line).toBeLessThan(160);

      // serve stops: the dashboard says it is reconnecting; serve is back on the same address: live again, rates again.
      await traffic.stop();
      await serve!.stop();
      await pane.waitFor('"reconnecting"', (screen) => screen[0]?.includes('reconnecting'));
      serve = await startServeProcess({ home, grpcPort, extraArgs: ['--log-level', 'info'] });
      traffic = load(serve.info.url);
      await pane.waitFor('live again after the restart', (screen) => screen[0]?.includes('· live'));
      await pane.waitFor('a non-zero HTTP rate after the restart', (screen) => {
        const http = row(screen, 'HTTP req/s');
        return http !== undefined && http.value > 0 && screen[0]!.includes('· live');
      });

      // q: the shell's screen as it was, the cursor shown, the terminal's settings unchanged.
      await pane.keys('q');
      const after = await pane.waitFor('the dashboard to end', (screen) => screen.some((line) => line.startsWith('[exit')) && screen);
      expect(after.find((line) => line.startsWith('[exit'))).toBe('[exit 0]');
      expect(after).toContain('marker-before');
      expect(after.some((line) => line.startsWith('HTTP req/s'))).toBe(false);
      expect(await pane.format('#{alternate_on} #{cursor_flag}')).toBe('0 1');
      await pane.waitFor('the shell prompt again', (screen) => screen.at(-1) === '$' || screen.filter((line) => line.startsWith('$')).length >= 1);
      const sttyAfter = join(home, 'stty-after');
      await pane.waitFor('stty -g after the dashboard', () => existsSync(sttyAfter) && readFileSync(sttyAfter, 'utf8').includes('\n'));
      expect(readFileSync(sttyAfter, 'utf8')).toBe(readFileSync(join(home, 'stty-before'), 'utf8'));
    } finally {
      await traffic.stop();
    }
  });
});
