/**
 * serve on PostgreSQL as operators run it: several instances, real
 * processes, one database behind the fault proxy, under mixed load, while
 * the network resets and stalls and the database restarts
 * (test/helpers/chaos.js says what is checked). This is the short run of
 * the suite; `npm run bench` runs the same for minutes (bench/chaos.bench.js).
 *
 * A PostgreSQL server of its own, since the test restarts it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startEmbeddedPostgres, type RunningPostgres } from '../helpers/embedded-postgres.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import { runChaos, startServeProcess } from '../helpers/chaos.js';

let postgres: RunningPostgres;

beforeAll(async () => {
  postgres = await startEmbeddedPostgres({ prefix: 'miniapp-chaos-', password: 'chaos', persistent: true, flags: ['-c', 'fsync=off'] });
}, 60_000);

afterAll(async () => {
  await postgres?.stop();
}, 30_000);

describe('serve on PostgreSQL through network faults and a database restart', () => {
  it('stops on SIGTERM within its drain time while the network to PostgreSQL is stalled, with calls in flight', async () => {
    const target = new URL(postgres.url());
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
    const proxied = new URL(postgres.url());
    proxied.port = String(proxy.port);
    const serve = await startServeProcess({ databaseUrl: proxied.href, timeoutMs: 1_000, poolSize: 4 });
    try {
      await request(`${serve.info.url}/api/v2/blog/posts`).then((r) => r.body.dump());
      proxy.setMode('blackhole');
      const inFlight = Array.from({ length: 8 }, () =>
        request(`${serve.info.url}/api/v2/blog/posts`).then(
          (r) => {
            void r.body.dump();
            return r.statusCode;
          },
          () => 0,
        ),
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      const stopped = await serve.stop('SIGTERM');
      expect(stopped.code).toBe(0);
      // Calls in flight finish (503 after their 1 s time-out), then the process ends: not minutes later.
      expect(stopped.ms).toBeLessThan(8_000);
      expect(await Promise.all(inFlight)).toEqual(Array(8).fill(503));
      expect(serve.stderr()).not.toMatch(/Unhandled|uncaught/i);
    } finally {
      serve.dispose();
      await proxy.stop();
    }
  }, 60_000);

  it('answers every call with its own answer, keeps every acknowledged write and every watched event, and serves again within 5 s of each fault', async () => {
    const report = await runChaos({
      databaseUrl: postgres.url(),
      instances: 2,
      timeoutMs: 1_000,
      poolSize: 4,
      workers: 8,
      users: 10,
      calmMs: 3_000,
      recoveryBoundMs: 5_000,
      schedule: [
        { fault: 'reset', ms: 3_000 },
        { fault: 'blackhole', ms: 4_000 },
        { fault: 'restart', ms: 2_000 },
      ],
      restartDatabase: async (ms: number) => {
        await postgres.server.stop();
        await new Promise((resolve) => setTimeout(resolve, ms));
        await postgres.server.start();
      },
    });
    expect(report.violations).toEqual([]);
    // The run did what it says: writes were acknowledged, watchers saw them, and the faults were felt.
    expect(report.acknowledged.users).toBeGreaterThan(50);
    expect(report.acknowledged.posts).toBeGreaterThan(50);
    expect(report.counts.unavailable).toBeGreaterThan(0);
    expect(report.watched.every((n: number) => n >= report.acknowledged.users)).toBe(true);
    expect(report.recoveries).toHaveLength(3);
  }, 180_000);
});
