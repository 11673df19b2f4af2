/**
 * Abuse, a few minutes long (issue 39): one `miniapp serve` process on
 * SQLite, with its default request rates, and a well-behaved client
 * (bench/abuse-client.js, on a worker thread: GetUser of its own record,
 * GET /health, a page of posts) that keeps calling through three phases:
 *
 * 1. quiet: nobody else (its p99 is the floor);
 * 2. attacked: every attack of bench/abuse-attacks.js at once, from the
 *    same address: rapid reset (item 1), stalled watchers of three accounts
 *    over a log of 30,000 changes (item 2), endless multipart uploads (item
 *    3), deeply nested JSON (item 5), made-up-token floods and SyncUsers
 *    floods (item 11);
 * 3. after: the attacks stopped, serve left to settle.
 *
 * Rows: the client's p99 attacked against quiet (target 3x, the issue's);
 * serve's peak resident memory during the attack and its memory and open
 * descriptors at the end of phase 3, each against its quiet median, all
 * read from /proc/PID. The attackers share the machine's cores with serve
 * and the client; the notes say what each attack got.
 *
 * Settings from the environment: BENCH_ABUSE_QUIET_S (default 40: the floor's p99 needs as many calls as the attacked one's to be steady),
 * BENCH_ABUSE_ATTACK_S (default 60), BENCH_ABUSE_AFTER_S (default 20);
 * BENCH_ABUSE_ONLY=name,... runs only those attacks (a diagnosis).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { fork } from 'node:child_process';
import { loadavg, setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import * as grpc from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import { request } from 'undici';
import { startServeProcess } from '../test/helpers/chaos.js';
import { envNumber, quantile } from './lib.js';

const PASSWORD = 'abuse-password-1';
const LOGGED = 30_000;
const ATTACKERS = 3;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function procSample(pid) {
  const rssKb = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
  return { at: Date.now(), rssMb: rssKb / 1024, fds: readdirSync(`/proc/${pid}/fd`).length };
}

/** User plus system CPU time of a process so far, in seconds (clock ticks of 1/100 s). */
function cpuTicks(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

/**
 * From serve's /metrics: V8's heap in use and the memory outside it (Buffers), in MB (where its RSS is), and its
 * event loop's delay since the last scrape (p99 and max, ms; prom-client resets the histogram on each scrape).
 */
async function heapOf(url) {
  try {
    const answer = await request(`${url}/metrics`);
    const text = await answer.body.text();
    const value = (name) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)`, 'm').exec(text)?.[1]) / 1024 / 1024;
    // The histogram's resolution (10 ms) is counted in every value.
    const lag = (name) => (value(name) * 1024 * 1024 - 0.01) * 1000;
    return {
      heap: value('\\w*nodejs_heap_size_used_bytes'),
      external: value('\\w*nodejs_external_memory_bytes'),
      lagP99: lag('\\w*nodejs_eventloop_lag_p99_seconds'),
      lagMax: lag('\\w*nodejs_eventloop_lag_max_seconds'),
      // serve's own view of GetUser: its duration histogram's cumulative buckets (le -> count).
      getUser: Object.fromEntries(
        text
          .split('\n')
          .filter((line) => /^\w*grpc_request_duration_seconds_bucket\{/.test(line) && line.includes('/GetUser"'))
          .map((line) => [/le="([^"]+)"/.exec(line)[1], Number(line.split(' ').at(-1))]),
      ),
    };
  } catch {
    return { heap: Number.NaN, external: Number.NaN, lagP99: Number.NaN, lagMax: Number.NaN };
  }
}

function unary(client, method, body, token) {
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  return new Promise((resolve, reject) =>
    client[method](body, metadata, { deadline: Date.now() + 10_000 }, (error, response) =>
      error ? reject(new Error(`${method}: ${error.details}`)) : resolve(response),
    ),
  );
}

async function login(url, username) {
  const answer = await request(`${url}/api/v1/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password: PASSWORD }),
  });
  const body = await answer.body.json();
  if (answer.statusCode !== 200 || !body.access_token) throw new Error(`login of ${username}: ${answer.statusCode} ${JSON.stringify(body)}`);
  return body.access_token;
}

const median = (values) =>
  quantile(
    [...values].sort((a, b) => a - b),
    0.5,
  );
const p = (values, q) =>
  quantile(
    [...values].sort((a, b) => a - b),
    q,
  );
const fmt = (n) => n.toFixed(1);

export default async function abuse(ctx) {
  const quietS = envNumber('BENCH_ABUSE_QUIET_S', 40);
  const attackS = envNumber('BENCH_ABUSE_ATTACK_S', 60);
  const afterS = envNumber('BENCH_ABUSE_AFTER_S', 20);
  // A diagnosis: only these attacks (comma-separated names of abuse-attacks.js), to see which one costs what.
  const only = (process.env.BENCH_ABUSE_ONLY ?? '').split(',').filter(Boolean);
  const loadBefore = loadavg()[0];
  const { userServiceDefinition } = await import(pathToFileURL(join(ctx.root, 'dist', 'users', 'proto.js')).href);
  const { databasePath } = await import(pathToFileURL(join(ctx.root, 'dist', 'store', 'database.js')).href);
  const { Client } = userServiceDefinition();

  const home = mkdtempSync(join(tmpdir(), 'miniapp-bench-abuse-'));
  // serve's own request rates (the helper turns them off for load tests), its temporary upload files in the home.
  // BENCH_ABUSE_SERVE_NODE_ARGS: options of node for serve alone (a diagnosis: `--cpu-prof --cpu-prof-dir=DIR`).
  const serveNodeOptions = process.env.BENCH_ABUSE_SERVE_NODE_ARGS;
  const options = {
    home,
    extraArgs: ['--rate-limit', '200'],
    env: { TMPDIR: home },
    nodeArgs: serveNodeOptions ? serveNodeOptions.split(' ').filter(Boolean) : [],
  };
  const cleanups = [];
  try {
    // The accounts, then a change log of 30,000 changes of the first attacker, written while serve is stopped.
    const first = await startServeProcess(options);
    cleanups.push(() => first.dispose());
    const admin = first.info.adminToken;
    const setup = new Client(first.info.grpc.address, grpc.credentials.createInsecure());
    const names = ['goodclient', ...Array.from({ length: ATTACKERS }, (_, i) => `attacker${i + 1}`)];
    const users = {};
    for (const name of names)
      users[name] = (await unary(setup, 'CreateUser', { username: name, email: `${name}@example.com`, password: PASSWORD, full_name: name }, admin)).user;
    setup.close();
    await first.stop();
    const db = new Database(databasePath(join(home, 'data')));
    const row = db.prepare('SELECT payload, at FROM user_events ORDER BY seq DESC LIMIT 1').get();
    const head = db.prepare("SELECT value FROM counters WHERE name = 'user_events'").get().value;
    db.transaction(() => {
      const insert = db.prepare("INSERT INTO user_events (seq, type, payload, at, user_id) VALUES (?, 'UPDATED', ?, ?, ?)");
      for (let i = 1; i <= LOGGED; i++) insert.run(head + i, row.payload, row.at, JSON.parse(row.payload).id);
      db.prepare("UPDATE counters SET value = ? WHERE name = 'user_events'").run(head + LOGGED);
    })();
    db.close();

    const serve = await startServeProcess(options);
    cleanups.push(() => serve.dispose());
    const pid = serve.child.pid;
    const { url } = serve.info;
    const grpcAddress = serve.info.grpc.address;
    const tokens = {};
    for (const name of names) tokens[name] = await login(url, name);
    for (let i = 0; i < 20; i++) {
      const answer = await request(`${url}/api/v2/blog/posts`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens.goodclient}` },
        body: JSON.stringify({ title: `Post ${i}`, content: `The content of post ${i}.`, is_published: true }),
      });
      if (answer.statusCode !== 201) throw new Error(`creating a post: ${answer.statusCode} ${await answer.body.text()}`);
      await answer.body.dump();
    }
    const reader = new Client(grpcAddress, grpc.credentials.createInsecure());
    const records = {};
    for (const name of names.slice(1)) records[name] = await unary(reader, 'GetUser', { user_id: users[name].id }, tokens[name]);
    reader.close();
    ctx.log(`abuse: serve pid ${pid}, ${LOGGED} changes in the log; quiet ${quietS} s, attacked ${attackS} s, after ${afterS} s`);

    // The client, and /proc every 250 ms.
    const samples = [];
    const worker = new Worker(new URL('./abuse-client.js', import.meta.url), {
      workerData: { root: ctx.root, url, grpcAddress, token: tokens.goodclient, userId: users.goodclient.id },
    });
    const finished = new Promise((resolve, reject) => {
      worker.on('message', (message) => (message === 'done' ? resolve() : samples.push(...message)));
      worker.on('error', reject);
    });
    const proc = [];
    const sampler = setInterval(() => {
      try {
        proc.push(procSample(pid));
      } catch {
        // serve is gone: found below.
      }
    }, 250);

    // The attackers in a process of their own at a low CPU priority: an attacker is another host.
    const attackerNice = envNumber('BENCH_ABUSE_ATTACKER_NICE', 19);
    const attackerProcess = fork(new URL('./abuse-attacker-process.js', import.meta.url), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    cleanups.push(() => attackerProcess.kill('SIGKILL'));
    setPriority(attackerProcess.pid, attackerNice);
    const attackerCpu = () => cpuTicks(attackerProcess.pid);
    const serveCpu = () => cpuTicks(pid);

    await heapOf(url); // the event loop's delay histogram starts afresh with the quiet phase
    const t0 = Date.now();
    await sleep(quietS * 1_000);
    const heapQuiet = await heapOf(url);
    const attackAt = Date.now();
    const cpuAtAttack = { serve: serveCpu(), attackers: attackerCpu() };
    ctx.log('abuse: attacking');
    const attackers = names.slice(1);
    const started = new Promise((resolve) => attackerProcess.once('message', resolve));
    attackerProcess.send({ start: { root: ctx.root, url, grpcAddress, tokens, records, attackers, only } });
    await started;
    while (Date.now() - attackAt < attackS * 1_000) {
      await sleep(Math.min(10_000, attackS * 1_000 - (Date.now() - attackAt)));
      const last = proc.at(-1);
      ctx.log(`abuse: ${fmt((Date.now() - attackAt) / 1000)} s into the attack: serve ${last ? `${fmt(last.rssMb)} MB, ${last.fds} fds` : 'gone'}`);
    }
    const ended = new Promise((resolve) => attackerProcess.on('message', (message) => message?.counts && resolve(message.counts)));
    attackerProcess.send('stop');
    const stopAt = Date.now();
    const cpuAtStop = { serve: serveCpu(), attackers: attackerCpu() };
    const heapAttacked = await heapOf(url);
    // GetUser as serve timed it during the attack: the share of calls past each bucket's bound.
    const served = Object.entries(heapAttacked.getUser ?? {}).map(([le, count]) => [le, count - (heapQuiet.getUser?.[le] ?? 0)]);
    const servedAll = served.find(([le]) => le === '+Inf')?.[1] ?? 0;
    const servedNote = served
      .filter(([le]) => ['0.005', '0.01', '0.025', '0.05'].includes(le))
      .map(([le, count]) => `${((1 - count / servedAll) * 100).toFixed(1)}% over ${Number(le) * 1000} ms`)
      .join(', ');
    ctx.log('abuse: attacks stopped');
    const c = await ended;
    await sleep(Math.max(0, afterS * 1_000 - (Date.now() - stopAt)));
    const heapAfter = await heapOf(url);
    const endAt = Date.now();
    worker.postMessage('stop');
    await finished;
    await worker.terminate();
    clearInterval(sampler);
    if (!serve.alive()) throw new Error(`serve died during the abuse run: ${serve.stderr().slice(-2_000)}`);
    // A stop serve takes to the end, so that a profile asked for by BENCH_ABUSE_SERVE_NODE_OPTIONS is written.
    if (serveNodeOptions) await serve.stop('SIGTERM');

    // The first 2 s of the quiet phase warm up; the after phase's second half is where serve has settled.
    const within = (from, to) => samples.filter(([at]) => at >= from && at < to);
    const quiet = within(t0 + 2_000, attackAt);
    const attacked = within(attackAt, stopAt);
    const settled = within(endAt - (afterS * 1_000) / 2, endAt + 1);
    const ms = (list) => list.map(([, , duration]) => duration);
    const failed = (list) => list.filter(([, , , ok]) => !ok).length;
    const byKind = (list) =>
      ['GetUser', 'health', 'posts']
        .map((kind) => {
          const of = list.filter(([, k]) => k === kind);
          return `${kind} p50 ${fmt(p(ms(of), 0.5))} p99 ${fmt(p(ms(of), 0.99))} ms`;
        })
        .join(', ');
    const quietP99 = p(ms(quiet), 0.99);
    const attackedP99 = p(ms(attacked), 0.99);
    const settledP99 = p(ms(settled), 0.99);

    const procWithin = (from, to) => proc.filter((s) => s.at >= from && s.at < to);
    const quietProc = procWithin(t0 + 2_000, attackAt);
    const attackProc = procWithin(attackAt, stopAt + 2_000);
    const end = proc.at(-1);
    const quietRss = median(quietProc.map((s) => s.rssMb));
    const quietFds = median(quietProc.map((s) => s.fds));
    const peakRss = Math.max(...attackProc.map((s) => s.rssMb));
    const peakFds = Math.max(...attackProc.map((s) => s.fds));
    const fdsBackMs = (() => {
      const back = proc.find((s) => s.at >= stopAt && s.fds <= quietFds + 10);
      return back ? back.at - stopAt : undefined;
    })();

    const describe = {
      rapidReset: (k) => `rapid reset: ${k.sessions} sessions, ${k.resets} resets, GOAWAY codes ${JSON.stringify(k.goaways)}`,
      stalledWatchers: (k) =>
        `stalled watchers: ${ATTACKERS} accounts x 20 slots, ${k.opened} opened, ${k.refused} refused, grpc-status in headers ${JSON.stringify(k.statuses)}`,
      endlessUploads: (k) => `endless uploads: 40 connections, ${k.opened} opened, ${k.megabytes} MB sent, answers ${JSON.stringify(k.answers)}`,
      nestedJson: (k) => `nested JSON (250,000 deep, 8 loops x 5/s): answers ${JSON.stringify(k.answers)}`,
      randomTokens: (k) => `made-up tokens: HTTP ${JSON.stringify(k.http)}, gRPC ${JSON.stringify(k.grpc)}`,
      syncFlood: (k) =>
        `SyncUsers floods (${ATTACKERS} accounts): ${k.written} upserts written, answers ${JSON.stringify(k.answers)}, ended ${JSON.stringify(k.ended)}`,
    };
    const attackNote = `${only.length ? `only ${only.join(', ')}: ` : ''}${Object.keys(c)
      .map((name) => describe[name](c[name]))
      .join(
        '; ',
      )}; CPU during the attack: serve ${fmt((cpuAtStop.serve - cpuAtAttack.serve) / attackS)} cores, the attackers ${fmt((cpuAtStop.attackers - cpuAtAttack.attackers) / attackS)} (at nice ${attackerNice}); load average ${loadBefore.toFixed(1)} before, ${loadavg()[0].toFixed(1)} after`;
    ctx.log(`abuse: ${attackNote}`);
    return [
      {
        name: 'abuse: well-behaved client p99, attacked (items 1, 2, 3, 5, 11 at once)',
        value: attackedP99,
        unit: 'ms',
        floorName: 'the same client, quiet serve',
        floorValue: quietP99,
        target: 3,
        better: 'lower',
        note:
          `${quiet.length} calls quiet, ${attacked.length} attacked, ${settled.length} in the settled half of the after phase (p99 ${fmt(settledP99)} ms); ` +
          `failed: quiet ${failed(quiet)}, attacked ${failed(attacked)}, after ${failed(settled)}; ` +
          `quiet: ${byKind(quiet)}; attacked: ${byKind(attacked)}; ` +
          `GetUser as serve timed it, attacked: ${servedAll} calls, ${servedNote}; ` +
          `serve's event loop delay p99 ${fmt(heapQuiet.lagP99)} ms (max ${fmt(heapQuiet.lagMax)}) quiet, ${fmt(heapAttacked.lagP99)} ms (max ${fmt(heapAttacked.lagMax)}) attacked; ` +
          `phases ${quietS} / ${attackS} / ${afterS} s; serve on SQLite with its default request rates (200/s a token, else an address), one machine of 2 cores for serve, the attackers and the client (worker thread); ${attackNote}`,
      },
      {
        name: 'abuse: serve peak RSS during the attack',
        value: peakRss,
        unit: 'MB',
        floorName: 'serve RSS, quiet (median)',
        floorValue: quietRss,
        target: 3,
        better: 'lower',
        note: `/proc/PID/status VmRSS every 250 ms; peak descriptors ${peakFds} against ${quietFds} quiet (the attackers' connections while they are open); target 3x is this benchmark's own: bounded (the issue measured gigabytes)`,
      },
      {
        name: 'abuse: serve RSS after the attack',
        value: end.rssMb,
        unit: 'MB',
        floorName: 'serve RSS, quiet (median)',
        floorValue: quietRss,
        target: 1.5,
        better: 'lower',
        note: `${afterS} s after the attacks stopped; what V8 and the allocator have not given back to the system counts here; V8 heap in use ${fmt(heapQuiet.heap)} MB quiet, ${fmt(heapAfter.heap)} MB after; outside it (Buffers) ${fmt(heapQuiet.external)} MB, ${fmt(heapAfter.external)} MB`,
      },
      {
        name: 'abuse: serve descriptors after the attack',
        value: end.fds,
        unit: 'fds',
        floorName: 'serve descriptors, quiet (median)',
        floorValue: quietFds,
        target: 1.25,
        better: 'lower',
        note: `/proc/PID/fd; ${fdsBackMs === undefined ? 'never' : `${fmt(fdsBackMs / 1000)} s after the attacks stopped`} within 10 of the quiet count; peak ${peakFds}`,
      },
    ];
  } finally {
    for (const cleanup of cleanups.reverse()) cleanup();
    rmSync(home, { recursive: true, force: true });
  }
}
