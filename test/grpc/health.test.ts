/**
 * serve's health service (src/grpc/health.ts) answers as grpc-health-check's
 * HealthImplementation does, call for call, except that a NOT_FOUND names at
 * most 200 characters of the service asked for, and that it keeps its open
 * Watch calls.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import type * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { HealthService, type ServingStatus } from '../../src/grpc/health.js';

type Handlers = Record<string, (...args: any[]) => void>;

function libraryHandlers(initial: Record<string, ServingStatus>): { handlers: Handlers; setStatus: (s: string, v: ServingStatus) => void } {
  const library = new HealthImplementation(initial);
  let handlers: Handlers | undefined;
  const server = {
    addService: (_definition: unknown, implementation: Handlers) => {
      handlers = implementation;
    },
  };
  library.addToServer(server as unknown as grpc.Server);
  return { handlers: handlers!, setStatus: (service, status) => library.setStatus(service, status) };
}

function unary(handler: (...args: any[]) => void, request: object): Promise<{ error: { code?: number; details?: string } | null; value: unknown }> {
  return new Promise((resolve) =>
    handler({ request }, (error: { code?: number; details?: string } | null, value: unknown) => resolve({ error: error ?? null, value: value ?? null })),
  );
}

/** A Watch call: what it was written, and its events. */
function watchCall(service: string): EventEmitter & { request: object; written: unknown[]; write: (message: unknown) => boolean } {
  const call = Object.assign(new EventEmitter(), { request: { service }, written: [] as unknown[] });
  const write = (message: unknown) => {
    call.written.push(message);
    return true;
  };
  return Object.assign(call, { write });
}

describe('the health service', () => {
  const initial = { '': 'SERVING', 'user.v1.UserService': 'SERVING' } as const;

  it("answers Check, List and Watch as grpc-health-check's does", async () => {
    const theirs = libraryHandlers(initial);
    const ours = new HealthService(initial);
    const mine = ours.handlers() as Handlers;
    for (const request of [{ service: '' }, { service: 'user.v1.UserService' }, { service: 'nope.v1.Nope' }]) {
      expect(await unary(mine.check!, request)).toEqual(await unary(theirs.handlers.check!, request));
    }
    expect(await unary(mine.list!, {})).toEqual(await unary(theirs.handlers.list!, {}));

    const [a, b] = [watchCall('user.v1.UserService'), watchCall('user.v1.UserService')];
    const [c, d] = [watchCall('later.v1.Later'), watchCall('later.v1.Later')];
    mine.watch!(a);
    theirs.handlers.watch!(b);
    mine.watch!(c);
    theirs.handlers.watch!(d);
    expect(ours.watches.size).toBe(2);
    for (const [service, status] of [
      ['user.v1.UserService', 'NOT_SERVING'],
      ['later.v1.Later', 'SERVING'],
      ['user.v1.UserService', 'NOT_SERVING'],
    ] as const) {
      ours.setStatus(service, status);
      theirs.setStatus(service, status);
    }
    expect(a.written).toEqual(b.written);
    expect(c.written).toEqual(d.written);
    expect(a.written).toEqual([{ status: 'SERVING' }, { status: 'NOT_SERVING' }, { status: 'NOT_SERVING' }]);
    // A cancelled watcher is told nothing more, and is no longer held.
    a.emit('cancelled');
    b.emit('cancelled');
    ours.setStatus('user.v1.UserService', 'SERVING');
    theirs.setStatus('user.v1.UserService', 'SERVING');
    expect(a.written).toEqual(b.written);
    expect(ours.watches.size).toBe(1);
  });

  it('holds nothing for a name once its last watch has ended, however it ended', () => {
    // The names are the client's: a set kept for every name ever watched grew by each new one.
    const ours = new HealthService(initial);
    const mine = ours.handlers() as Handlers;
    const ends = ['cancelled', 'close', 'finish'] as const;
    for (let i = 0; i < 300; i++) {
      const call = watchCall(`made.up.v${i}.Name`);
      mine.watch!(call);
      call.emit(ends[i % ends.length]!);
    }
    const kept = watchCall('user.v1.UserService');
    mine.watch!(kept);
    expect([...ours.watchers.keys()]).toEqual(['user.v1.UserService']);
    expect(ours.watches.size).toBe(1);
  });

  it('refuses List past 100 services, as the library does', async () => {
    const many = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`s${i}.v1.S`, 'SERVING' as const]));
    const mine = new HealthService(many).handlers() as Handlers;
    expect(await unary(mine.list!, {})).toEqual(await unary(libraryHandlers(many).handlers.list!, {}));
    expect((await unary(mine.list!, {})).error?.code).toBe(8);
  });
});
