/**
 * Errors raised before any route runs (Node's HTTP parser, Fastify's
 * router, content-type parsing) answer with the same `{ error, detail,
 * code }` body as every other error, on every mount.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from 'node:net';
import { request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { SECURITY_HEADERS } from '../../src/http/security-headers.js';
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

/** The security headers every answer carries, in a raw head. */
function expectSecurityHeaders(head: string) {
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) expect(head.toLowerCase(), name).toContain(`\r\n${name}: ${value.toLowerCase()}`);
}

/** The http_requests_total series of requests refused before routing, by method and status. */
async function refusedCounts(): Promise<Record<string, number>> {
  const text = await (await request(`${running.url}/metrics`)).body.text();
  const counts: Record<string, number> = {};
  for (const [, method, status, value] of text.matchAll(/^miniapp_http_requests_total\{method="([^"]*)",route="\(refused\)",status="(\d+)"\} (\d+)$/gm)) {
    counts[`${method} ${status}`] = Number(value);
  }
  return counts;
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

  it('names a duplicate Content-Length, and Content-Length beside Transfer-Encoding, each for what it is', async () => {
    const twice = await raw('POST /api/auth/token HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}');
    expect({ status: twice.status, body: expectErrorBody(twice.body) }).toEqual({
      status: 400,
      body: { error: 'Content-Length is sent more than once', detail: 'Content-Length is sent more than once', code: 'BAD_REQUEST' },
    });
    const both = await raw('POST /api/auth/token HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n');
    expect({ status: both.status, detail: expectErrorBody(both.body).detail }).toEqual({
      status: 400,
      detail: 'Content-Length and Transfer-Encoding must not both be sent',
    });
    const coding = await raw('POST /api/auth/token HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n');
    expect({ status: coding.status, detail: expectErrorBody(coding.body).detail }).toEqual({
      status: 400,
      detail: 'the Transfer-Encoding header is not valid: chunked, as its last coding, is what is taken',
    });
  });

  it('gives every request refused before routing the security headers, and counts it in /metrics under the route (refused)', async () => {
    const before = await refusedCounts();
    const refusals = [
      `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      'POST /api/auth/token HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}',
      'POST /api/auth/token HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      'GET /api/auth/%ZZ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      'DELETE /api/v2/blog/posts/%E0%A4%A HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      `GET /api/v2/blog/posts/${'1'.repeat(120)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
    ];
    const statuses: number[] = [];
    for (const bytes of refusals) {
      const res = await raw(bytes);
      statuses.push(res.status);
      expectSecurityHeaders(res.headers);
      expectErrorBody(res.body);
    }
    expect(statuses).toEqual([431, 400, 400, 400, 400, 414]);
    const after = await refusedCounts();
    const added = (key: string) => (after[key] ?? 0) - (before[key] ?? 0);
    // The parser's refusals come before the method is read; the router's know it.
    expect({
      '(unknown) 431': added('(unknown) 431'),
      '(unknown) 400': added('(unknown) 400'),
      'GET 400': added('GET 400'),
      'DELETE 400': added('DELETE 400'),
      'GET 414': added('GET 414'),
    }).toEqual({
      '(unknown) 431': 1,
      '(unknown) 400': 2,
      'GET 400': 1,
      'DELETE 400': 1,
      'GET 414': 1,
    });
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
