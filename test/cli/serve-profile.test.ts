/**
 * `miniapp serve` and the profile (issue 24, item 8): a profile without a
 * gRPC connection learns serve's address and admin token; one that has one
 * keeps it (a second, throwaway serve must not take it over) unless
 * --save-profile asks; the banner says which; TLS goes along as grpc-tls
 * (and a self-signed certificate as grpc-ca), so that `miniapp users list`
 * works against a TLS serve without flags. Real serve processes, ports 0.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Sandbox } from '../helpers/cli.js';
import { selfSigned } from '../helpers/certs.js';
import { BIN } from '../helpers/launcher.js';

let sb: Sandbox;
const children: ChildProcess[] = [];

beforeEach(() => {
  sb = new Sandbox();
});
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode !== null) continue;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGINT');
    await exited;
  }
  sb.dispose();
});

interface Info {
  grpc: { address: string; tls: boolean };
  /** Read from `adminTokenFile`: the banner names the file, never the token. */
  adminToken: string;
  adminTokenFile: string;
  profile: { name: string; saved: boolean };
}

/** serve on free ports with --json: the first line of stdout is its banner as JSON. */
async function serve(args: string[], pretty = false): Promise<{ info?: Info; banner: string }> {
  const child = spawn(
    process.execPath,
    [BIN, 'serve', '--port', '0', '--grpc-port', '0', '--log-level', 'warn', '--drain', '0', ...(pretty ? [] : ['--json']), ...args],
    {
      env: { PATH: process.env.PATH, HOME: sb.root, ...sb.env } as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(child);
  let out = '';
  let err = '';
  child.stderr!.on('data', (chunk) => (err += chunk));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk) => {
      out += chunk;
      if (pretty ? out.includes('Stop with Ctrl-C') : out.includes('\n')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${err}`)));
  });
  if (pretty) return { banner: out };
  const info = JSON.parse(out.split('\n')[0]!) as Info;
  return { info: { ...info, adminToken: readFileSync(info.adminTokenFile, 'utf8').trim() }, banner: out };
}

const setting = async (key: string) => (await sb.run(['config', 'get', key, '--reveal'])).stdout.trim();

describe('serve and the profile', () => {
  it('writes the gRPC address and token only into a profile without them, or with --save-profile, and says so', async () => {
    const first = (await serve(['--store', 'memory'])).info!;
    expect(first.profile).toEqual({ name: 'default', saved: true });
    expect(await setting('grpc-addr')).toBe(first.grpc.address);
    expect(await setting('grpc-token')).toBe(first.adminToken);

    // A second, throwaway serve on other ports and another store: the profile keeps pointing at the first.
    const second = await serve(['--store', 'memory'], true);
    expect(second.banner).toMatch(
      /admin {5}token in \S+admin-token\.\d+ \(not stored: profile "default" has a gRPC connection of its own; --save-profile stores this one\)/,
    );
    expect(await setting('grpc-addr')).toBe(first.grpc.address);
    expect(await setting('grpc-token')).toBe(first.adminToken);
    const list = await sb.run(['users', 'list', '--json']);
    expect(list.code, list.stderr).toBe(0);

    const third = (await serve(['--store', 'memory', '--save-profile'])).info!;
    expect(third.profile.saved).toBe(true);
    expect(await setting('grpc-addr')).toBe(third.grpc.address);
    expect(await setting('grpc-token')).toBe(third.adminToken);
  });

  it('carries TLS into the profile: users list works against a TLS serve without --tls or --ca', async () => {
    const dir = join(sb.root, 'pki');
    mkdirSync(dir, { recursive: true });
    // Self-signed for 127.0.0.1: the certificate serve presents is the CA its profile stores.
    selfSigned(dir, 'server', ['subjectAltName=IP:127.0.0.1']);
    const { info } = await serve(['--store', 'memory', '--grpc-tls-cert', join(dir, 'server.crt'), '--grpc-tls-key', join(dir, 'server.key')], false);
    expect(info!.grpc.tls).toBe(true);
    expect(info!.profile.saved).toBe(true);
    expect(await setting('grpc-tls')).toBe('true');
    expect(await setting('grpc-ca')).toBe(join(dir, 'server.crt'));
    const list = await sb.run(['users', 'list', '--json']);
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toEqual([]);
  });
});
