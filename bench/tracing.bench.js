/**
 * What tracing costs serve, each number against the same server with
 * tracing off, measured in the same run (issue 21):
 *
 * 1. GetUser throughput with every call traced (a server span, its
 *    statements' spans) and exported over OTLP/HTTP (protobuf) to a local
 *    collector, against serve with tracing off.
 * 2. The blog's first page, uncached (every request a distinct URL, so each
 *    is a server span with its count and page statements), the same way.
 *
 * Both servers run the real startServe from dist/ (memory store) on worker
 * threads of their own; the "on" worker also runs the collector, a node:http
 * server that reads each export and answers 200, as a collector on the same
 * machine would. Sampling is the default (parentbased_always_on: every
 * request traced), the worst case; a sampler such as traceidratio costs
 * less. That tracing off costs nothing is read from the GetUser and blog
 * list rows of users.bench.js and blog.bench.js against their earlier runs.
 *
 * Settings from the environment: BENCH_TRACING_SECONDS (per run, default
 * 5), BENCH_TRACING_ROUNDS (default 3), BENCH_TRACING_POSTS (default 500).
 */
import { cpus } from 'node:os';
import { createServer } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { benchServe, envNumber, median } from './lib.js';
import { runRoleIfWorker, spawnRole } from './worker-roles.js';
import { loadGetUser } from './users.bench.js';
import { authorTokens, fetchPage, load, pathOf, seed } from './blog.bench.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const dist = (path) => import(pathToFileURL(join(ROOT, 'dist', path)).href);
const ROLE_FLAG = 'miniappTracingBench';
const PASSWORD = 'correct-horse-battery';
/** The batch span processor's schedule (5 s) and a margin: what a traced run may still be sending after it ends. */
const SETTLE_MS = 6_000;

/** A collector that takes every export and keeps only counts. */
async function startSink() {
  const counts = { exports: 0, bytes: 0 };
  const server = createServer((req, res) => {
    req.on('data', (chunk) => (counts.bytes += chunk.length));
    req.on('end', () => {
      counts.exports++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}`, counts, close: () => new Promise((resolve) => server.close(resolve)) };
}

async function startSide(traced) {
  const { resolveTracing } = await dist('telemetry/config.js');
  const sink = traced ? await startSink() : undefined;
  const running = await benchServe({
    grpc: { host: '127.0.0.1', port: 0 },
    hashCost: 10,
    store: { kind: 'memory' },
    loginLimits: false,
    tracing: sink ? resolveTracing({}, { otlpEndpoint: sink.url }) : undefined,
  });
  return {
    info: { address: running.grpc.address, url: running.url, token: running.adminToken, tracing: running.tracing ?? null },
    close: async () => {
      await running.close();
      if (sink && sink.counts.exports === 0) throw new Error('the traced server exported nothing');
      await sink?.close();
    },
  };
}

await runRoleIfWorker(ROLE_FLAG, { on: () => startSide(true), off: () => startSide(false) });

export default async function tracing(ctx) {
  const seconds = envNumber('BENCH_TRACING_SECONDS', 5);
  const rounds = envNumber('BENCH_TRACING_ROUNDS', 3);
  const posts = envNumber('BENCH_TRACING_POSTS', 500);
  const concurrency = 32;
  const cores = cpus().length;
  const [{ connectUserService }, { default: autocannon }] = await Promise.all([dist('users/client.js'), import('autocannon')]);
  const sides = { on: spawnRole(new URL(import.meta.url), ROLE_FLAG, 'on'), off: spawnRole(new URL(import.meta.url), ROLE_FLAG, 'off') };
  const clients = {};
  try {
    const infos = { on: await sides.on.ready, off: await sides.off.ready };
    if (!infos.on.tracing || infos.off.tracing) throw new Error(`tracing on/off as expected? on: ${infos.on.tracing}, off: ${infos.off.tracing}`);
    for (const [name, info] of Object.entries(infos)) {
      clients[name] = connectUserService({ address: info.address, token: info.token, deadlineMs: 10_000 });
      for (let i = 1; i <= 5; i++)
        await clients[name].createUser({ username: `user${i}`, email: `user${i}@example.com`, password: PASSWORD, full_name: `User ${i}` });
      const tokens = await authorTokens(info.url, info.token);
      await seed(info.url, tokens, posts);
      await fetchPage(info.url, 1, posts);
    }
    ctx.log(`on ${infos.on.address} (${infos.on.tracing}), off ${infos.off.address}; ${posts} posts each`);

    const unary = { on: [], off: [] };
    const list = { on: [], off: [] };
    for (const name of ['on', 'off']) {
      await loadGetUser(clients[name], { seconds: 1, concurrency, id: '1' });
      await load(autocannon, { url: infos[name].url, path: pathOf(1), seconds: 1, connections: 10, distinct: true, label: `warm-up ${name}` });
    }
    // After a traced run the exporter still has spans to send (the batch processor sends every 5 s, or at 512 spans):
    // the next run waits for that, so that the cost of tracing is not charged to the run of the server without it.
    const settle = (name) => (name === 'on' ? new Promise((resolve) => setTimeout(resolve, SETTLE_MS)) : undefined);
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? ['on', 'off'] : ['off', 'on'];
      for (const name of order) {
        const rate = await loadGetUser(clients[name], { seconds, concurrency, id: String(1 + (round % 5)) });
        unary[name].push(rate);
        ctx.log(`round ${round + 1} GetUser tracing ${name}: ${rate.toFixed(0)} calls/s`);
        await settle(name);
      }
      for (const name of order) {
        const { rps } = await load(autocannon, { url: infos[name].url, path: pathOf(1), seconds, connections: 10, distinct: true, label: `blog ${name}` });
        list[name].push(rps);
        ctx.log(`round ${round + 1} blog list tracing ${name}: ${rps.toFixed(0)} req/s`);
        await settle(name);
      }
    }
    const setup = `a pause of ${SETTLE_MS / 1000} s after each traced run, for its exporter to finish; memory store, every request traced (parentbased_always_on) and exported over OTLP/HTTP protobuf to a collector on 127.0.0.1; ${seconds} s x ${rounds} rounds alternating, median of rounds; each server on its own worker thread, the generator on the main thread, ${cores} cores`;
    const fmt = (values) => values.map((v) => v.toFixed(0)).join(', ');
    return [
      {
        name: 'GetUser throughput, tracing on',
        value: median(unary.on),
        unit: 'calls/s',
        floorName: 'the same server, tracing off',
        floorValue: median(unary.off),
        // The issue asks for the cost to be reported, not bounded; 0.6x is this file's own alarm bell.
        target: 0.6,
        better: 'higher',
        note: `rounds: on ${fmt(unary.on)}, off ${fmt(unary.off)} calls/s; the CLI's client, ${concurrency} calls in flight; a server span and its statements' spans per call; ${setup}`,
      },
      {
        name: `blog GET ${pathOf(1)} uncached, tracing on`,
        value: median(list.on),
        unit: 'req/s',
        floorName: 'the same server, tracing off',
        floorValue: median(list.off),
        target: 0.6,
        better: 'higher',
        note: `rounds: on ${fmt(list.on)}, off ${fmt(list.off)} req/s; every request a distinct URL (no list cache), ${posts} posts; autocannon 10 connections; ${setup}`,
      },
    ];
  } finally {
    for (const client of Object.values(clients)) client.close();
    await sides.on.close();
    await sides.off.close();
  }
}
