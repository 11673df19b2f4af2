/**
 * Where the host page is, as a user starts miniapp: `serve` over its
 * embedded sandbox serves it and names it in its banner; `serve` in front
 * of a real partner API has none (/host/ and the module answer 404);
 * `miniapp sandbox` serves it too, with the terms of its flags.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { BIN } from '../helpers/launcher.js';
import { AAD_HEX, KEY_HEX } from '../helpers/vectors.js';

const home = mkdtempSync(join(tmpdir(), 'miniapp-hostpage-'));
const env = { PATH: process.env.PATH, HOME: home, MINIAPP_CONFIG_DIR: join(home, 'config'), MINIAPP_DATA_DIR: join(home, 'data') };
let child: ChildProcess | undefined;
let partner: Server | undefined;

afterEach(async () => {
  child?.kill('SIGKILL');
  child = undefined;
  if (partner) await new Promise((resolve) => partner!.close(resolve));
  partner = undefined;
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

/** Starts `miniapp ARGS` and resolves with what it printed once its banner is complete. */
function start(args: string[], extraEnv: Record<string, string> = {}): Promise<string> {
  child = spawn(process.execPath, [BIN, ...args], { env: { ...env, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr!.on('data', (chunk) => (err += chunk));
  return new Promise((resolve, reject) => {
    child!.stdout!.on('data', (chunk) => {
      out += chunk;
      if (out.includes('Stop with Ctrl-C') || (out.startsWith('{') && out.includes('\n'))) resolve(out);
    });
    child!.once('exit', (code) => reject(new Error(`miniapp ${args.join(' ')} exited with ${code}: ${err}`)));
  });
}

async function get(url: string) {
  const response = await request(url);
  return { status: response.statusCode, headers: response.headers, text: await response.body.text() };
}

describe('the host page of miniapp serve', () => {
  it('is served over the embedded sandbox, and the banner says where', { timeout: 30_000 }, async () => {
    const banner = await start(['serve', '--port', '0', '--no-grpc', '--store', 'memory', '--log-level', 'warn']);
    const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(banner)![1]!;
    expect(banner).toContain(`\n  host page ${url}/host/   your mini-app in a phone frame`);
    expect(banner).toContain(`  log in      open ${url}/host/ and press Log in`);
    const page = await get(`${url}/host/`);
    expect(page.status).toBe(200);
    expect(page.headers['content-security-policy']).toContain("frame-src 'self'");
    const module = await get(`${url}/host/app-login.js`);
    expect(module.status).toBe(200);
    expect(module.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(module.headers['access-control-allow-origin']).toBe('*');
  });

  it('is not there in front of a real partner API: the page, the module, the login window and the API answer 404', { timeout: 30_000 }, async () => {
    // A partner API that is not the sandbox: it answers every call as the real one answers a caller it does not know.
    partner = createServer((_request, response) => {
      response.writeHead(401, { 'content-type': 'application/json' }).end('{"resultType":"FAIL","error":{"errorCode":"invalid_grant","reason":"unknown"}}');
    });
    await new Promise<void>((resolve) => partner!.listen(0, '127.0.0.1', resolve));
    const upstream = `http://127.0.0.1:${(partner.address() as AddressInfo).port}`;
    const flags = ['serve', '--port', '0', '--no-grpc', '--store', 'memory', '--log-level', 'warn', '--upstream', upstream];
    // The key and AAD the console sent: a real partner API's fields are decrypted with them.
    const keys = { MINIAPP_DECRYPT_KEY: KEY_HEX, MINIAPP_DECRYPT_AAD: AAD_HEX };
    const info = JSON.parse((await start([...flags, '--json'], keys)).split('\n')[0]!);
    expect(info.hostPage).toBeNull();
    expect(info.sandbox).toBeNull();
    for (const path of ['/host', '/host/', '/host/app-login.js', '/host/login', '/host/demo', '/host/api/state']) {
      const answer = await get(`${info.url}${path}`);
      expect(answer.status, path).toBe(404);
      expect(JSON.parse(answer.text), path).toMatchObject({ code: 'NOT_FOUND' });
    }
    const refused = await request(`${info.url}/host/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"via":"frame","origin":"http://a"}',
    });
    expect(refused.statusCode).toBe(404);
    await refused.body.dump();

    // The flags that shape the host page say there is none.
    const withApp = spawnSync(process.execPath, [BIN, ...flags, '--app-url', 'http://127.0.0.1:5173/'], { env: { ...env, ...keys }, encoding: 'utf8' });
    expect(withApp.status).toBe(2);
    expect(withApp.stderr).toContain(
      `--app-url, --required-term and --optional-term shape the host page over the embedded sandbox; with the partner API at ${upstream} there is none`,
    );
  });
});

describe('the host page of miniapp sandbox', () => {
  it('is served with the terms of its flags, and the app URL it is given', { timeout: 30_000 }, async () => {
    const info = JSON.parse(
      (
        await start([
          'sandbox',
          '--port',
          '0',
          '--json',
          '--required-term',
          'tos=이용약관',
          '--optional-term',
          'news=News letters',
          '--app-url',
          'http://127.0.0.1:5173/app/',
        ])
      ).split('\n')[0]!,
    );
    expect(info.hostPage).toBe(`${info.url}/host/`);
    const state = JSON.parse((await get(`${info.url}/host/api/state`)).text);
    expect(state).toMatchObject({
      terms: [
        { tag: 'tos', title: '이용약관', required: true },
        { tag: 'news', title: 'News letters', required: false },
      ],
      appUrl: 'http://127.0.0.1:5173/app/',
      callback: null,
    });
    expect((await get(`${info.url}/host/`)).headers['content-security-policy']).toMatch(/frame-src http:\/\/127\.0\.0\.1:5173(;|$)/);
  });

  it('refuses terms and app URLs it cannot show, with exit 2', () => {
    for (const [flag, value, message] of [
      ['--required-term', 'terms service', '--required-term must be TAG=TITLE'],
      ['--optional-term', 'news=', '--optional-term news: the title after "=" must be 1 to 200 printable characters'],
      ['--app-url', 'localhost:5173', '--app-url must be an absolute http or https URL of the mini-app'],
    ]) {
      const result = spawnSync(process.execPath, [BIN, 'sandbox', '--port', '0', flag!, value!], { env, encoding: 'utf8' });
      expect(result.status, `${flag} ${value}`).toBe(2);
      expect(result.stderr, `${flag} ${value}`).toContain(message);
    }
    const twice = spawnSync(process.execPath, [BIN, 'sandbox', '--port', '0', '--required-term', 'a=A', '--optional-term', 'a=B'], { env, encoding: 'utf8' });
    expect(twice.stderr).toContain('the terms tag a is given twice');
  });
});
