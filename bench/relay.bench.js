/**
 * `GET /api/auth/me` through the relay (`miniapp serve`) to a sandbox,
 * against a floor: a minimal hand-written relay (node:http, an undici Pool,
 * the same decryption) forwarding to the same sandbox, loaded by the same
 * generator (autocannon) with the same settings, in the same run.
 *
 * Layout: the sandbox, the relay and the floor each run in their own child
 * process (this file is also the children's script), and autocannon in
 * this one; so the load generator does not share an event loop with what
 * it measures, and neither server shares one with the sandbox. Only one of
 * relay and floor is under load at a time; the other sits idle.
 *
 * Both are checked once before any timing: 200 and the same decrypted body,
 * which must hold the sandbox person's plaintext, and 401 without an
 * Authorization header. During the runs autocannon compares every body
 * with the verified one (expectBody), and any error, time-out, non-2xx
 * answer or mismatch fails the benchmark: it must never time an error path.
 *
 * Rounds alternate (relay, floor; floor, relay; ...) after one short
 * warm-up run of each. Each round gives requests/s (autocannon's mean of
 * its per-second samples) and p99 latency, the latter computed here from
 * every response's time as a float (autocannon's own histogram keeps whole
 * milliseconds, too coarse at a few ms). A row's value is the median over
 * rounds. The notes add the CPU time the server process spent per request
 * (user + system, from process.cpuUsage() in the child): throughput and
 * latency move with whatever else the machine is doing, CPU per request
 * much less, so it says whether a miss is the relay's own cost or noise.
 *
 * Settings from the environment: BENCH_RELAY_SECONDS (per run, default 5),
 * BENCH_RELAY_ROUNDS (default 3), BENCH_RELAY_CONNECTIONS (default 10).
 */
import { deepStrictEqual } from 'node:assert';
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { benchServe, closeRoles, envNumber, median, quantile } from './lib.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const dist = (path) => import(pathToFileURL(join(ROOT, 'dist', path)).href);

const PREFIX = '/api-partner/v1/miniapp/user/oauth2';
const ME = '/api/auth/me';
const USER_KEY = 1001;
/** Set in the environment of the children this file forks of itself. */
const CHILD_FLAG = 'MINIAPP_RELAY_BENCH_CHILD';

// ---------------------------------------------------------------- children

/** The partner-API sandbox, with one logged-in user whose access token it hands back. */
async function startSandbox({ key, aad }) {
  const { buildSandbox } = await dist('sandbox/server.js');
  const sandbox = await buildSandbox({ key: Buffer.from(key, 'hex'), aad: Buffer.from(aad, 'hex') });
  await sandbox.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = sandbox.app.server.address();
  const { authorizationCode } = sandbox.state.login(USER_KEY);
  const { accessToken } = sandbox.state.generateToken(authorizationCode, 'sandbox');
  return { info: { url: `http://127.0.0.1:${port}`, accessToken }, close: () => sandbox.app.close() };
}

/** The real relay, as `miniapp serve` starts it, in front of the sandbox. */
async function startRelay({ key, aad, sandboxUrl }) {
  const running = await benchServe({
    store: { kind: 'memory' },
    upstream: { baseUrl: sandboxUrl, pathPrefix: PREFIX, tls: {} },
    decrypt: { key, aad },
  });
  return { info: { url: running.url }, close: () => running.close() };
}

/**
 * The floor: what a minimal hand-written relay does for GET /api/auth/me,
 * and nothing else. The Bearer check, one GET of login-me through a Pool
 * with the relay's time-outs and response bound, the envelope, the same
 * decryptUserInfo, a JSON answer.
 */
async function startFloor({ key, aad, sandboxUrl }) {
  const { Pool } = await import('undici');
  const { decryptUserInfo } = await dist('login/user-info.js');
  const keyBytes = Buffer.from(key, 'hex');
  const aadBytes = Buffer.from(aad, 'hex');
  const pool = new Pool(sandboxUrl, { headersTimeout: 10_000, bodyTimeout: 10_000, maxResponseSize: 1024 * 1024 });

  const send = (res, status, body, headers = {}) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
    res.end(text);
  };

  const server = createServer(async (req, res) => {
    try {
      if (req.method !== 'GET' || req.url !== ME) return send(res, 404, { code: 'NOT_FOUND' });
      const header = req.headers.authorization;
      const token = header?.startsWith('Bearer ') ? header.slice(7).trim() : '';
      if (!token) return send(res, 401, { code: 'UNAUTHORIZED' }, { 'www-authenticate': 'Bearer' });
      const upstream = await pool.request({
        method: 'GET',
        path: `${PREFIX}/login-me`,
        headers: { accept: 'application/json', authorization: `Bearer ${token}` },
      });
      const envelope = JSON.parse(await upstream.body.text());
      if (upstream.statusCode !== 200 || envelope?.resultType !== 'SUCCESS') {
        return send(res, upstream.statusCode === 401 ? 401 : 502, { code: 'UPSTREAM', status: upstream.statusCode });
      }
      const outcome = decryptUserInfo(envelope.success, keyBytes, aadBytes);
      if (outcome.failed.length > 0) return send(res, 500, { code: 'DECRYPT_FAILED' });
      send(res, 200, outcome.user);
    } catch {
      if (!res.headersSent) send(res, 502, { code: 'UPSTREAM' });
    }
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();
  return {
    info: { url: `http://127.0.0.1:${port}` },
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await pool.close();
    },
  };
}

const ROLES = { sandbox: startSandbox, relay: startRelay, floor: startFloor };

/**
 * Child side: the first message names the role and its settings; answers
 * { ready, info } (or { error }), { cpu } on 'cpu', and { closed } on
 * 'close', after which the process ends by itself. Losing the parent ends it.
 */
function childMain() {
  let running;
  process.on('disconnect', () => process.exit(0));
  process.on('message', async (message) => {
    if (message === 'cpu') {
      process.send({ cpu: process.cpuUsage() });
    } else if (message === 'close') {
      let error;
      try {
        await running?.close();
      } catch (caught) {
        error = caught.stack ?? String(caught);
      }
      process.send({ closed: true, error }, () => process.disconnect());
    } else if (message?.role && !running) {
      try {
        running = await ROLES[message.role](message);
        process.send({ ready: true, info: running.info });
      } catch (error) {
        process.send({ error: error.stack ?? String(error) });
      }
    }
  });
}

if (process.env[CHILD_FLAG] === '1' && process.send) childMain();

// ---------------------------------------------------------------- parent

/** Answers of a child, one kind at a time: resolves with the next message that has `field`. */
function nextMessage(child, field) {
  return new Promise((resolve) => {
    const listener = (message) => {
      if (message?.[field] === undefined) return;
      child.off('message', listener);
      resolve(message);
    };
    child.on('message', listener);
  });
}

/** Starts one role in a child process; `ready` resolves with its info once it listens. */
function spawnRole(role, data) {
  const child = fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, [CHILD_FLAG]: '1' },
    execArgv: [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exit = new Promise((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  let exited = false;
  void exit.then(() => {
    exited = true;
  });
  const ready = new Promise((resolve, reject) => {
    child.on('message', (message) => {
      if (message?.ready) resolve(message.info);
      else if (message?.error && !message.closed) reject(new Error(`${role} did not start:\n${message.error}`));
    });
    // `on`, not `once`: a later 'error' (a send to a process that just ended) must not be unhandled.
    child.on('error', (error) => reject(new Error(`${role} process failed: ${error.message}`)));
    void exit.then((status) => reject(new Error(`${role} process ended (${status}) before it was ready`)));
  });
  // Awaited by the caller in turn; until then a failure must not count as unhandled.
  ready.catch(() => {});
  child.send({ role, ...data });

  /** Microseconds of CPU (user + system) the child has used so far. */
  const cpu = async () => {
    const answer = nextMessage(child, 'cpu');
    child.send('cpu');
    const message = await Promise.race([answer, exit]);
    if (!message?.cpu) throw new Error(`${role} process ended (${message}) during the benchmark`);
    return message.cpu.user + message.cpu.system;
  };

  const close = async () => {
    if (exited) return;
    const wait = (ms) => new Promise((resolve) => setTimeout(() => resolve('waiting'), ms).unref());
    const closed = nextMessage(child, 'closed');
    child.send('close');
    const outcome = await Promise.race([closed, exit, wait(5000)]);
    // A clean close ends the process by itself; a kill is the fallback.
    if ((await Promise.race([exit, wait(2000)])) === 'waiting') {
      child.kill();
      await exit;
    }
    if (outcome?.error) throw new Error(`${role} did not close cleanly:\n${outcome.error}`);
  };
  return { ready, cpu, close };
}

/** GET /api/auth/me once; returns the body text, or throws unless 200 with JSON. */
async function fetchMe(name, url, token) {
  const response = await fetch(`${url}${ME}`, { headers: { authorization: `Bearer ${token}` } });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${name}: GET ${url}${ME} answered ${response.status}: ${text.slice(0, 300)}`);
  JSON.parse(text);
  return text;
}

/** Both sides answer 200 with the same decrypted user, who is the sandbox's person in plaintext. */
async function verify(sides, token) {
  const { personFor } = await dist('sandbox/partner/people.js');
  const person = personFor(USER_KEY);
  const bodies = {};
  for (const [name, url] of Object.entries(sides)) {
    const text = await fetchMe(name, url, token);
    const user = JSON.parse(text);
    if (user.userKey !== USER_KEY) throw new Error(`${name} answered userKey ${JSON.stringify(user.userKey)}, expected ${USER_KEY}`);
    for (const [field, expected] of Object.entries(person)) {
      if (user[field] !== expected) {
        throw new Error(`${name} answered ${field} = ${JSON.stringify(user[field])}, expected the plaintext ${JSON.stringify(expected)}`);
      }
    }
    // Without a 401 on a missing header, a side could be answering anything.
    const anonymous = await fetch(`${url}${ME}`);
    await anonymous.arrayBuffer();
    if (anonymous.status !== 401) throw new Error(`${name} answered ${anonymous.status} without an Authorization header, expected 401`);
    bodies[name] = { text, user };
  }
  const [first, ...rest] = Object.entries(bodies);
  for (const [name, body] of rest) {
    try {
      deepStrictEqual(body.user, first[1].user);
    } catch {
      throw new Error(`${name} and ${first[0]} answered different bodies:\n${body.text}\n${first[1].text}`);
    }
  }
  return bodies;
}

/**
 * One autocannon run against `side`; resolves with { rps, p99, p50, total,
 * cpuPerRequest } and throws on any error, time-out, non-2xx answer or
 * body mismatch.
 */
async function load(autocannon, { side, url, token, seconds, connections, expectBody, label }) {
  const times = [];
  const cpuBefore = await side.cpu();
  const instance = autocannon({
    url: `${url}${ME}`,
    connections,
    pipelining: 1,
    duration: seconds,
    headers: { authorization: `Bearer ${token}` },
    expectBody,
  });
  instance.on('response', (_client, statusCode, _bytes, responseTime) => {
    if (statusCode >= 200 && statusCode < 300) times.push(responseTime);
  });
  const result = await instance;
  const cpuAfter = await side.cpu();
  const failed = { errors: result.errors, timeouts: result.timeouts, non2xx: result.non2xx, mismatches: result.mismatches };
  if (Object.values(failed).some((count) => count > 0) || times.length === 0) {
    const counts = Object.entries(failed)
      .map(([name, count]) => `${name} ${count}`)
      .join(', ');
    throw new Error(
      `${label}: the run was not all 2xx with the verified body (${counts}; status codes ${JSON.stringify(result.statusCodeStats)}; ${times.length} 2xx responses)`,
    );
  }
  times.sort((x, y) => x - y);
  return {
    rps: result.requests.mean,
    p99: quantile(times, 0.99),
    p50: quantile(times, 0.5),
    total: times.length,
    cpuPerRequest: (cpuAfter - cpuBefore) / times.length,
  };
}

export default async function relay(ctx) {
  const seconds = envNumber('BENCH_RELAY_SECONDS', 5);
  const rounds = envNumber('BENCH_RELAY_ROUNDS', 3);
  const connections = envNumber('BENCH_RELAY_CONNECTIONS', 10);
  const warmupSeconds = Math.min(2, seconds);
  const { default: autocannon } = await import('autocannon');

  const key = randomBytes(32).toString('hex');
  const aad = randomBytes(16).toString('hex');
  const roles = [];
  try {
    const sandbox = spawnRole('sandbox', { key, aad });
    roles.push(sandbox);
    const { url: sandboxUrl, accessToken: token } = await sandbox.ready;

    const relaySide = spawnRole('relay', { key, aad, sandboxUrl });
    roles.push(relaySide);
    const floorSide = spawnRole('floor', { key, aad, sandboxUrl });
    roles.push(floorSide);
    const sides = { relay: relaySide, floor: floorSide };
    const urls = { relay: (await relaySide.ready).url, floor: (await floorSide.ready).url };

    const bodies = await verify(urls, token);
    // Both sides serialize the same object the same way; if not, each is held to its own verified text.
    const settings = { token, seconds, connections };
    ctx.log(`sandbox ${sandboxUrl}, relay ${urls.relay}, floor ${urls.floor}; ${connections} connections, ${seconds} s a run, ${rounds} rounds`);

    for (const name of ['relay', 'floor']) {
      ctx.log(`warm-up ${name} (${warmupSeconds} s)`);
      await load(autocannon, {
        ...settings,
        seconds: warmupSeconds,
        side: sides[name],
        url: urls[name],
        expectBody: bodies[name].text,
        label: `${name} warm-up`,
      });
    }

    const results = { relay: [], floor: [] };
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? ['relay', 'floor'] : ['floor', 'relay'];
      for (const name of order) {
        const run = await load(autocannon, {
          ...settings,
          side: sides[name],
          url: urls[name],
          expectBody: bodies[name].text,
          label: `${name} round ${round + 1}`,
        });
        results[name].push(run);
        ctx.log(
          `round ${round + 1} ${name}: ${run.rps.toFixed(0)} req/s, p50 ${run.p50.toFixed(2)} ms, p99 ${run.p99.toFixed(2)} ms, ` +
            `${run.cpuPerRequest.toFixed(0)} us CPU/request (${run.total} requests)`,
        );
      }
    }

    const summary = (name, field) => median(results[name].map((run) => run[field]));
    const list = (name, field, digits) => results[name].map((run) => run[field].toFixed(digits)).join(', ');
    const setup =
      `autocannon ${connections} connections, pipelining 1, ${seconds} s x ${rounds} rounds alternating, median of rounds; ` +
      `load generator, relay/floor and sandbox in separate processes sharing ${cpus().length} cores, so all three compete for CPU`;
    const cpu = { relay: summary('relay', 'cpuPerRequest'), floor: summary('floor', 'cpuPerRequest') };
    const cpuNote = `server CPU/request relay ${cpu.relay.toFixed(0)} us, floor ${cpu.floor.toFixed(0)} us (${(cpu.relay / cpu.floor).toFixed(2)}x)`;
    const rps = { relay: summary('relay', 'rps'), floor: summary('floor', 'rps') };
    const p99 = { relay: summary('relay', 'p99'), floor: summary('floor', 'p99') };
    return [
      {
        name: 'relay GET /api/auth/me throughput',
        value: rps.relay,
        unit: 'req/s',
        floorName: 'node:http + undici Pool relay',
        floorValue: rps.floor,
        ratio: rps.relay / rps.floor,
        target: 0.8,
        better: 'higher',
        note: `rounds: relay ${list('relay', 'rps', 0)} req/s; floor ${list('floor', 'rps', 0)} req/s; ${cpuNote}; ${setup}`,
      },
      {
        name: 'relay GET /api/auth/me p99 latency',
        value: p99.relay,
        unit: 'ms',
        floorName: 'node:http + undici Pool relay',
        floorValue: p99.floor,
        ratio: p99.relay / p99.floor,
        target: 1.25,
        better: 'lower',
        note: `rounds: relay ${list('relay', 'p99', 2)} ms; floor ${list('floor', 'p99', 2)} ms (p50 relay ${summary('relay', 'p50').toFixed(2)}, floor ${summary('floor', 'p50').toFixed(2)} ms); same setup`,
      },
    ];
  } finally {
    await closeRoles(roles, ctx.log);
  }
}
