/**
 * Errors raised before any route runs (Node's HTTP parser, Fastify's
 * router, content-type parsing) answer with the same `{ error, detail,
 * code }` body as every other error, on every mount.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from 'node:net';
import { request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';

let running: RunningServe;

beforeAll(async () => {
  running = await startTestServe();
});
afterAll(async () => running.close());

/** Sends bytes as they are (no client library would send them) and reads the whole answer. */
function raw(bytes: string): Promise<{ status: number; headers: string; body: string }> {
  const { port } = new URL(running.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1');
    let data = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => (data += chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const [head = '', ...rest] = data.split('\r\n\r\n');
      resolve({ status: Number(head.split(' ')[1]), headers: head, body: rest.join('\r\n\r\n') });
    });
    socket.write(bytes);
  });
}

function expectErrorBody(text: string) {
  const body = JSON.parse(text);
  expect(body).toEqual({ error: expect.any(String), detail: expect.any(String), code: expect.any(String) });
  expect(body).not.toHaveProperty('statusCode');
  expect(body).not.toHaveProperty('message');
  return body;
}

describe('errors before routing', () => {
  it('answers a header with a control character with 400 and the error body', async () => {
    for (const path of ['/api/v2/blog/posts', '/api/auth/me', '/health']) {
      const res = await raw(`POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \x1f\r\nContent-Length: 0\r\n\r\n`);
      expect(res.status, path).toBe(400);
      expect(res.headers).toMatch(/content-type: application\/json/i);
      expect(expectErrorBody(res.body).code).toBe('BAD_REQUEST');
    }
  });

  it('answers oversized headers with 431 and the error body', async () => {
    const res = await raw(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(res.status).toBe(431);
    expect(expectErrorBody(res.body).code).toBe('HEADERS_TOO_LARGE');
  });

  it('answers a path with malformed percent-encoding with 400 and the error body', async () => {
    for (const path of ['/api/v2/blog/posts/%E0%A4%A', '/api/auth/%ZZ', '/%']) {
      const res = await raw(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      expect(res.status, path).toBe(400);
      expectErrorBody(res.body);
    }
  });

  it('answers a body in an unknown content type, malformed JSON and a bad Content-Length in the error shape', async () => {
    for (const mount of ['/api/v1', '/api/v2', '/api']) {
      const typed = await request(`${running.url}${mount}/users`, { method: 'POST', headers: { 'content-type': 'text/csv' }, body: 'a,b' });
      expect(typed.statusCode).toBe(415);
      expectErrorBody(await typed.body.text());
      const broken = await request(`${running.url}${mount}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"email":' });
      expect(broken.statusCode).toBe(400);
      expectErrorBody(await broken.body.text());
    }
    const res = await raw('POST /api/v2/users HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: abc\r\n\r\n{}');
    expect(res.status).toBe(400);
    expectErrorBody(res.body);
  });
});
