/**
 * Shared helpers for the benchmarks: paired process timing and the few
 * statistics the reports need. Node built-ins only.
 */
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));

/** Keep at most this much of a child's stderr for the error message. */
const STDERR_LIMIT = 64 * 1024;

/**
 * The q-quantile (0..1) of an already sorted array, interpolating linearly
 * between neighbours, so that quantile(sorted, 0.5) is the usual median
 * (mean of the two middle values for an even count).
 */
export function quantile(sorted, q) {
  if (sorted.length === 0) throw new Error('quantile of an empty array');
  const position = (sorted.length - 1) * q;
  const lower = Math.floor(position);
  const upper = Math.ceil(position);
  return sorted[lower] + (sorted[upper] - sorted[lower]) * (position - lower);
}

export function median(values) {
  return quantile(
    [...values].sort((x, y) => x - y),
    0.5,
  );
}

/** { median, p10, p90, samples } of a list of times; samples keep run order. */
export function summarize(samples) {
  const sorted = [...samples].sort((x, y) => x - y);
  return {
    median: quantile(sorted, 0.5),
    p10: quantile(sorted, 0.1),
    p90: quantile(sorted, 0.9),
    samples,
  };
}

/**
 * Spawns one command and resolves with its wall time in milliseconds, from
 * just before spawn() to the 'exit' event. stdout is piped and thrown away
 * (like `miniapp ... | jq`, and unlike /dev/null, which some programs treat
 * differently); stderr is kept so that a failure can say what went wrong.
 * Rejects unless the exit code is 0: a benchmark must never time an error
 * path by accident.
 */
export function timeSpawn({ cmd, args = [], env, stdin }) {
  return new Promise((resolve, reject) => {
    const label = [cmd, ...args].join(' ');
    const start = process.hrtime.bigint();
    const child = spawn(cmd, args, {
      env: env ?? process.env,
      stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    let elapsed;
    let stderr = '';
    child.stdout.resume();
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk) => {
      if (stderr.length < STDERR_LIMIT) stderr += chunk;
    });
    if (stdin !== undefined) {
      // A child that exits without reading all of stdin makes this write fail
      // with EPIPE; the exit code below is what decides success, so the
      // stream error itself is not an error of the run.
      child.stdin.on('error', () => {});
      child.stdin.end(stdin);
    }
    child.on('error', (error) => reject(new Error(`cannot spawn ${label}: ${error.message}`, { cause: error })));
    // Time is taken at 'exit'; the promise settles at 'close', once stderr
    // has been read to the end, so that a failure reports all of it.
    child.on('exit', () => {
      elapsed = Number(process.hrtime.bigint() - start) / 1e6;
    });
    child.on('close', (code, signal) => {
      if (code === 0) {
        resolve(elapsed);
        return;
      }
      const status = signal ? `signal ${signal}` : `exit code ${code}`;
      reject(new Error(`${label} failed with ${status}${stderr.trim() ? `:\n${stderr.trimEnd()}` : ' and no stderr'}`));
    });
  });
}

/**
 * Times two commands in alternation, A, B, A, B, ..., so that machine noise
 * (other processes, CPU frequency, cache state) falls on both alike; the
 * ratio of their medians is then far steadier than either median alone.
 * `warmup` pairs run first and are not recorded (they bring the files the
 * commands load into the OS page cache). Each side is
 * { cmd, args, env, stdin }; returns
 * { a: { median, p10, p90, samples }, b: { ... } } in milliseconds.
 */
export async function pairedRuns({ a, b, runs = 30, warmup = 3 }) {
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`runs must be a positive integer, not ${runs}`);
  const times = { a: [], b: [] };
  for (let i = 0; i < warmup + runs; i++) {
    const timeA = await timeSpawn(a);
    const timeB = await timeSpawn(b);
    if (i >= warmup) {
      times.a.push(timeA);
      times.b.push(timeB);
    }
  }
  return { a: summarize(times.a), b: summarize(times.b) };
}

/** A positive whole number from the environment, or `fallback` when unset. */
/**
 * serve's request rates for benchmarks: a load generator sends thousands of
 * requests a second with one token or from one address, far past serve's
 * default (200 a second), which it would measure instead of the server. A
 * ceiling no run reaches keeps the check itself (hash, bucket arithmetic) in
 * what is measured, where `false` would leave it out.
 */
export const UNREACHED_REQUEST_RATES = { perSecond: 1e9, burst: 1e9 };

/**
 * `miniapp serve` from dist/ in this thread, as the benchmarks run it: on
 * 127.0.0.1 with free ports, no log, the request rates out of reach (every
 * benchmark sends thousands of requests a second with one token);
 * `options` adds what the benchmark needs (store, gRPC, upstream, ...).
 */
export async function benchServe(options) {
  const { startServe } = await import(pathToFileURL(join(ROOT, 'dist', 'server', 'serve.js')).href);
  return startServe({
    host: '127.0.0.1',
    port: 0,
    decrypt: {},
    logger: false,
    requestRates: UNREACHED_REQUEST_RATES,
    // Benchmarks sign up thousands of users from one address.
    signupLimits: false,
    version: 'bench',
    now: () => new Date(),
    ...options,
  });
}

export function envNumber(name, fallback) {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  if (!/^\d+$/.test(text.trim()) || Number(text) < 1) throw new Error(`${name} must be a positive whole number, not "${text}"`);
  return Number(text);
}

/** Closes started roles, last first; reports failures through `log` rather than hiding the benchmark's own error. */
export async function closeRoles(roles, log) {
  const errors = [];
  for (const role of [...roles].reverse()) {
    try {
      await role.close();
    } catch (error) {
      errors.push(error);
    }
  }
  if (errors.length > 0) log(`closing: ${errors.map((error) => error.message).join('; ')}`);
}

/** CREATE DATABASE `name` on the server of `adminUrl` (an embedded PostgreSQL's `url()`), through its own connection. */
export async function createDatabase(adminUrl, name) {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a plain database name: ${name}`);
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
}

/**
 * One checkout through the CLI's commerce client (dist/commerce/client.js):
 * one unit of `sku` ordered, then paid, under idempotency keys made from
 * `key` (o-KEY, p-KEY: unique per checkout, or a retry answers the stored
 * one); throws unless the payment ended DONE.
 */
export async function checkoutOnce(commerce, sku, key) {
  const { order } = await commerce.createOrder({ items: [{ sku, quantity: 1 }], idempotency_key: `o-${key}` });
  const paid = await commerce.payOrder({ order_id: order.id, idempotency_key: `p-${key}` });
  if (paid.payment.status !== 'DONE') throw new Error(`checkout ${order.id} ended ${paid.payment.status}: ${paid.message}`);
}
