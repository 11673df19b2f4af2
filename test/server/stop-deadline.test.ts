/**
 * Issue 39 item 4: HTTP request time-outs and the stop of a real `serve`
 * process, against clients that send their bodies a byte every 500 ms and
 * never finish. Fastify's close waits for every request in flight, and
 * Fastify leaves Node's request time-out off: such bodies kept serve alive
 * after SIGTERM for as long as they went on, and a second signal did not
 * stop it. What must hold: serve exits within its drain plus its stop
 * deadline (5 s) whatever the clients do; at once on a second signal; and
 * a body that has not arrived within --request-timeout gets 408 and its
 * connection closed.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { connect, type Socket } from 'node:net';
import { startServeProcess, type ServeProcess } from '../helpers/chaos.js';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

/** What a trickling client has heard, and whether serve closed its connection. */
interface Trickle {
  socket: Socket;
  heard: string;
  closed: boolean;
  closedAt?: number;
}

/** A sign-up whose 1,000-byte JSON body comes a byte every 500 ms (it would take 8 minutes). */
function trickle(url: string): Promise<Trickle> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const state: Trickle = { socket, heard: '', closed: false };
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (state.heard += chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      state.closed = true;
      state.closedAt = Date.now();
    });
    socket.once('connect', () => {
      socket.write(`POST /api/v2/users HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`);
      const drip = setInterval(() => (socket.destroyed ? clearInterval(drip) : socket.write(' ')), 500);
      socket.once('close', () => clearInterval(drip));
      resolve(state);
    });
    socket.once('error', reject);
  });
}

async function serveWith(extraArgs: string[]): Promise<ServeProcess> {
  const serve = await startServeProcess({ extraArgs: ['--no-grpc', ...extraArgs] });
  cleanups.push(() => serve.dispose());
  return serve;
}

/** The process's exit, or undefined if it is still running after `boundMs` (a safety bound; killed by the cleanup). */
async function exitWithin(serve: ServeProcess, boundMs: number): Promise<{ code: number | null; signal: NodeJS.Signals | null } | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), boundMs)));
  const result = await Promise.race([serve.exited, late]);
  clearTimeout(timer);
  return result;
}

describe('serve against bodies that never finish', () => {
  it('exits after SIGTERM within the drain plus the stop deadline, closing the trickling connections', async () => {
    const serve = await serveWith(['--drain', '1s']);
    const clients = await Promise.all(Array.from({ length: 5 }, () => trickle(serve.info.url)));
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    const started = Date.now();
    serve.child.kill('SIGTERM');
    // 1 s of drain + 5 s of deadline + slack for a busy machine.
    const exit = await exitWithin(serve, 9_000);
    expect(exit, `still running ${Date.now() - started} ms after SIGTERM`).toEqual({ code: 0, signal: null });
    expect(clients.every((client) => client.closed)).toBe(true);
  }, 30_000);

  it('exits at once on a second SIGTERM, whatever is in flight', async () => {
    const serve = await serveWith(['--drain', '20s']);
    await Promise.all(Array.from({ length: 5 }, () => trickle(serve.info.url)));
    await new Promise((resolve) => setTimeout(resolve, 700));
    serve.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 500));
    const started = Date.now();
    serve.child.kill('SIGTERM');
    const exit = await exitWithin(serve, 3_000);
    expect(exit, `still running ${Date.now() - started} ms after the second SIGTERM`).toEqual({ code: 0, signal: null });
    expect(serve.stderr()).toContain('second signal: drain cut short, stopping at once');
  }, 30_000);

  it('answers a body that has not arrived within --request-timeout with 408 and closes its connection', async () => {
    const serve = await serveWith(['--request-timeout', '1s']);
    const client = await trickle(serve.info.url);
    const started = Date.now();
    while (!client.closed && Date.now() - started < 6_000) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(client.closed).toBe(true);
    expect(client.heard).toMatch(/^HTTP\/1\.1 408 /);
    expect(client.heard).toContain('"code":"REQUEST_TIMEOUT"');
    // Other clients are answered as before.
    const health = await fetch(`${serve.info.url}/health`);
    expect(health.status).toBe(200);
    // Counted once, under its route (it was routed before its body stopped coming), not among the refusals before routing.
    const metrics = await (await fetch(`${serve.info.url}/metrics`)).text();
    expect(metrics).toContain('miniapp_http_requests_total{method="POST",route="/api/v2/users",status="408"} 1\n');
    expect(metrics).not.toMatch(/route="\/api\/v2\/users",status="499"|route="\(refused\)",status="408"/);
  }, 30_000);
});
