/**
 * How soon `miniapp serve` is ready to serve, from the moment it is spawned
 * to the first 200 of GET /health/ready, against floors measured in the same
 * run, in alternating rounds (A, B, B, A, ...) so that machine noise falls
 * on both sides alike.
 *
 * - `serve` cold on SQLite: a fresh data dir each run (the database made
 *   and migrated, the admin token written), the embedded sandbox, HTTP and
 *   gRPC on free ports. The floor is one process that loads fastify and
 *   @grpc/grpc-js, serves one route and one gRPC service on free ports and
 *   answers that route: the two servers serve runs, and nothing of its own.
 * - Three instances started at once, cold, on one empty PostgreSQL database
 *   (a fresh one each round): the time until the last of the three is ready,
 *   against one instance alone on an empty database of the same server.
 *   The three migrate it once between them (an advisory lock), and share
 *   the machine's cores.
 *
 * Ready is polled every 5 ms over a new connection each time (the poller's
 * cost falls on both sides alike); a process that exits first fails the
 * benchmark.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmbeddedPostgres, freePort } from '../test/helpers/embedded-postgres.js';
import { createDatabase, envNumber, summarize } from './lib.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const BIN = join(ROOT, 'bin', 'miniapp.cjs');
const NODE = process.execPath;
const POLL_MS = 5;
/** A start that takes longer than this has hung: the benchmark fails rather than wait for ever. */
const START_LIMIT_MS = 120_000;

/** The floor: fastify and grpc-js in one process, one route, one service, both listening; loaded from this package. */
const FLOOR_SCRIPT = `
import { createRequire } from 'node:module';
const require = createRequire(${JSON.stringify(join(ROOT, 'package.json'))});
const { default: Fastify } = await import(require.resolve('fastify'));
const grpc = require('@grpc/grpc-js');
const [port, grpcPort] = process.argv.slice(2).map(Number);
const app = Fastify();
app.get('/health/ready', async () => ({ status: 'ready' }));
const server = new grpc.Server();
const bytes = { requestSerialize: (b) => b, requestDeserialize: (b) => b, responseSerialize: (b) => b, responseDeserialize: (b) => b };
server.addService({ Ping: { path: '/floor.v1.Floor/Ping', requestStream: false, responseStream: false, ...bytes } }, { Ping: (_call, done) => done(null, Buffer.alloc(0)) });
await new Promise((resolve, reject) => server.bindAsync('127.0.0.1:' + grpcPort, grpc.ServerCredentials.createInsecure(), (error) => (error ? reject(error) : resolve())));
await app.listen({ host: '127.0.0.1', port });
process.once('SIGTERM', () => { server.forceShutdown(); void app.close(); });
`;

/** The status of GET /health/ready, or 0 when nothing answers yet. */
function readyStatus(port) {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/health/ready', agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => resolve(0));
    req.end();
  });
}

/** The environment of every child: no MINIAPP_* of the caller's, config and data in `dir`. */
function childEnv(dir) {
  const env = { ...process.env };
  for (const name of Object.keys(env)) if (name.startsWith('MINIAPP_')) delete env[name];
  return { ...env, MINIAPP_CONFIG_DIR: join(dir, 'config'), MINIAPP_DATA_DIR: join(dir, 'data') };
}

/**
 * Spawns `args(port, grpcPort)` and resolves with the milliseconds from spawn to the first 200 of /health/ready,
 * and a stop function; rejects when the process exits first or takes past START_LIMIT_MS.
 */
async function startTimed(args, env) {
  const [port, grpcPort] = [await freePort(), await freePort()];
  const started = performance.now();
  const child = spawn(NODE, args(port, grpcPort), { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk) => {
    if (output.length < 64 * 1024) output += chunk;
  };
  child.stdout.setEncoding('utf8').on('data', keep);
  child.stderr.setEncoding('utf8').on('data', keep);
  let exited = false;
  const exit = new Promise((resolve) =>
    child.once('exit', (code, signal) => {
      exited = true;
      resolve(code ?? signal);
    }),
  );
  const stop = async () => {
    if (!exited) {
      child.kill('SIGTERM');
      await exit;
    }
  };
  try {
    while ((await readyStatus(port)) !== 200) {
      if (exited) throw new Error(`${args(port, grpcPort).join(' ')} exited with ${await exit} before it was ready:\n${output}`);
      if (performance.now() - started > START_LIMIT_MS) throw new Error(`not ready within ${START_LIMIT_MS} ms:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  return { ms: performance.now() - started, stop };
}

/** `miniapp serve` on free ports, no log; `extra` adds its store flags. */
const serveArgs = (extra) => (port, grpcPort) => [
  BIN,
  'serve',
  '--port',
  String(port),
  '--grpc-port',
  String(grpcPort),
  '--log-level',
  'error',
  '--drain',
  '0',
  ...extra,
];

/** Alternating rounds: A B, B A, A B, ...; `warmup` rounds first, not kept. */
async function alternate({ a, b, rounds, warmup, log, label }) {
  const times = { a: [], b: [] };
  for (let round = 0; round < warmup + rounds; round++) {
    const order = round % 2 === 0 ? ['a', 'b'] : ['b', 'a'];
    for (const side of order) {
      const ms = await (side === 'a' ? a() : b());
      if (round >= warmup) times[side].push(ms);
    }
    if (round >= warmup) log(`${label} round ${round - warmup + 1}: ${times.a.at(-1).toFixed(0)} ms against ${times.b.at(-1).toFixed(0)} ms`);
  }
  return { a: summarize(times.a), b: summarize(times.b) };
}

function row(name, result, floorName, target, note) {
  const { a, b } = result;
  return {
    name,
    value: a.median,
    unit: 'ms',
    floorName,
    floorValue: b.median,
    ratio: a.median / b.median,
    target,
    better: 'lower',
    note: `${note}; p10-p90 ${a.p10.toFixed(0)}-${a.p90.toFixed(0)} ms; floor ${b.p10.toFixed(0)}-${b.p90.toFixed(0)} ms; ${cpus().length} cores`,
  };
}

export default async function serveStartup(ctx) {
  const runs = envNumber('BENCH_SERVE_RUNS', Math.min(ctx.runs, 15));
  const pgRounds = envNumber('BENCH_SERVE_PG_ROUNDS', 5);
  const dir = mkdtempSync(join(tmpdir(), 'miniapp-bench-serve-'));
  const floorScript = join(dir, 'floor.mjs');
  writeFileSync(floorScript, FLOOR_SCRIPT);
  const rows = [];
  try {
    // ---- cold on SQLite, against fastify + grpc-js
    let n = 0;
    const sqlite = async () => {
      const own = join(dir, `sqlite-${++n}`);
      const { ms, stop } = await startTimed(serveArgs([]), childEnv(own));
      await stop();
      rmSync(own, { recursive: true, force: true });
      return ms;
    };
    const floor = async () => {
      const { ms, stop } = await startTimed((port, grpcPort) => [floorScript, String(port), String(grpcPort)], childEnv(dir));
      await stop();
      return ms;
    };
    ctx.log('miniapp serve cold to ready (fresh SQLite data dir) against fastify + grpc-js');
    const cold = await alternate({ a: sqlite, b: floor, rounds: runs, warmup: ctx.warmup, log: ctx.log, label: 'sqlite' });
    rows.push(
      row(
        'miniapp serve cold to ready (SQLite)',
        cold,
        'fastify route + grpc-js service',
        1.5,
        'spawn to the first 200 of /health/ready, a fresh data dir each run, the embedded sandbox',
      ),
    );

    // ---- three at once on one empty PostgreSQL, against one alone
    ctx.log('starting PostgreSQL (embedded-postgres, default settings)');
    const postgres = await startEmbeddedPostgres({ prefix: 'miniapp-bench-serve-pg-', password: 'bench' });
    try {
      let databases = 0;
      const emptyDatabase = async () => {
        const name = `serve_start_${++databases}`;
        await createDatabase(postgres.url('postgres'), name);
        return postgres.url(name);
      };
      const instances = async (count) => {
        const url = await emptyDatabase();
        const started = await Promise.allSettled(
          Array.from({ length: count }, (_, i) => startTimed(serveArgs(['--database', url]), childEnv(join(dir, `pg-${databases}-${i}`)))),
        );
        await Promise.all(started.map((result) => (result.status === 'fulfilled' ? result.value.stop() : undefined)));
        const failed = started.find((result) => result.status === 'rejected');
        if (failed) throw failed.reason;
        return Math.max(...started.map((result) => result.value.ms));
      };
      ctx.log('three serve instances at once on one empty PostgreSQL database, against one alone');
      const three = await alternate({ a: () => instances(3), b: () => instances(1), rounds: pgRounds, warmup: 1, log: ctx.log, label: 'postgres' });
      rows.push(
        row(
          'miniapp serve x3 at once, cold, one empty PostgreSQL',
          three,
          'one instance alone',
          2.0,
          'until the last of the three answers /health/ready 200; a fresh empty database each round, migrated once (advisory lock); PostgreSQL with its default settings on the same cores',
        ),
      );
    } finally {
      await postgres.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}
