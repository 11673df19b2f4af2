/**
 * Issue 39 item 1: HTTP/2 rapid reset (CVE-2023-44487) on the gRPC port of
 * a real `serve` process. Four raw node:http2 clients open streams without
 * a token and reset each at once, reconnecting whenever serve closes them.
 * Without a reset budget of serve's own, Node's nghttp2 spends its budget,
 * sends GOAWAY INTERNAL_ERROR and leaves each socket in CLOSE-WAIT: serve's
 * descriptors climbed until it accepted nothing. What must hold: each
 * session gets GOAWAY ENHANCE_YOUR_CALM (11), its address is refused new
 * connections for a while (other addresses are not), serve's descriptors are back
 * near their baseline within seconds, and /health and a real grpc-js
 * client are answered during the attack and after it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { readdirSync } from 'node:fs';
import http2 from 'node:http2';
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { request } from 'undici';
import { startServeProcess, type ServeProcess } from '../helpers/chaos.js';
import { userServiceDefinition } from '../../src/users/proto.js';
import { AddressPenalties } from '../../src/grpc/session-guard.js';
import { grpcFrame, grpcStatusOf, rawGrpcStream } from '../helpers/raw-grpc.js';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

const descriptors = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;

/** An HTTP/2 session to `address` (host:port) from the local address `localAddress`. */
function connectFrom(address: string, localAddress: string): http2.ClientHttp2Session {
  const [host, port] = [address.slice(0, address.lastIndexOf(':')), Number(address.slice(address.lastIndexOf(':') + 1))];
  return http2.connect(`http://${address}`, { createConnection: () => net.connect({ host, port, localAddress }) });
}

/** GetUserRequest { user_id: 999999 }: field 1, varint; NOT_FOUND (grpc-status 5). */
const GET_MISSING_USER = Buffer.from([0x08, 0xbf, 0x84, 0x3d]);

/** The attackers' address: another loopback address than the well-behaved clients' 127.0.0.1. */
const ATTACKER = '127.0.0.2';

/** One plain GetUser on a fresh connection from `localAddress`: its grpc-status, or how the connection ended. */
function freshCall(address: string, localAddress: string, token: string): Promise<{ status?: string; goaway?: number }> {
  return new Promise((resolve) => {
    const session = connectFrom(address, localAddress);
    let goaway: number | undefined;
    const done = (result: { status?: string; goaway?: number }) => {
      session.destroy();
      resolve(result);
    };
    session.on('error', () => undefined);
    session.on('goaway', (code) => (goaway = code));
    session.on('close', () => done({ goaway }));
    try {
      const stream = rawGrpcStream(session, '/user.v1.UserService/GetUser', token);
      void grpcStatusOf(stream).then((status) => status !== undefined && done({ status, goaway }));
      stream.end(grpcFrame(GET_MISSING_USER));
    } catch {
      done({ goaway });
    }
    setTimeout(() => done({ goaway }), 3_000).unref();
  });
}

/** Sessions that open and reset streams until `stopped()`; the GOAWAY codes serve sent them. */
async function resetFlood(address: string, stopped: () => boolean, goaways: number[]): Promise<void> {
  while (!stopped()) {
    const session = connectFrom(address, ATTACKER);
    session.on('error', () => undefined);
    session.on('goaway', (code) => goaways.push(code));
    const connected = await new Promise<boolean>((resolve) => {
      session.once('connect', () => resolve(true));
      session.once('close', () => resolve(false));
    });
    while (connected && !stopped() && !session.closed && !session.destroyed) {
      for (let i = 0; i < 50 && !session.closed && !session.destroyed; i++) {
        try {
          rawGrpcStream(session, '/user.v1.UserService/GetUser').close(http2.constants.NGHTTP2_CANCEL);
        } catch {
          break;
        }
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
    session.destroy();
  }
}

async function healthAnswers(url: string): Promise<boolean> {
  try {
    const answer = await request(`${url}/health`, { headersTimeout: 3_000, bodyTimeout: 3_000 });
    await answer.body.dump();
    return answer.statusCode === 200;
  } catch {
    return false;
  }
}

function getUserAnswers(client: grpc.Client & Record<string, any>, token: string): Promise<string> {
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  return new Promise((resolve) =>
    client.GetUser({ user_id: '999999' }, metadata, { deadline: Date.now() + 3_000 }, (error: grpc.ServiceError | null) =>
      resolve(error ? grpc.status[error.code]! : 'OK'),
    ),
  );
}

describe('rapid reset on the gRPC port', () => {
  it('closes each resetting session with ENHANCE_YOUR_CALM, keeps descriptors near baseline, and answers others throughout', async () => {
    const serve: ServeProcess = await startServeProcess({});
    cleanups.push(() => serve.dispose());
    const pid = serve.child.pid!;
    const { Client } = userServiceDefinition();
    const client = new Client(serve.info.grpc.address, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }) as grpc.Client &
      Record<string, any>;
    cleanups.push(() => client.close());
    expect(await getUserAnswers(client, serve.info.adminToken)).toBe('NOT_FOUND');
    const baseline = descriptors(pid);

    const goaways: number[] = [];
    let stopped = false;
    const attack = Promise.all(Array.from({ length: 4 }, () => resetFlood(serve.info.grpc.address, () => stopped, goaways)));
    const during: { health: boolean; grpc: string }[] = [];
    let peak = baseline;
    for (let i = 0; i < 6; i++) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      peak = Math.max(peak, descriptors(pid));
      during.push({ health: await healthAnswers(serve.info.url), grpc: await getUserAnswers(client, serve.info.adminToken) });
    }
    stopped = true;
    await attack;

    expect(goaways.length).toBeGreaterThanOrEqual(4);
    expect(new Set(goaways)).toEqual(new Set([http2.constants.NGHTTP2_ENHANCE_YOUR_CALM]));
    expect(
      during.every((answer) => answer.health && answer.grpc === 'NOT_FOUND'),
      JSON.stringify(during),
    ).toBe(true);
    // Sessions in their grace after the GOAWAY, while the attackers reconnect at once: bounded by the grace, not growing.
    expect(peak).toBeLessThan(baseline + 60);

    // Back near the baseline within a few seconds (a safety bound, not a measure of speed).
    const started = Date.now();
    while (descriptors(pid) > baseline + 20 && Date.now() - started < 5_000) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(descriptors(pid)).toBeLessThanOrEqual(baseline + 20);
    expect(await healthAnswers(serve.info.url)).toBe(true);
    expect(await getUserAnswers(client, serve.info.adminToken)).toBe('NOT_FOUND');
    expect(serve.stderr()).toContain('GOAWAY ENHANCE_YOUR_CALM');
    expect(serve.stderr()).toContain('new connections from its address refused for');

    // The attackers' address is refused for a while: a fresh connection from it, even with a plain call, gets
    // ENHANCE_YOUR_CALM before any stream is read (reconnecting at once buys no fresh budget of resets)...
    expect(await freshCall(serve.info.grpc.address, ATTACKER, serve.info.adminToken)).toEqual({ goaway: http2.constants.NGHTTP2_ENHANCE_YOUR_CALM });
    // ...while other addresses connect afresh and are answered (grpc-status 5, NOT_FOUND).
    expect(await freshCall(serve.info.grpc.address, '127.0.0.1', serve.info.adminToken)).toEqual({ status: '5', goaway: undefined });
    const newcomer = new Client(serve.info.grpc.address, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }) as grpc.Client &
      Record<string, any>;
    cleanups.push(() => newcomer.close());
    expect(await getUserAnswers(newcomer, serve.info.adminToken)).toBe('NOT_FOUND');
  }, 30_000);
});

/**
 * Streams opened one after another on one session with the admin token, each cancelled once the first message has
 * come (a metrics follower stopped, a watch caught up): resolves with the GOAWAY codes the session got and the
 * grpc-status of a last plain call on the same session.
 */
async function readThenCancel(address: string, token: string, times: number): Promise<{ goaways: number[]; last?: string }> {
  const session = http2.connect(`http://${address}`);
  const goaways: number[] = [];
  session.on('error', () => undefined);
  session.on('goaway', (code) => goaways.push(code));
  const request = (path: string, message: Buffer) => {
    const stream = rawGrpcStream(session, path, token);
    stream.end(grpcFrame(message));
    return stream;
  };
  try {
    for (let i = 0; i < times && goaways.length === 0 && !session.closed; i++) {
      // MetricsRequest { interval_ms: 100 } (field 2, varint); the first snapshot comes at once.
      const stream = request('/monitoring.v1.MonitoringService/StreamMetrics', Buffer.from([0x10, 0x64]));
      await new Promise<void>((resolve) => {
        stream.once('data', () => resolve());
        stream.once('close', () => resolve());
      });
      stream.close(http2.constants.NGHTTP2_CANCEL);
    }
    if (goaways.length > 0 || session.closed) return { goaways };
    const last = await grpcStatusOf(request('/user.v1.UserService/GetUser', GET_MISSING_USER));
    return { goaways, last };
  } finally {
    session.destroy();
  }
}

describe('a client that cancels streams it has been reading', () => {
  it('is no rapid reset: 250 streams cancelled after their first message keep the session, which answers on', async () => {
    const serve: ServeProcess = await startServeProcess({});
    cleanups.push(() => serve.dispose());
    // Past the budget of 100 resets in 10 s, every stream of the session reset: without the answered streams left
    // out, the session is closed with ENHANCE_YOUR_CALM at the 101st.
    expect(await readThenCancel(serve.info.grpc.address, serve.info.adminToken, 250)).toEqual({ goaways: [], last: '5' });
    expect(serve.stderr()).not.toContain('ENHANCE_YOUR_CALM');
  }, 30_000);
});

describe('AddressPenalties', () => {
  it('refuses an address for the penalty, doubling per strike up to the longest, forgets old strikes, and keeps a bounded table', () => {
    const penalties = new AddressPenalties({ penaltyMs: 10, maxPenaltyMs: 40 }, 2);
    expect(penalties.strike('a', 0)).toBe(10);
    expect(penalties.refuses('a', 9)).toBe(true);
    expect(penalties.refuses('a', 10)).toBe(false);
    expect(penalties.refuses('b', 0)).toBe(false);
    expect([penalties.strike('a', 20), penalties.strike('a', 50), penalties.strike('a', 100)]).toEqual([20, 40, 40]);
    // Twice the longest penalty after the last one ended, the strikes are forgotten.
    expect(penalties.strike('a', 140 + 80)).toBe(10);
    // Two entries at most: the oldest makes room.
    penalties.strike('b', 300);
    penalties.strike('c', 300);
    expect(penalties.refuses('a', 300)).toBe(false);
    expect(penalties.refuses('b', 305) && penalties.refuses('c', 305)).toBe(true);
    expect(new AddressPenalties({ penaltyMs: 0, maxPenaltyMs: 0 }).strike('a', 0)).toBe(0);
  });
});
