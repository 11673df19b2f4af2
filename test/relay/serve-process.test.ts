/**
 * `miniapp serve` as a user starts it on a fresh machine: no config, a fresh
 * data dir, the embedded sandbox as upstream; a real process and real HTTP.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';

const bin = fileURLToPath(new URL('../../bin/miniapp.cjs', import.meta.url));
const home = mkdtempSync(join(tmpdir(), 'miniapp-serve-'));
const env = { PATH: process.env.PATH, HOME: home, XDG_CONFIG_HOME: join(home, '.config'), XDG_DATA_HOME: join(home, '.local', 'share') };
let child: ChildProcess | undefined;
/** What the current serve wrote to stderr. */
let stderr = '';

afterEach(() => {
  child?.kill('SIGKILL');
  child = undefined;
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

interface ServeInfo {
  url: string;
  database: string;
  sandbox: { url: string; key: string; aad: string; generated: boolean };
}

function serve(args: string[] = []): Promise<ServeInfo> {
  child = spawn(process.execPath, [bin, 'serve', '--port', '0', '--grpc-port', '0', '--json', '--log-level', 'warn', ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  stderr = '';
  child.stderr!.on('data', (chunk) => {
    err += chunk;
    stderr += chunk;
  });
  return new Promise((resolve, reject) => {
    child!.stdout!.on('data', (chunk) => {
      out += chunk;
      if (out.includes('\n')) resolve(JSON.parse(out.split('\n')[0]!) as ServeInfo);
    });
    child!.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${err}`)));
  });
}

function miniapp(args: string[]) {
  return spawnSync(process.execPath, [bin, ...args], { env, encoding: 'utf8' });
}

async function json(method: 'GET' | 'POST', url: string, body?: unknown, token?: string) {
  const response = await request(url, {
    method,
    headers: { ...(body ? { 'content-type': 'application/json' } : {}), ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: response.statusCode, body: (await response.body.json()) as any };
}

describe('miniapp serve on its embedded defaults', () => {
  it('logs a user in through the relay, records an unlink, and keeps it across a restart', async () => {
    const info = await serve();
    expect(info.database).toBe(join(home, '.local', 'share', 'miniapp', 'miniapp.db'));
    expect(existsSync(info.database)).toBe(true);
    expect(info.sandbox.generated).toBe(true);

    const login = miniapp(['sandbox', 'login', '--user-key', '1001', '--url', info.sandbox.url, '--json']);
    expect(login.status, login.stderr).toBe(0);
    const { authorizationCode } = JSON.parse(login.stdout);

    const token = await json('POST', `${info.url}/api/auth/token`, { authorizationCode, referrer: 'sandbox' });
    expect(token.status).toBe(200);
    const me = await json('GET', `${info.url}/api/auth/me`, undefined, token.body.accessToken);
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ userKey: 1001, name: expect.stringMatching(/^[가-힣]{3}$/), phone: expect.stringMatching(/^010\d{8}$/) });
    expect((await json('GET', `${info.url}/health`)).body.status).toBe('ok');

    const unlink = miniapp(['sandbox', 'unlink', '--user-key', '1001', '--reason', 'WITHDRAWAL_TERMS', '--url', info.sandbox.url]);
    expect(unlink.status, unlink.stderr).toBe(0);
    const listed = JSON.parse(miniapp(['callbacks', 'list', '--json']).stdout);
    expect(listed).toMatchObject([{ userKey: 1001, referrer: 'WITHDRAWAL_TERMS', method: 'POST' }]);

    // SIGTERM with the default --drain: not ready at once, still answering, each answer closing its connection.
    const stopped = new Promise((resolve) => child!.once('exit', resolve));
    child!.kill('SIGTERM');
    const started = Date.now();
    while (!stderr.includes('SIGTERM: draining for 5s') && Date.now() - started < 10_000) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(stderr).toContain('SIGTERM: draining for 5s');
    const ready = await request(`${info.url}/health/ready`);
    expect(ready.statusCode).toBe(503);
    expect(ready.headers.connection).toBe('close');
    expect(await ready.body.json()).toMatchObject({ status: 'unavailable', detail: expect.stringContaining('draining') });
    const live = await request(`${info.url}/health`);
    expect(live.statusCode).toBe(200);
    expect(live.headers.connection).toBe('close');
    await live.body.dump();
    // A second signal skips the rest of the wait.
    child!.kill('SIGTERM');
    expect(await stopped).toBe(0);
    expect(stderr).toContain('second signal: drain cut short');
    expect(stderr).toMatch(/drained: no new calls; finishing calls in flight, then stopping\n[\s\S]*stopped/);

    const again = await serve();
    expect(again.database).toBe(info.database);
    expect(JSON.parse(miniapp(['callbacks', 'list', '--user-key', '1001', '--json']).stdout)).toHaveLength(1);
    expect(JSON.parse(miniapp(['callbacks', 'list', '--user-key', '7', '--json']).stdout)).toEqual([]);
    expect(JSON.parse(miniapp(['callbacks', 'list', '--since', '2h', '--json']).stdout)).toHaveLength(1);
    expect(miniapp(['callbacks', 'list', '--since', 'yesterday-ish']).status).toBe(2);
  }, 60_000);

  it('refuses bad flags with exit 2', () => {
    for (const args of [
      ['--store', 'redis'],
      ['--port', '-1'],
      ['--cors-origin', 'app.example.com'],
      ['--log-level', 'loud'],
      ['--callback-auth', 'nocolon'],
    ]) {
      const result = miniapp(['serve', ...args]);
      expect(result.status, args.join(' ')).toBe(2);
    }
  });

  it('says there is nothing yet for a data dir without a database', () => {
    const result = miniapp(['callbacks', 'list', '--data-dir', join(home, 'empty')]);
    expect(result.status).toBe(0);
    expect(result.stderr).toContain('no database');
  });
});
