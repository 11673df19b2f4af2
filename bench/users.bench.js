/**
 * The gRPC user service of `miniapp serve`, each number against a floor
 * measured in the same run:
 *
 * 1. GetUser throughput. The real server (startServe from dist/, memory
 *    store, hashCost 10, a few users) against an empty-handler grpc-js
 *    server of the same proto whose GetUser answers a constant user and
 *    does nothing else (no auth, no store, no interceptor). Both are loaded
 *    by the same generator: the CLI's own client (dist/users/client.js:
 *    keepalive, round_robin, bearer metadata, a deadline per call) keeping
 *    N unary calls in flight over one channel for D seconds. Each server
 *    runs on its own worker thread, the generator on the main thread;
 *    rounds alternate (real, floor; floor, real; ...) after a warm-up of
 *    each, and the value is the median of rounds.
 *
 * 2. BulkCreateUsers of 10,000 users through the client stream, against
 *    the same 10,000 rows inserted into better-sqlite3 directly: an
 *    in-memory database with the same schema (openDatabase('memory')), a
 *    prepared INSERT inside one transaction, and the password hashes made
 *    the same way (hashPassword, same cost, 256 at a time as the service
 *    does). Hashing dominates both, so the ratio isolates what gRPC and the
 *    service add. Both run at hashCost 10: the production default (14) is
 *    16 times the work, minutes per side on two cores; the note gives an
 *    estimate for it from timing a sample of hashes at cost 14.
 *
 * Every answer is checked before timing (the real server also refuses a
 * call without a token), and any failed call fails the benchmark.
 *
 * Settings from the environment: BENCH_USERS_SECONDS (per GetUser run,
 * default 5), BENCH_USERS_ROUNDS (default 3), BENCH_USERS_CONCURRENCY
 * (calls in flight, default 32), BENCH_USERS_BULK_ROWS (default 10000),
 * BENCH_USERS_BULK_ROUNDS (default 2).
 */
import { cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { benchServe, envNumber, median } from './lib.js';
import { runRoleIfWorker, spawnRole } from './worker-roles.js';
import { cpuPerOperation, cpuSnapshot, describeCpu } from './cpu-split.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const dist = (path) => import(pathToFileURL(join(ROOT, 'dist', path)).href);

const ROLE_FLAG = 'miniappUsersBench';
const HASH_COST = 10;
const PASSWORD = 'correct-horse-battery';
/** What the floor answers to every GetUser. */
const CONSTANT_USER = {
  id: '1',
  username: 'user1',
  email: 'user1@example.com',
  full_name: 'User One',
  is_active: true,
  roles: [],
  created_at: { seconds: '1795000000', nanos: 0 },
};

// ---------------------------------------------------------------- workers

/** `miniapp serve` as the CLI starts it, gRPC on 127.0.0.1:0, memory store. */
async function startReal() {
  const running = await benchServe({
    grpc: { host: '127.0.0.1', port: 0 },
    hashCost: HASH_COST,
    store: { kind: 'memory' },
  });
  return { info: { address: running.grpc.address, token: running.adminToken }, close: () => running.close() };
}

/** The floor: a grpc-js server of the same proto with one handler that answers a constant user. */
async function startFloor() {
  const grpc = await import('@grpc/grpc-js');
  const { userServiceDefinition } = await dist('users/proto.js');
  const server = new grpc.Server();
  server.addService(userServiceDefinition().service, {
    GetUser: (_call, callback) => callback(null, CONSTANT_USER),
  });
  const port = await new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  return {
    info: { address: `127.0.0.1:${port}`, token: 'unused' },
    close: () => new Promise((resolve) => server.tryShutdown(() => resolve())),
  };
}

const ROLES = { real: startReal, floor: startFloor };

await runRoleIfWorker(ROLE_FLAG, ROLES);

// ---------------------------------------------------------------- main thread

/**
 * `concurrency` GetUser calls in flight over the client's one channel for
 * `seconds`; resolves with calls per second. `id` is the user asked for, or
 * a function of the call's number giving it. Any failed call throws.
 */
export async function loadGetUser(client, { seconds, concurrency, id }) {
  let calls = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  const idOf = typeof id === 'function' ? id : () => id;
  const lane = async () => {
    while (performance.now() < end) {
      await client.getUser(idOf(calls));
      calls++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  return calls / ((performance.now() - start) / 1000);
}

function bulkRow(round, i) {
  const name = `b${round}u${i}`;
  return { username: name, email: `${name}@example.com`, password: PASSWORD, full_name: `Bulk ${i}` };
}

/** The rows as the client stream consumes them: generated as sent, never all in memory at once. */
export async function* bulkRows(round, count) {
  for (let i = 0; i < count; i++) yield bulkRow(round, i);
}

/** The floor of a bulk create: hash as the service does (256 at a time), then one transaction of prepared INSERTs. */
async function floorBulk(round, count, { openDatabase, hashPassword }) {
  const db = openDatabase('memory');
  try {
    const insert = db.prepare(
      `INSERT INTO users (username, email, full_name, is_active, roles, password_hash, created_at, updated_at)
       VALUES (@username, @email, @fullName, 1, '[]', @passwordHash, @at, @at)`,
    );
    const start = performance.now();
    const rows = [];
    for (let i = 0; i < count; i += 256) {
      const batch = Array.from({ length: Math.min(256, count - i) }, (_, j) => bulkRow(round, i + j));
      const hashes = await Promise.all(batch.map((row) => hashPassword(row.password, HASH_COST)));
      rows.push(...batch.map((row, j) => ({ username: row.username, email: row.email, fullName: row.full_name, passwordHash: hashes[j] })));
    }
    const at = new Date().toISOString();
    db.transaction(() => {
      for (const row of rows) insert.run({ ...row, at });
    })();
    const ms = performance.now() - start;
    const stored = db.prepare('SELECT count(*) AS n FROM users').get().n;
    if (stored !== count) throw new Error(`the floor stored ${stored} users, expected ${count}`);
    return ms;
  } finally {
    db.close();
  }
}

async function realBulk(round, count, connectUserService) {
  const side = spawnRole(new URL(import.meta.url), ROLE_FLAG, 'real');
  try {
    const { address, token } = await side.ready;
    const client = connectUserService({ address, token, deadlineMs: 10_000 });
    try {
      await client.ready();
      const start = performance.now();
      const response = await client.bulkCreate(bulkRows(round, count));
      const ms = performance.now() - start;
      if (response.created_count !== count || response.failures.length > 0) {
        throw new Error(`BulkCreateUsers created ${response.created_count} of ${count}; failures: ${JSON.stringify(response.failures.slice(0, 3))}`);
      }
      const last = await client.getUser(String(count));
      if (last.username !== bulkRow(round, count - 1).username) throw new Error(`user ${count} is ${last.username}, expected the last row`);
      return ms;
    } finally {
      client.close();
    }
  } finally {
    await side.close();
  }
}

/** Milliseconds per hash at `cost`, 256 at a time as the service hashes, from `sample` hashes. */
async function hashTime(hashPassword, cost, sample) {
  const start = performance.now();
  for (let i = 0; i < sample; i += 256) {
    await Promise.all(Array.from({ length: Math.min(256, sample - i) }, () => hashPassword(PASSWORD, cost)));
  }
  return (performance.now() - start) / sample;
}

export default async function users(ctx) {
  const seconds = envNumber('BENCH_USERS_SECONDS', 5);
  const rounds = envNumber('BENCH_USERS_ROUNDS', 3);
  const concurrency = envNumber('BENCH_USERS_CONCURRENCY', 32);
  const bulkCount = envNumber('BENCH_USERS_BULK_ROWS', 10_000);
  const bulkRounds = envNumber('BENCH_USERS_BULK_ROUNDS', 2);
  const warmupSeconds = Math.min(1, seconds);
  const [{ connectUserService }, { openDatabase }, { hashPassword, DEFAULT_HASH_COST }] = await Promise.all([
    dist('users/client.js'),
    dist('store/database.js'),
    dist('auth/passwords.js'),
  ]);
  const cores = cpus().length;

  // ---- 1. GetUser throughput
  const sides = { real: spawnRole(new URL(import.meta.url), ROLE_FLAG, 'real'), floor: spawnRole(new URL(import.meta.url), ROLE_FLAG, 'floor') };
  const clients = {};
  let unary;
  try {
    const infos = { real: await sides.real.ready, floor: await sides.floor.ready };
    for (const [name, info] of Object.entries(infos)) {
      clients[name] = connectUserService({ address: info.address, token: info.token, deadlineMs: 10_000 });
      await clients[name].ready();
    }
    for (let i = 1; i <= 5; i++) {
      await clients.real.createUser({ username: `user${i}`, email: `user${i}@example.com`, password: PASSWORD, full_name: `User ${i}` });
    }
    // Both answer user 1 with the same shape; the real one checks the token.
    const answers = { real: await clients.real.getUser('1'), floor: await clients.floor.getUser('1') };
    for (const [name, user] of Object.entries(answers)) {
      if (user.id !== '1' || user.username !== 'user1' || !user.created_at) throw new Error(`${name} answered GetUser(1) with ${JSON.stringify(user)}`);
    }
    const anonymous = connectUserService({ address: infos.real.address, deadlineMs: 10_000 });
    try {
      await anonymous.getUser('1');
      throw new Error('the real server answered GetUser without a token');
    } catch (error) {
      if (error.code !== 'UNAUTHENTICATED') throw error;
    } finally {
      anonymous.close();
    }
    ctx.log(`real ${infos.real.address}, floor ${infos.floor.address}; ${concurrency} calls in flight, ${seconds} s a run, ${rounds} rounds`);

    for (const name of ['real', 'floor']) {
      ctx.log(`warm-up ${name} (${warmupSeconds} s)`);
      await loadGetUser(clients[name], { seconds: warmupSeconds, concurrency, id: '1' });
    }
    const results = { real: [], floor: [] };
    const cpu = { real: [], floor: [] };
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? ['real', 'floor'] : ['floor', 'real'];
      for (const name of order) {
        const before = cpuSnapshot({ serveThread: infos[name].osThread });
        const rate = await loadGetUser(clients[name], { seconds, concurrency, id: String(1 + (round % 5)) });
        cpu[name].push(cpuPerOperation(before, cpuSnapshot({ serveThread: infos[name].osThread }), Math.round(rate * seconds)));
        results[name].push(rate);
        ctx.log(`round ${round + 1} ${name}: ${rate.toFixed(0)} calls/s`);
      }
    }
    unary = {
      real: median(results.real),
      floor: median(results.floor),
      note:
        `rounds: real ${results.real.map((r) => r.toFixed(0)).join(', ')}; floor ${results.floor.map((r) => r.toFixed(0)).join(', ')} calls/s; ` +
        `the CLI's client, ${concurrency} unary calls in flight over one channel, ${seconds} s x ${rounds} rounds alternating, median of rounds; ` +
        `each server on its own worker thread, the generator on the main thread, ${cores} cores` +
        // Where a call's CPU goes on each side ("serve" is the server's thread: the floor's in its rounds), calls counted as rate x seconds.
        [describeCpu('a call on the real server', cpu.real), describeCpu("a call on the floor ('serve' = the floor's thread)", cpu.floor)]
          .filter(Boolean)
          .map((text) => `; ${text}`)
          .join(''),
    };
  } finally {
    for (const client of Object.values(clients)) client.close();
    await sides.real.close();
    await sides.floor.close();
  }

  // ---- 2. BulkCreateUsers of 10,000 users
  const bulk = { real: [], floor: [] };
  for (let round = 0; round < bulkRounds; round++) {
    const order = round % 2 === 0 ? ['real', 'floor'] : ['floor', 'real'];
    for (const name of order) {
      const ms = name === 'real' ? await realBulk(round, bulkCount, connectUserService) : await floorBulk(round, bulkCount, { openDatabase, hashPassword });
      bulk[name].push(ms);
      ctx.log(`bulk round ${round + 1} ${name}: ${bulkCount} users in ${(ms / 1000).toFixed(2)} s`);
    }
  }
  const sample = 64;
  const perHashDefault = await hashTime(hashPassword, DEFAULT_HASH_COST, sample);
  const perHashBench = await hashTime(hashPassword, HASH_COST, sample * 4);
  ctx.log(`hashing: ${perHashBench.toFixed(2)} ms/hash at cost ${HASH_COST}, ${perHashDefault.toFixed(1)} ms/hash at cost ${DEFAULT_HASH_COST}`);
  const bulkReal = median(bulk.real);
  const bulkFloor = median(bulk.floor);
  const estimateDefault = (bulkCount * perHashDefault) / 1000;

  return [
    {
      name: 'GetUser throughput (unary)',
      value: unary.real,
      unit: 'calls/s',
      floorName: 'grpc-js server answering a constant user',
      floorValue: unary.floor,
      ratio: unary.real / unary.floor,
      target: 0.9, // issue 14 (was 0.8)
      better: 'higher',
      note: unary.note,
    },
    {
      name: `BulkCreateUsers ${bulkCount} users, hashCost ${HASH_COST}`,
      value: bulkReal,
      unit: 'ms',
      floorName: 'same rows: hashPassword + one SQLite transaction',
      floorValue: bulkFloor,
      ratio: bulkReal / bulkFloor,
      // The issue sets no target here; 1.5x is this file's bound (lower is better): gRPC and the service may add half again.
      target: 1.5,
      better: 'lower',
      note:
        `rounds: real ${bulk.real.map((ms) => (ms / 1000).toFixed(2)).join(', ')} s; floor ${bulk.floor.map((ms) => (ms / 1000).toFixed(2)).join(', ')} s; ` +
        `run at hashCost ${HASH_COST}, not the production default ${DEFAULT_HASH_COST}: at ${DEFAULT_HASH_COST} hashing alone measured ` +
        `${perHashDefault.toFixed(1)} ms/hash here (${sample} sampled, 256 at a time), so ${bulkCount} users would take about ` +
        `${estimateDefault.toFixed(0)} s per side on ${cores} cores (estimate, not run); target 1.5x is this benchmark's own (the issue gives none)`,
    },
  ];
}
