/**
 * Chaos for `miniapp serve` on PostgreSQL: several real `serve` processes
 * (bin/miniapp.cjs, built dist/) share one database behind the fault proxy
 * (tcp-proxy.js), under mixed load, while the network between them and the
 * database resets, stalls and heals, and the database itself restarts.
 *
 * What must hold, checked here and returned as `violations`:
 * - every answer belongs to its request: a post is created as the user of
 *   the token that asked, GetUser answers the user asked for, and a valid
 *   token is never refused (401 / UNAUTHENTICATED);
 * - failures while the database cannot answer are 503 / UNAVAILABLE, never
 *   a 500 / INTERNAL, and no call outlives its time-out by much;
 * - every acknowledged write (201) is in the database at the end;
 * - every watcher sees every user change once, in order, across
 *   reconnections (WatchUserChanges resumes after the last event it saw);
 * - each instance serves again within `recoveryBoundMs` of the network
 *   healing or the database coming back;
 * - no instance dies, logs an unhandled rejection, or takes longer than its
 *   drain time to stop on SIGTERM.
 *
 * Plain JavaScript, so that the suite (test/server/chaos.test.ts) and the
 * benchmarks (bench/chaos.bench.js, minutes long) run the same thing.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { startTcpProxy } from './tcp-proxy.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = join(ROOT, 'bin', 'miniapp.cjs');
const PASSWORD = 'chaos-password-1';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * One `miniapp serve` process. Resolves once it prints its addresses
 * (--json); rejects with its stderr if it exits first.
 */
export async function startServeProcess({
  databaseUrl,
  timeoutMs = 5_000,
  poolSize = 10,
  home: givenHome,
  port = 0,
  grpcPort = 0,
  extraArgs = [],
  env = {},
  nodeArgs = [],
}) {
  // A home of its own (config and data dir), or the one given: a restart on the same SQLite data dir.
  const home = givenHome ?? mkdtempSync(join(tmpdir(), 'miniapp-chaos-'));
  const args = [
    BIN,
    'serve',
    '--json',
    '--port',
    String(port),
    '--grpc-port',
    String(grpcPort),
    '--log-format',
    'json',
    '--log-level',
    'warn',
    '--password-hash-cost',
    '10',
    // A load test: its workers send hundreds of requests a second from one address and with one admin token.
    '--rate-limit',
    '0',
    // And they sign up hundreds of users from 127.0.0.1.
    '--signup-limit',
    '0',
    ...(databaseUrl ? ['--database', databaseUrl, '--database-timeout', `${timeoutMs}ms`, '--database-pool', String(poolSize)] : []),
    // No drain period unless asked for: these tests stop serve to test the stop, not a load balancer's view of it.
    ...(extraArgs.includes('--drain') ? [] : ['--drain', '0']),
    ...extraArgs,
  ];
  // nodeArgs: options of node itself (`--cpu-prof`, which NODE_OPTIONS does not take).
  const child = spawn(process.execPath, [...nodeArgs, ...args], {
    env: { PATH: process.env.PATH, HOME: home, MINIAPP_CONFIG_DIR: join(home, 'config'), MINIAPP_DATA_DIR: join(home, 'data'), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  child.stderr.setEncoding('utf8').on('data', (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const info = await new Promise((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (chunk) => {
      stdout += chunk;
      const line = stdout.split('\n')[0];
      if (stdout.includes('\n')) {
        try {
          // The banner names the 0600 file that holds the admin token, never the token itself.
          const banner = JSON.parse(line);
          resolve({ ...banner, adminToken: readFileSync(banner.adminTokenFile, 'utf8').trim() });
        } catch (error) {
          reject(new Error(`serve printed ${line}: ${error.message}`));
        }
      }
    });
    exited.then(({ code, signal }) => reject(new Error(`serve exited (${code ?? signal}) before it listened: ${stderr}`)));
  });
  let alive = true;
  exited.then(() => (alive = false));
  return {
    info,
    child,
    stderr: () => stderr,
    exited,
    alive: () => alive,
    /** SIGTERM (or `signal`), and the exit with how long it took. */
    async stop(signal = 'SIGTERM') {
      const started = Date.now();
      if (alive) child.kill(signal);
      const result = await exited;
      return { ...result, ms: Date.now() - started };
    },
    dispose() {
      if (alive) child.kill('SIGKILL');
      if (!givenHome) rmSync(home, { recursive: true, force: true });
    },
  };
}

/** A gRPC UserService client of `address` (from the built dist/). */
async function userClient(address) {
  const { userServiceDefinition } = await import(join(ROOT, 'dist', 'users', 'proto.js'));
  const { Client } = userServiceDefinition();
  return new Client(address, grpc.credentials.createInsecure());
}

function unary(client, method, body, token, deadlineMs) {
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  return new Promise((resolve) => {
    client[method](body, metadata, { deadline: Date.now() + deadlineMs }, (error, response) =>
      resolve(error ? { code: grpc.status[error.code], details: error.details } : { code: 'OK', response }),
    );
  });
}

async function http(base, method, path, { json, token, timeoutMs }) {
  const headers = {};
  if (json !== undefined) headers['content-type'] = 'application/json';
  if (token) headers.authorization = `Bearer ${token}`;
  try {
    const response = await request(`${base}${path}`, {
      method,
      headers,
      body: json === undefined ? undefined : JSON.stringify(json),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const text = await response.body.text();
    let body;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = text;
    }
    return { status: response.statusCode, body };
  } catch (error) {
    return { status: 0, error: error.code ?? error.message };
  }
}

/**
 * A watcher of WatchUserChanges on one instance that resumes after the last
 * event it saw whenever its stream breaks; `events` are the CREATED
 * usernames it received, in order, with their sequence numbers.
 */
function watch(client, token, onViolation) {
  const events = [];
  // From the first change of the log: what it saw is comparable with the whole log.
  let last = 0;
  let stopped = false;
  let call;
  const connect = () => {
    if (stopped) return;
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    call = client.WatchUserChanges({ resume_after: String(last) }, metadata);
    call.on('data', (event) => {
      const seq = Number(event.sequence);
      if (seq !== last + 1) onViolation(`a watcher got change ${seq} after ${last}`);
      last = seq;
      if (event.type === 'CREATED') events.push(event.user.username);
    });
    call.on('error', (error) => {
      if (stopped) return;
      if (error.code !== grpc.status.UNAVAILABLE && error.code !== grpc.status.CANCELLED)
        onViolation(`a watch stream failed with ${grpc.status[error.code]}: ${error.details}`);
      setTimeout(connect, 200);
    });
    call.on('end', () => {
      if (!stopped) setTimeout(connect, 200);
    });
  };
  connect();
  return {
    events,
    last: () => last,
    stop: () => {
      stopped = true;
      call?.cancel();
    },
  };
}

/**
 * Runs the chaos. `databaseUrl` reaches the database directly (the
 * instances go through the proxy); `schedule` is a list of
 * `{ fault: 'reset' | 'blackhole' | 'restart', ms }` windows, each
 * followed by `calmMs` of a healthy network; `restartDatabase(ms)` stops the
 * database for `ms` and starts it again (for 'restart').
 */
export async function runChaos({
  databaseUrl,
  instances = 2,
  timeoutMs = 1_000,
  poolSize = 4,
  workers = 12,
  users = 20,
  schedule,
  calmMs = 6_000,
  recoveryBoundMs = 5_000,
  restartDatabase,
  watchers: watching = true,
  log = () => undefined,
}) {
  const violations = [];
  const violation = (text) => {
    if (violations.length < 200) violations.push(text);
  };
  const target = new URL(databaseUrl);
  const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
  const proxied = new URL(databaseUrl);
  proxied.port = String(proxy.port);
  const serves = [];
  const clients = [];
  const watchers = [];
  const direct = new pg.Client({ connectionString: databaseUrl });
  const recoveries = [];
  const counts = { calls: 0, ok: 0, unavailable: 0 };
  try {
    for (let i = 0; i < instances; i++) {
      serves.push(await startServeProcess({ databaseUrl: proxied.href, timeoutMs, poolSize }));
    }
    const admin = serves[0].info.adminToken;
    for (const serve of serves) clients.push(await userClient(serve.info.grpc.address));
    log(`${instances} instances up`);

    // Users with tokens, made before the faults.
    const people = [];
    for (let i = 0; i < users; i++) {
      const base = serves[i % instances].info.url;
      const username = `chaos${i}`;
      const email = `${username}@example.com`;
      const made = await http(base, 'POST', '/api/v2/users', { json: { username, email, password: PASSWORD }, timeoutMs: 30_000 });
      if (made.status !== 201) throw new Error(`could not make user ${username}: ${made.status} ${JSON.stringify(made.body)}`);
      const login = await http(base, 'POST', '/api/v2/auth/login', { json: { email, password: PASSWORD }, timeoutMs: 30_000 });
      if (login.status !== 200) throw new Error(`could not log in ${username}: ${login.status}`);
      people.push({ id: made.body.id, username, token: login.body.access_token });
    }
    if (watching) for (let i = 0; i < instances; i++) watchers.push(watch(clients[i], admin, violation));

    // The load: signups, posts as token users, lists, GetUser; every answer checked against its question.
    const acknowledged = { users: [], posts: [] };
    let running = true;
    let signups = 0;
    const slowBound = timeoutMs * 3 + 2_000;
    const loops = Array.from({ length: workers }, async (_, worker) => {
      for (let n = 0; running; n++) {
        const at = (worker + n) % instances;
        const base = serves[at].info.url;
        const person = people[(worker * 31 + n) % people.length];
        const started = Date.now();
        const kind = ['signup', 'post', 'list', 'get', 'post', 'get'][n % 6];
        let outcome;
        if (kind === 'signup') {
          const username = `w${worker}n${signups++}`;
          const made = await http(base, 'POST', '/api/v2/users', {
            json: { username, email: `${username}@example.com`, password: PASSWORD },
            timeoutMs: slowBound + 5_000,
          });
          outcome = made.status;
          if (made.status === 201) acknowledged.users.push(username);
        } else if (kind === 'post') {
          const made = await http(base, 'POST', '/api/v2/blog/posts', {
            json: { title: `by ${person.username}`, content: 'chaos' },
            token: person.token,
            timeoutMs: slowBound + 5_000,
          });
          outcome = made.status;
          if (made.status === 201) {
            if (made.body.author !== person.username) violation(`a post made with ${person.username}'s token was written as ${made.body.author}`);
            acknowledged.posts.push({ id: made.body.id, author: person.username });
          }
          if (made.status === 401) violation(`${person.username}'s valid token was refused: ${JSON.stringify(made.body)}`);
        } else if (kind === 'list') {
          const listed = await http(base, 'GET', '/api/v2/blog/posts?page_size=5', { timeoutMs: slowBound + 5_000 });
          outcome = listed.status;
        } else {
          const got = await unary(clients[at], 'GetUser', { user_id: String(person.id) }, admin, slowBound + 5_000);
          outcome = got.code === 'OK' ? 200 : got.code === 'UNAVAILABLE' ? 503 : got.code;
          if (got.code === 'OK' && (Number(got.response.id) !== person.id || got.response.username !== person.username)) {
            violation(`GetUser ${person.id} answered user ${got.response.id} (${got.response.username})`);
          }
          if (got.code === 'UNAUTHENTICATED') violation(`the admin token was refused: ${got.details}`);
        }
        const ms = Date.now() - started;
        counts.calls++;
        if (outcome === 200 || outcome === 201) counts.ok++;
        else if (outcome === 503) counts.unavailable++;
        else violation(`${kind} on instance ${at} answered ${outcome}`);
        if (ms > slowBound) violation(`${kind} on instance ${at} took ${ms} ms (time-out ${timeoutMs} ms)`);
        if (outcome !== 200 && outcome !== 201) await sleep(50);
      }
    });

    /** How long until every instance serves a database-backed call again. */
    const recovery = async (label) => {
      const started = Date.now();
      await Promise.all(
        serves.map(async (serve, i) => {
          for (;;) {
            const ready = await http(serve.info.url, 'GET', '/api/v2/blog/posts?page_size=1', { timeoutMs: 5_000 });
            const got = await unary(clients[i], 'GetUser', { user_id: String(people[0].id) }, admin, 5_000);
            if (ready.status === 200 && got.code === 'OK') break;
            if (Date.now() - started > 60_000) {
              violation(`instance ${i} did not serve again within 60 s of ${label}`);
              break;
            }
            await sleep(100);
          }
        }),
      );
      const ms = Date.now() - started;
      recoveries.push({ after: label, ms });
      if (ms > recoveryBoundMs) violation(`after ${label} the instances served again only after ${ms} ms (bound ${recoveryBoundMs} ms)`);
      log(`${label}: served again after ${ms} ms`);
    };

    await sleep(calmMs);
    for (const [index, step] of schedule.entries()) {
      const label = `${step.fault} #${index + 1} (${step.ms} ms)`;
      log(`${label}: start`);
      if (step.fault === 'restart') {
        await restartDatabase(step.ms);
      } else {
        proxy.setMode(step.fault);
        await sleep(step.ms);
        proxy.setMode('pass');
      }
      await recovery(label);
      await sleep(calmMs);
      for (const [i, serve] of serves.entries()) if (!serve.alive()) violation(`instance ${i} died during ${label}: ${serve.stderr().slice(-2000)}`);
    }
    running = false;
    await Promise.all(loops);

    // Every acknowledged write is in the database.
    await direct.connect();
    const names = new Set((await direct.query('SELECT username FROM users')).rows.map((row) => row.username));
    const missingUsers = acknowledged.users.filter((name) => !names.has(name));
    if (missingUsers.length) violation(`${missingUsers.length} acknowledged signups are not in the database: ${missingUsers.slice(0, 5).join(', ')}`);
    const posts = new Map((await direct.query('SELECT id, author FROM posts')).rows.map((row) => [Number(row.id), row.author]));
    const missingPosts = acknowledged.posts.filter((post) => posts.get(Number(post.id)) !== post.author);
    if (missingPosts.length)
      violation(`${missingPosts.length} acknowledged posts are not in the database as acknowledged: ${JSON.stringify(missingPosts.slice(0, 5))}`);

    // Every watcher saw every user made once, in the order of the change log (they watch from its first change),
    // once they have caught up with its last change.
    const head = Number((await direct.query('SELECT COALESCE(max(seq), 0) AS head FROM user_events')).rows[0].head);
    const caughtUpBy = Date.now() + 15_000;
    while (watchers.some((watcher) => watcher.last() < head) && Date.now() < caughtUpBy) await sleep(100);
    for (const [i, watcher] of watchers.entries())
      if (watcher.last() < head) violation(`watcher ${i} is at change ${watcher.last()} of ${head}, 15 s after the load stopped`);
    const expected = (await direct.query("SELECT payload FROM user_events WHERE type = 'CREATED' ORDER BY seq")).rows.map(
      (row) => JSON.parse(row.payload).username,
    );
    for (const [i, watcher] of watchers.entries()) {
      const seen = watcher.events;
      const have = new Set(seen);
      const duplicates = seen.length - have.size;
      const missing = expected.filter((name) => !have.has(name));
      const inOrder = seen.length === expected.length && seen.every((name, at) => name === expected[at]);
      if (duplicates || missing.length || !inOrder) {
        violation(
          `watcher ${i}: ${missing.length} of ${expected.length} user creations missing, ${duplicates} repeated${inOrder ? '' : ", not in the log's order"}`,
        );
      }
    }
    for (const watcher of watchers) watcher.stop();

    for (const [i, serve] of serves.entries()) {
      const text = serve.stderr();
      if (/Unhandled|uncaught|FATAL|TypeError|RangeError/i.test(text))
        violation(`instance ${i} logged: ${text.match(/.*(Unhandled|uncaught|FATAL|TypeError|RangeError).*/i)?.[0]}`);
    }
    const stops = await Promise.all(serves.map((serve) => serve.stop('SIGTERM')));
    for (const [i, stop] of stops.entries()) {
      if (stop.code !== 0) violation(`instance ${i} exited ${stop.code ?? stop.signal} on SIGTERM: ${serves[i].stderr().slice(-1000)}`);
      if (stop.ms > 10_000) violation(`instance ${i} took ${stop.ms} ms to stop on SIGTERM`);
    }
    return {
      violations,
      recoveries,
      counts,
      acknowledged: { users: acknowledged.users.length, posts: acknowledged.posts.length },
      watched: watchers.map((w) => w.events.length),
    };
  } finally {
    for (const watcher of watchers) watcher.stop();
    for (const client of clients) client.close();
    for (const serve of serves) serve.dispose();
    await direct.end().catch(() => undefined);
    await proxy.stop();
  }
}
