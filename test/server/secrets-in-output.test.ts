/**
 * What `miniapp serve` lets out of its secrets (issue 39, items 14-16): the
 * admin token file is 0600 whatever mode it was found at; the banner names
 * that file instead of printing the token when nobody is at a terminal (and
 * always under --json); URLs are logged, printed and streamed through
 * `monitor logs` without their password or secret query values. Real serve
 * processes on ports 0, their stdout and stderr read through pipes.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { request } from 'undici';
import { Sandbox } from '../helpers/cli.js';
import { BIN } from '../helpers/launcher.js';
import { AAD_HEX, KEY_HEX } from '../helpers/vectors.js';

let sb: Sandbox;
const children: ChildProcess[] = [];

beforeEach(() => {
  sb = new Sandbox();
});
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGINT');
    await exited;
  }
  sb.dispose();
});

interface Served {
  child: ChildProcess;
  /** The first line of stdout under --json, parsed. */
  info: Record<string, any> | undefined;
  stdout: () => string;
  stderr: () => string;
}

/** serve on free ports in the sandbox's home; resolves once it has printed its banner. */
async function serve(args: string[], options: { json?: boolean; env?: Record<string, string> } = {}): Promise<Served> {
  const json = options.json ?? true;
  const child = spawn(
    process.execPath,
    [BIN, 'serve', '--port', '0', '--grpc-port', '0', '--drain', '0', '--password-hash-cost', '10', ...(json ? ['--json'] : []), ...args],
    {
      env: { PATH: process.env.PATH, HOME: sb.root, ...sb.env, ...options.env } as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(child);
  let out = '';
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk) => (err += chunk));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.setEncoding('utf8').on('data', (chunk) => {
      out += chunk;
      if (json ? out.includes('\n') : out.includes('Stop with Ctrl-C')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${err}`)));
  });
  return { child, info: json ? (JSON.parse(out.split('\n')[0]!) as Record<string, any>) : undefined, stdout: () => out, stderr: () => err };
}

/** Waits (at most 5 s) until `text()` contains `what`; returns the text either way, for the assertion. */
async function until(text: () => string, what: string): Promise<string> {
  for (let waited = 0; !text().includes(what) && waited < 5_000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
  return text();
}

const dataDir = () => sb.env.MINIAPP_DATA_DIR!;

describe('the admin token file (item 16)', () => {
  it('tightens an admin-token file found at 0644 to 0600 and says so', async () => {
    mkdirSync(dataDir(), { recursive: true, mode: 0o700 });
    const file = join(dataDir(), 'admin-token');
    const token = `mat_${'A'.repeat(43)}`;
    writeFileSync(file, `${token}\n`);
    chmodSync(file, 0o644);

    const served = await serve(['--log-format', 'json']);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    // The token in it is still the one serve uses.
    expect(readFileSync(file, 'utf8').trim()).toBe(token);
    const said = `the admin token file ${file} was mode 0644, readable by others: made it 0600`;
    expect(await until(served.stderr, said)).toContain(said);
  });
});

describe('the admin token in the banner (item 14)', () => {
  it('names the 0600 token file and prints no token when stdout and stderr are pipes, in the text banner and under --json', async () => {
    const file = join(dataDir(), 'admin-token');
    const json = await serve(['--log-format', 'json', '--log-level', 'info']);
    const token = readFileSync(file, 'utf8').trim();
    expect(token).toMatch(/^mat_/);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(json.info!.adminTokenFile).toBe(file);
    expect(json.info).not.toHaveProperty('adminToken');
    await until(json.stderr, 'Server listening');
    expect(json.stdout()).not.toContain(token);
    expect(json.stderr()).not.toContain(token);
    json.child.kill('SIGINT');
    await new Promise((resolve) => json.child.once('exit', resolve));

    const text = await serve(['--log-format', 'json', '--log-level', 'info', '--save-profile'], { json: false });
    await until(text.stderr, 'Server listening');
    expect(text.stdout()).toContain(`admin     token in ${file} (stored as grpc-token in profile "default"`);
    expect(text.stdout()).not.toContain(token);
    expect(text.stderr()).not.toContain(token);
  });

  it('writes the token of a store without a token file (memory) to a 0600 file of the data dir while it runs', async () => {
    const served = await serve(['--store', 'memory']);
    const file = served.info!.adminTokenFile as string;
    expect(file).toBe(join(dataDir(), `admin-token.${served.child.pid}`));
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const token = readFileSync(file, 'utf8').trim();
    expect(token).toMatch(/^mat_/);
    expect(served.stdout() + served.stderr()).not.toContain(token);
    // The token works: the admin's gRPC user list, through the CLI.
    const list = await sb.run(['users', 'list', '--json'], { env: { MINIAPP_GRPC_ADDR: served.info!.grpc.address, MINIAPP_GRPC_TOKEN: token } });
    expect(list.code, list.stderr).toBe(0);
    served.child.kill('SIGINT');
    await new Promise((resolve) => served.child.once('exit', resolve));
    expect(existsSync(file)).toBe(false);
  });
});

describe('URLs in the log (item 15)', () => {
  it('logs an unreachable upstream without its password, in the log and through monitor logs, and request URLs without query secrets', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const password = 'SECRETpass9';
    const served = await serve(['--log-format', 'json', '--log-level', 'info', '--upstream', `http://partner:${password}@127.0.0.1:${port}`], {
      env: { MINIAPP_DECRYPT_KEY: KEY_HEX, MINIAPP_DECRYPT_AAD: AAD_HEX },
    });
    const url = served.info!.url as string;
    expect(served.info!.upstream).not.toContain(password);

    const exchange = await request(`${url}/api/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ authorizationCode: 'code-1', referrer: 'DEFAULT' }),
    });
    const answer = await exchange.body.text();
    expect(exchange.statusCode).toBeGreaterThanOrEqual(500);
    expect(answer).not.toContain(password);
    const queryToken = `mat_${'Q'.repeat(43)}`;
    expect((await request(`${url}/health?token=${queryToken}&limit=5`)).statusCode).toBe(200);

    const log = await until(served.stderr, 'token=REDACTED');
    expect(log).toContain('cannot reach the partner API at http://partner:***@127.0.0.1');
    expect(log).toContain('/health?token=REDACTED&limit=5');
    expect(log).not.toContain(password);
    expect(log).not.toContain(queryToken);

    const token = readFileSync(served.info!.adminTokenFile as string, 'utf8').trim();
    const logs = await sb.run(['monitor', 'logs'], { env: { MINIAPP_GRPC_ADDR: served.info!.grpc.address, MINIAPP_GRPC_TOKEN: token } });
    expect(logs.code, logs.stderr).toBe(0);
    expect(logs.stdout).toContain('cannot reach the partner API at http://partner:***@127.0.0.1');
    expect(logs.stdout).toContain('token=REDACTED');
    expect(logs.stdout + logs.stderr).not.toContain(password);
    expect(logs.stdout + logs.stderr).not.toContain(queryToken);
  });
});
