/**
 * Upload bodies (issue 39, item 3): 100 connections sending parts of 5 MB
 * and never the closing boundary took serve from 110 MB to 5.3 GB, and a
 * post route read its whole body before looking at the token. Now parts
 * stream to temporary files, at most 16 uploads are read at once (503 with
 * Retry-After beyond), the token is checked before any byte of a body, and
 * an upload that stops sending is dropped with its temporary files. A real
 * serve process, its memory read from /proc.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FormData, request } from 'undici';
import { BIN } from '../helpers/launcher.js';
import { startTestServe } from '../helpers/serve.js';
import { png } from '../helpers/images.js';
import { MAX_UPLOADS_IN_FLIGHT } from '../../src/blog/upload-receiver.js';

const home = mkdtempSync(join(tmpdir(), 'miniapp-upload-bodies-'));
let child: ChildProcess;
let url: string;
let token: string;
const tokens: string[] = [];

beforeAll(async () => {
  child = spawn(
    process.execPath,
    [BIN, 'serve', '--port', '0', '--no-grpc', '--store', 'memory', '--json', '--log-level', 'warn', '--drain', '0', '--rate-limit', '0'],
    {
      env: { PATH: process.env.PATH, HOME: home, MINIAPP_CONFIG_DIR: join(home, 'config'), MINIAPP_DATA_DIR: join(home, 'data'), TMPDIR: join(home) },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stderr!.on('data', (chunk) => (err += chunk));
  url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (chunk) => {
      out += chunk;
      if (out.includes('\n')) resolve((JSON.parse(out.split('\n')[0]!) as { url: string }).url);
    });
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${err}`)));
  });
  // Five accounts: the server's 16 places are four accounts' worth.
  for (let i = 0; i < 5; i++) {
    const name = i === 0 ? 'uploader' : `uploader${i}`;
    const signUp = await request(`${url}/api/v2/users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: name, email: `${name}@example.com`, password: 'correct horse' }),
    });
    expect(signUp.statusCode).toBe(201);
    await signUp.body.dump();
    const login = await request(`${url}/api/v2/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: `${name}@example.com`, password: 'correct horse' }),
    });
    tokens.push(((await login.body.json()) as { access_token: string }).access_token);
  }
  token = tokens[0]!;
}, 30_000);

afterAll(() => {
  child?.kill('SIGKILL');
  rmSync(home, { recursive: true, force: true });
});

const rssKb = () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]);

interface RawConnection {
  socket: Socket;
  /** The status of the answer, once its head has arrived. */
  status: Promise<{ status: number; head: string }>;
  write(bytes: Buffer | string): Promise<void>;
}

/** A connection that sends `head` and then whatever the test writes, and records the answer's status line. */
function open(head: string): RawConnection {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  socket.on('error', () => undefined);
  let received = '';
  const status = new Promise<{ status: number; head: string }>((resolve, reject) => {
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
      const end = received.indexOf('\r\n\r\n');
      if (end !== -1) resolve({ status: Number(received.split(' ')[1]), head: received.slice(0, end) });
    });
    socket.on('close', () => reject(new Error(`closed without an answer: ${received}`)));
  });
  status.catch(() => undefined);
  socket.write(head);
  return {
    socket,
    status,
    write: (bytes) => new Promise<void>((resolve) => (socket.destroyed ? resolve() : socket.write(bytes, () => resolve()))),
  };
}

const BOUNDARY = 'never-closed-boundary';
const uploadHead = (path: string, length: number, auth = token) =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${auth}\r\n` +
  `Content-Type: multipart/form-data; boundary=${BOUNDARY}\r\nContent-Length: ${length}\r\n\r\n`;
const partHead = (i: number) => `--${BOUNDARY}\r\nContent-Disposition: form-data; name="files"; filename="${i}.png"\r\nContent-Type: image/png\r\n\r\n`;

describe('upload bodies', () => {
  it('holds 20 uploads of 10 parts of 1 MB that never end (five accounts, four each) in bounded memory, and refuses those past 16 with 503', async () => {
    // Warm up: a real upload or two, so the baseline has the code paths loaded.
    for (let i = 0; i < 2; i++) {
      const form = new FormData();
      form.append('file', new Blob([png(3 + i, 2)], { type: 'image/png' }), 'a.png');
      const res = await request(`${url}/api/v2/upload/image`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form });
      expect(res.statusCode).toBe(200);
      await res.body.dump();
    }
    const before = rssKb();
    const connections = Array.from({ length: 20 }, (_, i) => open(uploadHead('/api/v2/upload/images', 100 * 1024 * 1024, tokens[i % 5])));
    const part = Buffer.alloc(1024 * 1024, 0x61);
    for (let i = 0; i < 10; i++) {
      await Promise.all(connections.map((c) => c.write(Buffer.concat([Buffer.from(`${i > 0 ? '\r\n' : ''}${partHead(i)}`), part]))));
    }
    // Every byte written has been read by serve (or dropped for a refused upload).
    await new Promise((resolve) => setTimeout(resolve, 500));
    const growthMb = (rssKb() - before) / 1024;
    const answered = await Promise.all(
      connections.map((c) => Promise.race([c.status, new Promise<undefined>((resolve) => setTimeout(resolve, 200, undefined))])),
    );
    const refused = answered.filter((answer) => answer?.status === 503);
    for (const c of connections) c.socket.destroy();
    // 200 MB were sent; held in memory they were 200 MB and more.
    expect(growthMb).toBeLessThan(64);
    expect(refused.length).toBe(20 - MAX_UPLOADS_IN_FLIGHT);
    expect(refused[0]!.head).toMatch(/\r\nretry-after: \d+/i);
    expect(answered.filter((answer) => answer === undefined).length).toBe(MAX_UPLOADS_IN_FLIGHT);
  }, 30_000);

  it('gives one account at most 4 uploads at once: its fifth is 429 TOO_MANY_UPLOADS with Retry-After, while another account still gets in', async () => {
    const mine = Array.from({ length: 4 }, () => open(uploadHead('/api/v2/upload/images', 10 * 1024 * 1024)));
    await Promise.all(mine.map((c) => c.write(partHead(0))));
    // The four are being read (none answered), then the fifth comes.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const fifth = open(uploadHead('/api/v2/upload/images', 10 * 1024 * 1024));
    const refused = await fifth.status;
    expect(refused.status).toBe(429);
    expect(refused.head).toMatch(/\r\nretry-after: \d+/i);
    expect(refused.head).toMatch(/\r\nconnection: close/i);
    const other = open(uploadHead('/api/v2/upload/images', 10 * 1024 * 1024, tokens[1]));
    await other.write(partHead(0));
    expect(await Promise.race([other.status, new Promise<undefined>((resolve) => setTimeout(resolve, 300, undefined))])).toBeUndefined();
    for (const c of [...mine, fifth, other]) c.socket.destroy();
    // Once they are gone, the account uploads again.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const form = new FormData();
    form.append('file', new Blob([png(7, 3)], { type: 'image/png' }), 'again.png');
    const again = await request(`${url}/api/v2/upload/image`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form });
    expect(again.statusCode).toBe(200);
    await again.body.dump();
  });

  it('answers 401 to a post without a valid token before its body has arrived', async () => {
    for (const [path, auth] of [
      ['/api/v2/blog/posts', 'mat_not-a-token'],
      ['/api/v2/upload/image', 'mat_not-a-token'],
    ] as const) {
      const c = open(
        `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${auth}\r\nContent-Type: ${path.includes('upload') ? `multipart/form-data; boundary=${BOUNDARY}` : 'application/json'}\r\nContent-Length: 500000\r\n\r\n{"title":`,
      );
      const answer = await Promise.race([c.status, new Promise<undefined>((resolve) => setTimeout(resolve, 3000, undefined))]);
      // The body is still open: 499,990 bytes were never sent.
      expect(c.socket.destroyed, path).toBe(false);
      expect(answer?.status, path).toBe(401);
      c.socket.destroy();
    }
  });

  it('drops an upload whose body stops arriving, and removes its temporary files', async () => {
    const scratch = mkdtempSync(join(tmpdir(), 'miniapp-upload-idle-'));
    const previous = process.env.TMPDIR;
    process.env.TMPDIR = scratch;
    const running = await startTestServe({ uploadIdleTimeoutMs: 300 });
    try {
      const { port } = new URL(running.url);
      const socket = connect(Number(port), '127.0.0.1');
      socket.on('error', () => undefined);
      const closed = new Promise((resolve) => socket.once('close', resolve));
      socket.write(uploadHead('/api/v2/upload/image', 10 * 1024 * 1024, running.adminToken).replace('name="files"', 'name="file"'));
      socket.write(Buffer.concat([Buffer.from(partHead(0).replace('name="files"', 'name="file"')), png(4, 4).subarray(0, 30)]));
      await new Promise((resolve) => setTimeout(resolve, 150));
      // The part is on its way to a temporary file.
      expect(readdirSync(scratch).filter((entry) => entry.startsWith('miniapp-upload-')).length).toBe(1);
      await Promise.race([closed, new Promise((_resolve, reject) => setTimeout(() => reject(new Error('still open after 5 s')), 5000))]);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(readdirSync(scratch).filter((entry) => entry.startsWith('miniapp-upload-'))).toEqual([]);
    } finally {
      if (previous === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = previous;
      await running.close();
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});
