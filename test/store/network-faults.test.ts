/**
 * The PostgreSQL store under the faults of a real network, through a TCP
 * proxy between the store and the server (test/helpers/tcp-proxy.ts):
 *
 * - a stall (no byte moves, everything is delivered when it heals) under
 *   concurrent load: no answer ever belongs to another question, however
 *   late the server's answers to abandoned queries arrive;
 * - a window of connection resets under load: no unhandled rejection (vitest
 *   fails the run on one), every pool slot comes back, transactions included;
 * - after either, the store answers again within a few of its time-outs of
 *   the network healing, without a restart;
 * - a call, the wait for a pool slot included, ends within its time-out.
 *
 * Queries ask for rows whose answer is known (each user's name is derived
 * from its id), so a misread answer is caught whatever it looks like.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { startTcpProxy, type ProxyMode, type TcpProxy } from '../helpers/tcp-proxy.js';
import { openStore, type Store } from '../../src/store/store.js';
import { StoreUnavailableError } from '../../src/store/sql.js';

const TIMEOUT_MS = 800;
const USERS = 200;
/** How long after the network heals the store must answer again: a few of its time-outs, not a restart. */
const RECOVERY_MS = 4 * TIMEOUT_MS;

let database: TestDatabase;
let proxy: TcpProxy;
let store: Store;

const nameOf = (id: number) => `user-${id}`;

beforeAll(async () => {
  database = await createTestDatabase();
  const direct = await openStore({ kind: 'postgres', url: database.url, poolSize: 2 });
  const now = new Date().toISOString();
  for (let id = 1; id <= USERS; id++) {
    await direct.sql.run('INSERT INTO users (username, email, password_hash, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)', [
      nameOf(id),
      `${nameOf(id)}@example.com`,
      'x',
      now,
    ]);
  }
  await direct.sql.exec('CREATE TABLE hits (id BIGSERIAL PRIMARY KEY, worker INTEGER NOT NULL, n INTEGER NOT NULL)');
  await direct.close();
});

afterAll(async () => {
  await database?.drop();
});

afterEach(async () => {
  await store?.close();
  await proxy?.stop();
});

async function openThroughProxy(poolSize: number): Promise<Store> {
  const url = new URL(database.url);
  proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port) });
  url.port = String(proxy.port);
  store = await openStore({ kind: 'postgres', url: url.href, poolSize, timeoutMs: TIMEOUT_MS });
  return store;
}

interface Outcome {
  at: number;
  ok: boolean;
  /** An answer that belongs to another question, or an error that is not "unavailable". */
  wrong?: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `workers` loops of reads (a user by id, whose name is known) and
 * transactions (an insert read back, and a user read inside it) until
 * `stop()`; every outcome is recorded with its time.
 */
function load(sql: Store['sql'], workers: number) {
  const outcomes: Outcome[] = [];
  let running = true;
  const loops = Array.from({ length: workers }, async (_, worker) => {
    for (let n = 0; running; n++) {
      const id = 1 + ((worker * 7919 + n * 104729) % USERS);
      try {
        if (n % 3 === 2) {
          const wrong = await sql.transaction(async (tx) => {
            const inserted = await tx.one<{ worker: number; n: number }>('INSERT INTO hits (worker, n) VALUES ($1, $2) RETURNING worker, n', [worker, n]);
            const user = await tx.one<{ id: number; username: string }>('SELECT id, username FROM users WHERE id = $1', [id]);
            if (inserted?.worker !== worker || inserted.n !== n) return `insert (${worker}, ${n}) answered ${JSON.stringify(inserted)}`;
            if (user?.id !== id || user.username !== nameOf(id)) return `user ${id} in a transaction answered ${JSON.stringify(user)}`;
            return undefined;
          });
          outcomes.push(wrong ? { at: Date.now(), ok: false, wrong } : { at: Date.now(), ok: true });
        } else {
          const user = await sql.one<{ id: number; username: string }>('SELECT id, username FROM users WHERE id = $1', [id]);
          const ok = user?.id === id && user.username === nameOf(id);
          outcomes.push(ok ? { at: Date.now(), ok } : { at: Date.now(), ok, wrong: `user ${id} answered ${JSON.stringify(user)}` });
        }
      } catch (error) {
        outcomes.push(
          error instanceof StoreUnavailableError
            ? { at: Date.now(), ok: false }
            : { at: Date.now(), ok: false, wrong: `${(error as Error).name}: ${(error as Error).message}` },
        );
        await sleep(20);
      }
    }
  });
  return {
    outcomes,
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

async function fault(sql: Store['sql'], mode: ProxyMode, windowMs: number) {
  const traffic = load(sql, 12);
  await sleep(600);
  proxy.setMode(mode);
  const faultAt = Date.now();
  await sleep(windowMs);
  proxy.setMode('pass');
  const healedAt = Date.now();
  await sleep(RECOVERY_MS + 1_500);
  await traffic.stop();
  const { outcomes } = traffic;
  return {
    outcomes,
    wrong: outcomes.filter((o) => o.wrong).map((o) => o.wrong),
    before: outcomes.filter((o) => o.at < faultAt),
    duringFault: outcomes.filter((o) => o.at >= faultAt && o.at < healedAt),
    recovered: outcomes.filter((o) => o.at >= healedAt + RECOVERY_MS),
  };
}

describe('the PostgreSQL store through a faulty network', () => {
  it("never answers a question with another one's answer when a stall heals under concurrent load, and answers again", async () => {
    const { sql } = await openThroughProxy(3);
    const result = await fault(sql, 'blackhole', 5 * TIMEOUT_MS);
    expect(result.wrong).toEqual([]);
    expect(result.before.every((o) => o.ok)).toBe(true);
    expect(result.duringFault.some((o) => !o.ok)).toBe(true);
    expect(result.recovered.length).toBeGreaterThan(50);
    expect(result.recovered.filter((o) => !o.ok)).toEqual([]);
  }, 30_000);

  it('gives back every pool slot after a window of connection resets under load, and answers again', async () => {
    const { sql } = await openThroughProxy(3);
    const result = await fault(sql, 'reset', 4 * TIMEOUT_MS);
    expect(result.wrong).toEqual([]);
    expect(result.duringFault.some((o) => !o.ok)).toBe(true);
    expect(result.recovered.length).toBeGreaterThan(50);
    expect(result.recovered.filter((o) => !o.ok)).toEqual([]);
    // Every slot is free: as many transactions as the pool holds, each waiting for all the others, all commit.
    let arrived = 0;
    await Promise.all(
      Array.from({ length: 3 }, () =>
        sql.transaction(async (tx) => {
          await tx.one('SELECT 1 AS ok');
          arrived++;
          while (arrived < 3) await sleep(10);
        }),
      ),
    );
    expect(arrived).toBe(3);
  }, 30_000);

  it('ends a call within its time-out when the network stalls, the wait for a pool slot included', async () => {
    const { sql } = await openThroughProxy(2);
    await sql.one('SELECT 1 AS ok');
    proxy.setMode('blackhole');
    // Four calls for two connections: two wait for a slot that never comes back.
    const settled = await Promise.all(
      Array.from({ length: 4 }, async (_, i) => {
        const started = Date.now();
        const error = await (i % 2 ? sql.transaction((tx) => tx.one('SELECT 1 AS ok')) : sql.one('SELECT 1 AS ok')).then(
          () => undefined,
          (e: unknown) => e,
        );
        return { error, ms: Date.now() - started };
      }),
    );
    proxy.setMode('pass');
    for (const { error, ms } of settled) {
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).message).toContain(`${TIMEOUT_MS} ms`);
      // The bound is the time-out itself, with room for a busy machine's timers: not a time-out per statement and per wait.
      expect(ms).toBeLessThan(TIMEOUT_MS + 700);
    }
  }, 30_000);
});
