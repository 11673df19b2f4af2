/**
 * The posts' version known without asking (src/store/version-lease.ts), on
 * PostgreSQL, with two instances A and B, each a store of its own (its own
 * pool and LISTEN connection), as two serve processes have them: a write
 * through A is acknowledged only once B knows of it, or once B's lease has
 * run out in the database, and B answers from what it knows only while its
 * lease holds, whatever the network does to B.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { openStore, type Store } from '../../src/store/store.js';
import { VersionLease } from '../../src/store/version-lease.js';
import { PostStore } from '../../src/blog/posts.js';

// Short leases, so that a lease that runs out does so within the test; the LISTEN heartbeat stays 2 s.
const LEASE = { counter: 'posts', leaseMs: 1_500, renewMs: 250, marginMs: 500, aliveWithinMs: 2_600 } as const;

let database: TestDatabase;
const opened: { close(): Promise<void> }[] = [];

beforeAll(async () => {
  database = await createTestDatabase({ migrated: true });
});
afterAll(async () => {
  await database?.drop();
});
afterEach(async () => {
  for (const thing of opened.reverse()) await thing.close().catch(() => undefined);
  opened.length = 0;
});

async function instance(url = database.url, timeoutMs?: number): Promise<{ store: Store; lease: VersionLease; posts: PostStore }> {
  const store = await openStore({ kind: 'postgres', url, poolSize: 3, ...(timeoutMs ? { timeoutMs } : {}) });
  opened.push(store);
  const lease = await VersionLease.start(store.sql, store.signals, LEASE);
  opened.push(lease);
  return { store, lease, posts: new PostStore(store.sql, () => new Date(), { lease }) };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await check()) return;
    await sleep(25);
  }
  throw new Error(`never: ${what}`);
}

const newPost = (title: string) => ({ title, content: 'x', tags: [], authorId: null, author: 'ops' });

describe('version leases on PostgreSQL', () => {
  it('a write through A is acknowledged only after B knows of it, write after write, both ways', async () => {
    const a = await instance();
    const b = await instance();
    await until('both hold their lease', () => a.lease.known() !== undefined && b.lease.known() !== undefined);
    for (let i = 0; i < 20; i++) {
      const [writer, reader] = i % 2 ? [a, b] : [b, a];
      await writer.posts.create(newPost(`post ${i}`));
      // The moment the write is acknowledged, the other instance already knows the version it moved to.
      const version = Number((await writer.store.sql.one<{ value: number }>("SELECT value FROM counters WHERE name = 'posts'"))!.value);
      expect(Number(reader.lease.known())).toBeGreaterThanOrEqual(version);
      expect(Number(writer.lease.known())).toBeGreaterThanOrEqual(version);
      expect(reader.posts.knownVersion()).toBe(String(Number(reader.lease.known())));
    }
    // A version moved by any writer at all (SQL from a third connection) reaches both, without waiting for anyone.
    const other = await openStore({ kind: 'postgres', url: database.url, poolSize: 1 });
    opened.push(other);
    const moved = Number((await other.sql.one<{ value: number }>("UPDATE counters SET value = value + 1 WHERE name = 'posts' RETURNING value"))!.value);
    await until('both heard of the move', () => Number(a.lease.known()) >= moved && Number(b.lease.known()) >= moved);
  });

  it("a stalled B never answers from an older version than a write A acknowledged, and A is not held past B's lease", async () => {
    const a = await instance();
    const url = new URL(database.url);
    const proxy: TcpProxy = await startTcpProxy({ host: url.hostname, port: Number(url.port) });
    opened.push({ close: () => proxy.stop() });
    url.port = String(proxy.port);
    const b = await instance(url.href, 1_000);
    await until('both hold their lease', () => a.lease.known() !== undefined && b.lease.known() !== undefined);
    const before = Number(b.lease.known());

    proxy.setMode('blackhole');
    await a.posts.create(newPost('written while B is cut off'));
    const version = Number((await a.store.sql.one<{ value: number }>("SELECT value FROM counters WHERE name = 'posts'"))!.value);
    expect(version).toBeGreaterThan(before);
    // A acknowledged: B must not vouch for a version older than the write, and the database no longer has B waited for.
    const known = b.lease.known();
    expect(known === undefined || Number(known) >= version, `B still vouches for version ${known}`).toBe(true);
    const lease = await a.store.sql.one<{ seen: number; live: boolean }>(
      "SELECT seen, expires_at > now() AS live FROM cache_leases WHERE counter = 'posts' AND instance = $1",
      [b.lease.instance],
    );
    expect(lease!.live === false || Number(lease!.seen) >= version).toBe(true);

    // Healed: B joins again, hears of nothing it missed, and reads the version it must know.
    proxy.setMode('pass');
    await until('B holds its lease again', () => b.lease.known() !== undefined);
    expect(Number(b.lease.known())).toBeGreaterThanOrEqual(version);
    await b.posts.create(newPost('written through B once healed'));
    const after = Number((await a.store.sql.one<{ value: number }>("SELECT value FROM counters WHERE name = 'posts'"))!.value);
    expect(Number(a.lease.known())).toBeGreaterThanOrEqual(after);
  });

  it('an instance that stops resigns: writers stop waiting for it at once, and its row goes', async () => {
    const a = await instance();
    const b = await instance();
    await until('both hold their lease', () => a.lease.known() !== undefined && b.lease.known() !== undefined);
    await b.lease.close();
    expect(await a.store.sql.one('SELECT 1 FROM cache_leases WHERE instance = $1', [b.lease.instance])).toBeUndefined();
    expect(b.lease.known()).toBeUndefined();
    await a.posts.create(newPost('after B left'));
    expect(b.posts.knownVersion()).toBeUndefined();
    // B, asked, reads the version from the database.
    expect(Number(await b.posts.version())).toBe(Number(a.lease.known()));
  });
});
