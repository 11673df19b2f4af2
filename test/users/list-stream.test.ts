/**
 * ListUsers with page_size 0 (every user, as the reference) never holds the
 * whole table: it reads 500 users at a time, reads the next batch only once
 * the client has taken enough of the last (gRPC flow control), and stops
 * reading when the client cancels. Through the real gRPC server and a
 * grpc-js client, on both backends, over a user store that counts the
 * batches each call reads.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { openStore, type Store } from '../../src/store/store.js';
import { startGrpcServer, type RunningGrpcServer } from '../../src/grpc/server.js';
import { createMetrics } from '../../src/server/metrics.js';
import { TokenService } from '../../src/auth/tokens.js';
import { UserChangeLog } from '../../src/users/change-log.js';
import { UserChangeFeed } from '../../src/users/change-feed.js';
import { StreamGrants } from '../../src/auth/stream-grants.js';
import { CallAuth } from '../../src/grpc/call-auth.js';
import { UserServiceImpl } from '../../src/users/service.js';
import { UserStore } from '../../src/users/user-store.js';
import type { UserSearch } from '../../src/users/user-search.js';
import { LIST_BATCH } from '../../src/users/user-list.js';
import { userServiceDefinition } from '../../src/users/proto.js';
import { collect, type AnyClient } from '../helpers/user-client.js';
import { useBackendStore } from '../helpers/backend-store.js';
import { BACKENDS } from '../helpers/postgres.js';

/** 5 full batches and part of a 6th; each user about 450 bytes on the wire, so that a batch is several flow-control windows. */
const USERS = 5 * LIST_BATCH + 400;

/** A user store that remembers, for each search (one per ListUsers call), the batches read. */
class CountingStore extends UserStore {
  readonly searches: { reads: number[] }[] = [];

  override search(filter = ''): UserSearch {
    const search = super.search(filter);
    const seen = { reads: [] as number[] };
    this.searches.push(seen);
    const page = search.page.bind(search);
    search.page = async (place) => {
      seen.reads.push(place.limit);
      return page(place);
    };
    return search;
  }
}

describe.each(BACKENDS)('ListUsers of every user on %s', (backend) => {
  const location = useBackendStore(backend);
  let store: Store;
  let users: CountingStore;
  let server: RunningGrpcServer;
  let token: string;
  const clients: grpc.Client[] = [];

  beforeEach(async () => {
    store = await openStore(location.location());
    const now = () => new Date();
    const log = new UserChangeLog(store.sql, store.signals, now);
    users = new CountingStore(store.sql, log, now);
    const tokens = new TokenService(store.sql, now);
    token = await tokens.ensureAdminToken(undefined);
    const changes = new UserChangeFeed(log, store.signals, { now });
    const grants = new StreamGrants({ tokens, signals: store.signals, follow: (listener) => changes.follow((change) => listener(change.user.id)), now });
    const service = new UserServiceImpl({ users, auth: new CallAuth(tokens, grants), changes, hashCost: 4, now });
    server = await startGrpcServer({
      host: '127.0.0.1',
      port: 0,
      services: [{ name: 'user.v1.UserService', handlers: service.handlers() }],
      metrics: createMetrics().grpc,
    });
    const rows = Array.from(
      { length: USERS },
      (_, i) => `('user${i + 1}', 'user${i + 1}@${'e'.repeat(200)}.example.com', '${'Full name '.repeat(20)}', 'h', 'then', 'then')`,
    );
    for (let i = 0; i < rows.length; i += 500) {
      await store.sql.run(`INSERT INTO users (username, email, full_name, password_hash, created_at, updated_at) VALUES ${rows.slice(i, i + 500).join(', ')}`);
    }
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await server.shutdown(500);
    await store.close();
  });

  function client(): AnyClient {
    const { Client } = userServiceDefinition();
    const c = new Client(server.address, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }) as AnyClient;
    clients.push(c);
    return c;
  }

  function everyone(c = client()): grpc.ClientReadableStream<{ id: string }> {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    return c.ListUsers({ page_size: 0 }, metadata);
  }

  /** Another call that lists everyone to the end: time enough for any call started before it to read what it would. */
  async function anotherListing(): Promise<void> {
    expect(await collect(everyone())).toHaveLength(USERS);
  }

  const ids = (list: { id: string }[]) => list.map((user) => Number(user.id));
  const inOrder = Array.from({ length: USERS }, (_, i) => i + 1);

  it('sends every user in id order, read 500 at a time', async () => {
    expect(ids(await collect(everyone()))).toEqual(inOrder);
    expect(users.searches.map((s) => s.reads)).toEqual([Array(6).fill(LIST_BATCH)]);
  });

  it('reads no further while the client takes nothing, and goes on to the last user when it takes them again', async () => {
    const call = everyone();
    const received: { id: string }[] = [];
    const first = new Promise<void>((resolve) =>
      call.on('data', (user: { id: string }) => {
        received.push(user);
        if (received.length === 1) {
          call.pause();
          resolve();
        }
      }),
    );
    const ended = new Promise<void>((resolve, reject) => {
      call.on('end', resolve);
      call.on('error', reject);
    });
    await first;
    await anotherListing();
    // Held at its first batch (the second at most, should the first fit in the transport's buffers).
    expect(users.searches[0]!.reads.length).toBeLessThanOrEqual(2);
    call.resume();
    await ended;
    expect(ids(received)).toEqual(inOrder);
    expect(users.searches[0]!.reads).toHaveLength(6);
  });

  it('stops reading when the client cancels', async () => {
    const call = everyone();
    let received = 0;
    const cancelled = new Promise<void>((resolve) => {
      call.on('data', () => {
        if (++received === LIST_BATCH + 100) call.cancel();
      });
      call.on('error', (error: grpc.ServiceError) => {
        expect(error.code).toBe(grpc.status.CANCELLED);
        resolve();
      });
    });
    await cancelled;
    await anotherListing();
    // Cancelled in its second batch: a third at most was on its way; never the six of the whole list.
    expect(users.searches[0]!.reads.length).toBeLessThanOrEqual(3);
  });
});
