/**
 * Deeply nested JSON (issue 39, item 5): a body of half a million `[` held
 * the event loop for up to a second in JSON.parse and the schema validator.
 * Every JSON route of serve refuses nesting past 32 levels before parsing,
 * and a post route reads no more than a valid post can take. Raw HTTP
 * against a listening serve.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import type { RunningServe } from '../../src/server/serve.js';
import { POST_BODY_LIMIT } from '../../src/blog/api.js';
import { jsonNestingExceeds, MAX_JSON_DEPTH } from '../../src/http/json-body.js';
import { startTestServe } from '../helpers/serve.js';

let running: RunningServe;

beforeAll(async () => {
  running = await startTestServe();
});
afterAll(async () => {
  await running.close();
});

/** One request over a fresh connection; the body's bytes exactly as given. */
function send(path: string, body: string, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const { hostname, port } = new URL(running.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: hostname,
        port,
        path,
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      },
    );
    // A server that answers before reading all of a refused body may reset the connection after its answer.
    req.on('error', reject);
    req.end(body);
  });
}

const deep = (levels: number) => `{"title":${'['.repeat(levels)}${']'.repeat(levels)},"content":"x"}`;
const admin = () => ({ authorization: `Bearer ${running.adminToken}` });

describe('nested JSON bodies', () => {
  it('refuses a post 250,000 levels deep with 400 naming the limit; 500,000 deep (1 MB) is over the post limit: 413', async () => {
    const body = deep(250_000);
    expect(Buffer.byteLength(body)).toBeLessThan(POST_BODY_LIMIT);
    const res = await send('/api/v2/blog/posts', body, admin());
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'Bad Request', detail: expect.stringContaining('nested deeper than 32 levels'), code: 'INVALID_JSON' });
    const huge = await send('/api/v2/blog/posts', deep(500_000), admin());
    expect(huge.status).toBe(413);
  });

  it('refuses a flat body of the same size on the post routes with 413: a post is not a megabyte', async () => {
    const flat = JSON.stringify({ title: 'flat', content: 'a'.repeat(1_000_000) });
    const created = await send('/api/v2/blog/posts', flat, admin());
    expect(created.status).toBe(413);
    expect(created.body.code).toBe('PAYLOAD_TOO_LARGE');
    const changed = await send('/api/v2/blog/posts/1', flat, admin());
    expect(changed.status).toBe(413);
    expect(POST_BODY_LIMIT).toBeLessThan(640 * 1024);
  });

  it('still takes the longest valid post in its widest JSON (every character a \\u escape)', async () => {
    const body = JSON.stringify({
      title: '\u0001'.repeat(200),
      content: '\u0001'.repeat(100_000),
      tags: Array.from({ length: 20 }, () => '\u0001'.repeat(50)),
    });
    expect(Buffer.byteLength(body)).toBeGreaterThan(600_000);
    const res = await send('/api/v2/blog/posts', body, admin());
    expect(res.status).toBe(201);
  });

  it('takes 32 levels and refuses 33, on the blog, its login and sign-up, and the relay', async () => {
    const nested = (levels: number) => `{"x":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`;
    expect(jsonNestingExceeds(nested(32), MAX_JSON_DEPTH)).toBe(false);
    expect(jsonNestingExceeds(nested(33), MAX_JSON_DEPTH)).toBe(true);
    // Brackets inside strings, escaped quotes included, are text.
    expect(jsonNestingExceeds(JSON.stringify({ x: '["\\'.repeat(100) }), MAX_JSON_DEPTH)).toBe(false);

    const ok = await send('/api/v2/auth/login', nested(32));
    expect(ok.status).toBe(400);
    expect(ok.body.detail).not.toContain('nested');
    for (const path of ['/api/v2/auth/login', '/api/v1/users', '/api/v2/blog/posts']) {
      const res = await send(path, nested(33), admin());
      expect(res.status, path).toBe(400);
      expect(res.body, path).toMatchObject({ code: 'INVALID_JSON', detail: expect.stringContaining('nested deeper than 32 levels') });
    }
    const relay = await send('/api/auth/token', deep(30_000));
    expect(relay.status).toBe(400);
    expect(relay.body).toMatchObject({ code: 'INVALID_JSON', detail: expect.stringContaining('nested deeper than 32 levels') });
  });

  it('answers a body that nests too deep as soon as the level past the limit arrives, and closes the connection instead of reading the rest', async () => {
    const answer = await partialBody('/api/v2/blog/posts', `{"title":${'['.repeat(40)}`, 400_000, admin());
    expect(answer.status).toBe(400);
    expect(answer.headers).toMatch(/^connection: close\r$/im);
    expect(answer.body).toMatchObject({ code: 'INVALID_JSON', detail: expect.stringContaining('nested deeper than 32 levels') });
    // serve closed the connection although 400 KB were announced and a few bytes sent.
    expect(answer.closedByServer).toBe(true);
  });

  it('closes the connection of any answer sent before its body arrived (here a 401), so the rest is never read', async () => {
    const answer = await partialBody('/api/v2/blog/posts', '{"title":"t",', 400_000);
    expect(answer.status).toBe(401);
    expect(answer.headers).toMatch(/^connection: close\r$/im);
    expect(answer.closedByServer).toBe(true);
    // A request whose body came whole keeps its connection.
    const whole = await send('/api/v2/blog/posts', '{"title":"t","content":"c"}');
    expect(whole.status).toBe(401);
  });
});

/**
 * Announces `length` bytes, sends only `start`, and waits (never sending the rest) for the answer and for serve to
 * close the connection; a server that waits for the whole body answers nothing before its request time-out.
 */
function partialBody(path: string, start: string, length: number, headers: Record<string, string> = {}) {
  const { hostname, port } = new URL(running.url);
  return new Promise<{ status: number; headers: string; body: any; closedByServer: boolean }>((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => (text += chunk));
    socket.on('error', reject);
    socket.on('end', () => {
      const [head, body] = text.split('\r\n\r\n') as [string, string];
      resolve({ status: Number(head.split(' ')[1]), headers: `${head}\r`, body: JSON.parse(body), closedByServer: true });
    });
    const extra = Object.entries(headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('');
    socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n${extra}\r\n${start}`);
  });
}
