/**
 * GET /metrics of a real `serve` (HTTP and gRPC on 127.0.0.1:0, the
 * embedded sandbox as upstream, webhook receivers on 127.0.0.1) after relay,
 * blog, gRPC and webhook traffic: every family with its labels and exact
 * counts, promlint (promtool's rules) silent on the scrape, OpenMetrics for
 * a scraper that asks for it, the name prefix, and what the CLI never loads.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { readTrace } from '../helpers/launcher.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { createMetrics } from '../../src/server/metrics.js';
import { userServiceDefinition } from '../../src/users/proto.js';
import { startTestServe } from '../helpers/serve.js';
import { startSandbox, type RunningSandbox } from '../helpers/partner-sandbox.js';
import { checkMetrics, parseText, type Family } from '../helpers/promlint.js';
import { Sandbox } from '../helpers/cli.js';
import { AAD_HEX, KEY_HEX } from '../helpers/vectors.js';

const PROMETHEUS_ACCEPT =
  'application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1';
const OPENMETRICS_TYPE = 'application/openmetrics-text; version=1.0.0; charset=utf-8';
const TEXT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

type AnyClient = grpc.Client & Record<string, any>;

async function scrape(url: string, accept?: string): Promise<{ type: string; vary: string; text: string }> {
  const response = await request(`${url}/metrics`, { headers: accept ? { accept } : {} });
  return { type: String(response.headers['content-type']), vary: String(response.headers.vary), text: await response.body.text() };
}

async function call(url: string, method: 'GET' | 'POST', path: string, options: { json?: unknown; token?: string } = {}) {
  const response = await request(`${url}${path}`, {
    method,
    headers: {
      ...(options.json !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
    },
    body: options.json !== undefined ? JSON.stringify(options.json) : undefined,
  });
  const text = await response.body.text();
  return { status: response.statusCode, body: text ? (JSON.parse(text) as any) : undefined };
}

/** `k=v,...` with the keys sorted: one series of a family, whatever order the labels were written in. */
function key(labels: Record<string, string>, without = ''): string {
  return Object.entries(labels)
    .filter(([name]) => name !== without)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([name, value]) => `${name}=${value}`)
    .join(',');
}

function family(families: Family[], name: string): Family {
  const found = families.find((f) => f.name === name);
  if (!found) throw new Error(`no family ${name} in the scrape`);
  return found;
}

/** A counter's or gauge's series: labels to value (none for a family without samples, which the parser drops). */
function values(families: Family[], name: string): Record<string, number> {
  return Object.fromEntries((families.find((f) => f.name === name)?.samples ?? []).map((s) => [key(s.labels), s.value]));
}

/** A histogram's observation counts by series, after checking that each series' buckets are whole. */
function counts(families: Family[], name: string): Record<string, number> {
  const f = family(families, name);
  expect(f.type).toBe('histogram');
  const out: Record<string, number> = {};
  for (const sample of f.samples.filter((s) => s.name === `${name}_count`)) {
    const series = key(sample.labels);
    const buckets = f.samples.filter((s) => s.name === `${name}_bucket` && key(s.labels, 'le') === series);
    expect(buckets.at(-1)!.labels.le).toBe('+Inf');
    expect(buckets.at(-1)!.value).toBe(sample.value);
    expect(buckets.every((b, i) => i === 0 || b.value >= buckets[i - 1]!.value)).toBe(true);
    const sum = f.samples.find((s) => s.name === `${name}_sum` && key(s.labels) === series)!;
    expect(sum.value).toBeGreaterThanOrEqual(0);
    out[series] = sample.value;
  }
  return out;
}

function unary(c: AnyClient, method: string, req: unknown, metadata = new grpc.Metadata()): Promise<any> {
  return new Promise((resolve, reject) => c[method](req, metadata, (error: grpc.ServiceError | null, res: unknown) => (error ? reject(error) : resolve(res))));
}

async function codeOf(promise: Promise<unknown>): Promise<string> {
  return promise.then(
    () => 'OK',
    (error: grpc.ServiceError) => grpc.status[error.code]!,
  );
}

async function receiver(status: number): Promise<{ server: Server; url: string; hits: number[] }> {
  const hits: number[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      hits.push(status);
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`, hits };
}

async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`gave up waiting for ${what}`);
}

const closeServer = (server: Server) => new Promise<void>((resolve) => server.close(() => resolve()));

describe('GET /metrics after relay, blog, gRPC and webhook traffic', () => {
  let running: RunningServe;
  let receivers: { server: Server }[] = [];
  let client: AnyClient;
  let listed = 0;

  beforeAll(async () => {
    const ok = await receiver(204);
    const failing = await receiver(500);
    receivers = [ok, failing];
    running = await startTestServe({
      grpc: { host: '127.0.0.1', port: 0 },
      webhooks: { urls: [ok.url, failing.url], secret: 'whsec-metrics-test' },
      shutdownDeadlineMs: 500,
    });
    const url = running.url;

    // Relay, with the embedded sandbox as the partner API.
    const login = await request(`${running.sandbox!.url}/__sandbox/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userKey: 1001 }),
    });
    const { authorizationCode } = (await login.body.json()) as { authorizationCode: string };
    const tokens = await call(url, 'POST', '/api/auth/token', { json: { authorizationCode, referrer: 'sandbox' } });
    expect(tokens.status).toBe(200);
    expect((await call(url, 'POST', '/api/auth/token', { json: { authorizationCode, referrer: 'sandbox' } })).status).toBe(400);
    expect((await call(url, 'GET', '/api/auth/me', { token: tokens.body.accessToken })).status).toBe(200);
    const refreshed = await call(url, 'POST', '/api/auth/refresh', { json: { refreshToken: tokens.body.refreshToken } });
    expect(refreshed.status).toBe(200);
    expect((await call(url, 'POST', '/api/auth/logout', { token: refreshed.body.accessToken })).status).toBe(200);

    // Blog (the post sends post.created to both receivers).
    const post = await call(url, 'POST', '/api/v2/blog/posts', { json: { title: 'Metrics', content: 'Counted' }, token: running.adminToken });
    expect(post.status).toBe(201);
    expect((await call(url, 'GET', '/api/v2/blog/posts')).status).toBe(200);
    expect((await call(url, 'GET', `/api/v2/blog/posts/${post.body.id}`)).status).toBe(200);
    expect((await call(url, 'GET', '/api/v2/blog/posts/999')).status).toBe(404);
    expect((await call(url, 'GET', '/api/v1/blog/posts')).status).toBe(200);
    expect((await call(url, 'GET', '/health')).status).toBe(200);
    // Paths no route matches share one series.
    expect((await call(url, 'GET', '/wp-login.php')).status).toBe(404);
    expect((await call(url, 'GET', '/api/v2/nothing/here/42')).status).toBe(404);

    // gRPC: unary ok and failing, a client stream, a server stream.
    const { Client } = userServiceDefinition();
    client = new Client(running.grpc!.address, grpc.credentials.createInsecure()) as AnyClient;
    const admin = new grpc.Metadata();
    admin.set('authorization', `Bearer ${running.adminToken}`);
    expect(await codeOf(unary(client, 'CreateUser', { username: 'metered', email: 'metered@example.com', password: 'correct horse' }))).toBe('OK');
    expect(await codeOf(unary(client, 'GetUser', { user_id: '42' }, admin))).toBe('NOT_FOUND');
    expect(await codeOf(unary(client, 'GetUser', { user_id: '1' }))).toBe('UNAUTHENTICATED');
    const bulk = await new Promise<any>((resolve, reject) => {
      const stream = client.BulkCreateUsers(admin, (error: grpc.ServiceError | null, res: unknown) => (error ? reject(error) : resolve(res)));
      for (const n of [1, 2]) stream.write({ username: `bulk${n}`, email: `bulk${n}@example.com`, password: 'correct horse' });
      stream.end();
    });
    expect(bulk.created_count).toBe(2);
    listed = await new Promise<number>((resolve, reject) => {
      let n = 0;
      const stream = client.ListUsers({ page: 0, page_size: 0 }, admin);
      stream.on('data', () => n++);
      stream.on('end', () => resolve(n));
      stream.on('error', reject);
    });
    expect(listed).toBeGreaterThanOrEqual(3);

    await until(async () => (await running.webhooks!.outbox.list()).every((delivery) => delivery.attemptCount === 1), 'one attempt at each webhook delivery');
  });

  afterAll(async () => {
    client?.close();
    await running?.close();
    for (const r of receivers) await closeServer(r.server);
  });

  it('has every family with the right labels and exact counts, and promtool has nothing to say', async () => {
    const { type, vary, text } = await scrape(running.url);
    expect(type).toBe(TEXT_TYPE);
    expect(vary).toBe('Accept');
    expect(checkMetrics(text)).toEqual([]);
    const families = parseText(text);
    // promtool lints only families with samples: after this traffic, that is every family but
    // prom-client's per-type gauges of libuv handles, requests and resources, empty when none is active,
    // its GC histogram, empty until a garbage collection is observed after serve started (in a test worker
    // that has run other files, the next one may come after this scrape), and the commerce families with
    // labels, empty before any payment (test/commerce/checkout.test.ts lints them after commerce traffic).
    const declared = [...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!);
    const linted = new Set(families.map((f) => f.name));
    expect(
      declared.filter(
        (name) =>
          !linted.has(name) &&
          !/^miniapp_(nodejs_active_(handles|requests|resources)|nodejs_gc_duration_seconds|payments_total|payment_amount_total|refund_amount_total)$/.test(
            name,
          ),
      ),
      'families declared with no sample',
    ).toEqual([]);
    expect(declared.filter((name) => !name.startsWith('miniapp_'))).toEqual([]);

    const http = {
      'method=POST,route=/api/auth/token,status=200': 1,
      'method=POST,route=/api/auth/token,status=400': 1,
      'method=GET,route=/api/auth/me,status=200': 1,
      'method=POST,route=/api/auth/refresh,status=200': 1,
      'method=POST,route=/api/auth/logout,status=200': 1,
      'method=POST,route=/api/v2/blog/posts,status=201': 1,
      'method=GET,route=/api/v2/blog/posts,status=200': 1,
      'method=GET,route=/api/v2/blog/posts/:post_id,status=200': 1,
      'method=GET,route=/api/v2/blog/posts/:post_id,status=404': 1,
      'method=GET,route=/api/v1/blog/posts,status=200': 1,
      'method=GET,route=/health,status=200': 1,
      'method=GET,route=(unmatched),status=404': 2,
    };
    expect(values(families, 'miniapp_http_requests_total')).toEqual(http);
    expect(counts(families, 'miniapp_http_request_duration_seconds')).toEqual(http);
    // The scrape itself is the one request in flight.
    expect(values(families, 'miniapp_http_requests_in_flight')).toEqual({ '': 1 });

    expect(values(families, 'miniapp_upstream_requests_total')).toEqual({
      'endpoint=generate-token,outcome=ok': 1,
      'endpoint=generate-token,outcome=api_error': 1,
      'endpoint=login-me,outcome=ok': 1,
      'endpoint=refresh-token,outcome=ok': 1,
      'endpoint=remove-by-access-token,outcome=ok': 1,
    });
    expect(counts(families, 'miniapp_upstream_request_duration_seconds')).toEqual({
      'endpoint=generate-token': 2,
      'endpoint=login-me': 1,
      'endpoint=refresh-token': 1,
      'endpoint=remove-by-access-token': 1,
    });

    const rpc = (type: string, method: string) => `grpc_method=${method},grpc_service=user.v1.UserService,grpc_type=${type}`;
    expect(values(families, 'miniapp_grpc_server_started_total')).toEqual({
      [rpc('unary', 'CreateUser')]: 1,
      [rpc('unary', 'GetUser')]: 2,
      [rpc('client_stream', 'BulkCreateUsers')]: 1,
      [rpc('server_stream', 'ListUsers')]: 1,
    });
    expect(values(families, 'miniapp_grpc_server_handled_total')).toEqual({
      [`grpc_code=OK,${rpc('unary', 'CreateUser')}`]: 1,
      [`grpc_code=NotFound,${rpc('unary', 'GetUser')}`]: 1,
      [`grpc_code=Unauthenticated,${rpc('unary', 'GetUser')}`]: 1,
      [`grpc_code=OK,${rpc('client_stream', 'BulkCreateUsers')}`]: 1,
      [`grpc_code=OK,${rpc('server_stream', 'ListUsers')}`]: 1,
    });
    expect(values(families, 'miniapp_grpc_server_msg_received_total')).toEqual({
      [rpc('unary', 'CreateUser')]: 1,
      [rpc('unary', 'GetUser')]: 2,
      [rpc('client_stream', 'BulkCreateUsers')]: 2,
      [rpc('server_stream', 'ListUsers')]: 1,
    });
    // A failed unary call sends no message.
    expect(values(families, 'miniapp_grpc_server_msg_sent_total')).toEqual({
      [rpc('unary', 'CreateUser')]: 1,
      [rpc('client_stream', 'BulkCreateUsers')]: 1,
      [rpc('server_stream', 'ListUsers')]: listed,
    });
    expect(counts(families, 'miniapp_grpc_server_handling_seconds')).toEqual({
      [rpc('unary', 'CreateUser')]: 1,
      [rpc('unary', 'GetUser')]: 2,
      [rpc('client_stream', 'BulkCreateUsers')]: 1,
      [rpc('server_stream', 'ListUsers')]: 1,
    });
    expect(values(families, 'miniapp_grpc_requests_total')).toEqual({
      'method=user.v1.UserService/CreateUser,status=OK': 1,
      'method=user.v1.UserService/GetUser,status=NOT_FOUND': 1,
      'method=user.v1.UserService/GetUser,status=UNAUTHENTICATED': 1,
      'method=user.v1.UserService/BulkCreateUsers,status=OK': 1,
      'method=user.v1.UserService/ListUsers,status=OK': 1,
    });
    expect(counts(families, 'miniapp_grpc_request_duration_seconds')).toEqual({
      'method=user.v1.UserService/CreateUser': 1,
      'method=user.v1.UserService/GetUser': 2,
      'method=user.v1.UserService/BulkCreateUsers': 1,
      'method=user.v1.UserService/ListUsers': 1,
    });

    expect(values(families, 'miniapp_webhook_attempts_total')).toEqual({
      'event=post.created,outcome=delivered': 1,
      'event=post.created,outcome=retry_scheduled': 1,
    });
    expect(counts(families, 'miniapp_webhook_attempt_duration_seconds')).toEqual({ 'event=post.created': 2 });
    expect(values(families, 'miniapp_webhook_deliveries_pending')).toEqual({ '': 1 });

    // Process and Node.js metrics, with the prefix; the three gauges once named _total, renamed.
    expect(family(families, 'miniapp_process_cpu_seconds_total').type).toBe('counter');
    for (const name of ['handles', 'requests', 'resources']) {
      expect(family(families, `miniapp_nodejs_active_${name}_all`).type).toBe('gauge');
      expect(text).not.toContain(`miniapp_nodejs_active_${name}_total`);
    }
  });

  it('answers OpenMetrics from the same metrics to a scraper that asks for it, and the text format to others', async () => {
    const before = (await scrape(running.url)).text;
    const open = await scrape(running.url, PROMETHEUS_ACCEPT);
    expect(open.type).toBe(OPENMETRICS_TYPE);
    expect(open.vary).toBe('Accept');
    expect(open.text.endsWith('\n# EOF\n')).toBe(true);
    expect(open.text.match(/^# EOF$/gm)).toHaveLength(1);

    // Counter families drop _total in OpenMetrics; their samples keep it.
    const types = Object.fromEntries([...open.text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1], m[2]]));
    const expected = Object.fromEntries(
      [...before.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(([, name, type]) => [type === 'counter' ? name!.replace(/_total$/, '') : name, type]),
    );
    expect(types).toEqual(expected);
    for (const [name, value] of [
      ['miniapp_grpc_requests_total{method="user.v1.UserService/GetUser",status="NOT_FOUND"}', 1],
      ['miniapp_upstream_requests_total{endpoint="generate-token",outcome="api_error"}', 1],
      ['miniapp_webhook_attempts_total{event="post.created",outcome="delivered"}', 1],
      ['miniapp_http_requests_total{method="GET",route="(unmatched)",status="404"}', 2],
    ] as const) {
      expect(open.text).toContain(`\n${name} ${value}\n`);
    }
    expect(open.text).toMatch(
      /\nminiapp_grpc_server_handling_seconds_bucket\{le="\+Inf",grpc_type="unary",grpc_service="user\.v1\.UserService",grpc_method="GetUser"\} 2\n/,
    );

    // The text format again afterwards, counters still named _total: OpenMetrics left the metric objects alone.
    const after = await scrape(running.url, 'text/plain;version=0.0.4;q=0.5,*/*;q=0.1');
    expect(after.type).toBe(TEXT_TYPE);
    expect(after.text).toContain('\nminiapp_grpc_requests_total{method="user.v1.UserService/GetUser",status="NOT_FOUND"} 1\n');
    expect(checkMetrics(after.text)).toEqual([]);
    for (const accept of ['*/*', 'text/plain', 'application/openmetrics-text;q=0.2,text/plain;q=0.9', 'application/json']) {
      expect((await scrape(running.url, accept)).type, accept).toBe(TEXT_TYPE);
    }
    expect((await scrape(running.url, 'application/openmetrics-text')).type).toBe(OPENMETRICS_TYPE);
  });
});

describe('HTTP request metrics', () => {
  let running: RunningServe | undefined;
  let slow: RunningSandbox | undefined;
  afterEach(async () => {
    await running?.close();
    await slow?.close();
    running = slow = undefined;
  });

  it('counts a request whose client leaves before the answer once, as 499, and lets go of it in flight', async () => {
    slow = await startSandbox({ delayMs: 1000 });
    running = await startTestServe({
      upstream: { baseUrl: slow.url, pathPrefix: '/api-partner/v1/miniapp/user/oauth2', tls: {} },
      decrypt: { key: KEY_HEX, aad: AAD_HEX },
    });
    const url = running.url;
    const inFlight = async () => values(parseText((await scrape(url)).text), 'miniapp_http_requests_in_flight')[''];
    const abort = new AbortController();
    const leaving = request(`${url}/api/auth/refresh`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ refreshToken: 'r' }),
      signal: abort.signal,
    }).catch((error: Error) => error.name);
    await until(async () => (await inFlight()) === 2, 'the refresh to be in flight beside the scrape');
    abort.abort();
    expect(await leaving).toBe('AbortError');
    await until(async () => (await inFlight()) === 1, 'the aborted refresh to leave the in-flight gauge');
    // Once the slow upstream has answered, the handler's late reply is not counted again.
    const refreshes = async () => {
      const families = parseText((await scrape(url)).text);
      const upstream = values(families, 'miniapp_upstream_requests_total');
      return { upstream, http: Object.entries(values(families, 'miniapp_http_requests_total')).filter(([series]) => series.includes('refresh')) };
    };
    await until(async () => Object.keys((await refreshes()).upstream).length === 1, 'the slow upstream to answer');
    expect((await refreshes()).http).toEqual([['method=POST,route=/api/auth/refresh,status=499', 1]]);
  });
});

describe('--metrics-prefix', () => {
  let running: RunningServe | undefined;
  afterEach(async () => {
    await running?.close();
    running = undefined;
  });

  it('names every series with the prefix; an empty one gives the bare names of the spec and go-grpc-prometheus', async () => {
    running = await startTestServe({ metricsPrefix: '', grpc: { host: '127.0.0.1', port: 0 }, shutdownDeadlineMs: 500 });
    const { Client } = userServiceDefinition();
    const c = new Client(running.grpc!.address, grpc.credentials.createInsecure()) as AnyClient;
    await unary(c, 'CreateUser', { username: 'bare', email: 'bare@example.com', password: 'correct horse' });
    // A stream the client cancels ends as Canceled (Go's spelling) / CANCELLED (the spec's).
    const admin = new grpc.Metadata();
    admin.set('authorization', `Bearer ${running.adminToken}`);
    const watch = c.WatchUserChanges({}, admin);
    watch.on('error', () => {});
    await until(() => running!.users.watcherCount() === 1, 'the watch to start');
    watch.cancel();
    const watchEnded =
      '\ngrpc_server_handled_total{grpc_type="server_stream",grpc_service="user.v1.UserService",grpc_method="WatchUserChanges",grpc_code="Canceled"} 1\n';
    await until(async () => (await scrape(running!.url)).text.includes(watchEnded), 'the cancelled watch to be counted');
    c.close();
    const bare = (await scrape(running.url)).text;
    expect(bare).toContain('\ngrpc_requests_total{method="user.v1.UserService/WatchUserChanges",status="CANCELLED"} 1\n');
    expect(bare).toContain('\ngrpc_requests_total{method="user.v1.UserService/CreateUser",status="OK"} 1\n');
    expect(bare).toContain('\ngrpc_server_handled_total{grpc_type="unary",grpc_service="user.v1.UserService",grpc_method="CreateUser",grpc_code="OK"} 1\n');
    for (const name of [
      'grpc_request_duration_seconds histogram',
      'grpc_server_handling_seconds histogram',
      'http_requests_total counter',
      'process_cpu_seconds_total counter',
    ]) {
      expect(bare).toContain(`\n# TYPE ${name}\n`);
    }
    expect(bare).not.toContain('miniapp_');
    expect(checkMetrics(bare)).toEqual([]);
    await running.close();

    running = await startTestServe({ metricsPrefix: 'shop_' });
    const shop = (await scrape(running.url)).text;
    const declared = [...shop.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!);
    expect(declared.length).toBeGreaterThan(20);
    expect(declared.filter((name) => !name.startsWith('shop_'))).toEqual([]);
  });

  it('refuses a prefix that is not a metric name with exit 2, and says so in serve --help', async () => {
    const cli = new Sandbox();
    try {
      for (const prefix of ['miniapp-', '9lives_', 'job:', '__x_', 'a b']) {
        const result = await cli.run(['serve', '--port', '0', '--no-grpc', '--store', 'memory', '--metrics-prefix', prefix]);
        expect(result.code, prefix).toBe(2);
        expect(result.stderr, prefix).toContain('--metrics-prefix');
      }
      const help = await cli.run(['serve', '--help']);
      expect(help.stdout).toMatch(/--metrics-prefix <prefix>\s+name prefix of every \/metrics series/);
      expect(help.stdout).toContain('(default: "miniapp_")');
    } finally {
      cli.dispose();
    }
  });
});

describe('the CLI', () => {
  const root = fileURLToPath(new URL('../..', import.meta.url));

  it('refuses a bad --metrics-prefix before serve loads prom-client or any server', () => {
    const home = mkdtempSync(join(tmpdir(), 'miniapp-metrics-cli-'));
    try {
      const trace = join(home, 'trace.txt');
      const result = spawnSync(
        process.execPath,
        [
          '--import',
          join(root, 'test', 'fixtures', 'trace-loads.mjs'),
          join(root, 'bin', 'miniapp.cjs'),
          'serve',
          '--store',
          'memory',
          '--metrics-prefix',
          'bad-',
        ],
        { encoding: 'utf8', env: { PATH: process.env.PATH, HOME: home, MINIAPP_CONFIG_DIR: join(home, 'config'), MINIAPP_TRACE_LOADS: trace } },
      );
      expect(result.status, result.stderr).toBe(2);
      expect(result.stderr).toContain('--metrics-prefix');
      const loaded = readTrace(trace);
      expect(loaded.some((line) => line.includes('dist/cli/commands/serve.js'))).toBe(true);
      expect(loaded.filter((line) => /prom-client|fastify|dist\/server\/serve\.js/.test(line))).toEqual([]);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it('calls the partner API without loading prom-client (only serve does)', async () => {
    const home = mkdtempSync(join(tmpdir(), 'miniapp-metrics-cli-'));
    const sandbox = await startSandbox();
    try {
      const trace = join(home, 'trace.txt');
      const code = sandbox.state.login(1001).authorizationCode;
      const child = spawn(
        process.execPath,
        [
          '--import',
          join(root, 'test', 'fixtures', 'trace-loads.mjs'),
          join(root, 'bin', 'miniapp.cjs'),
          'token',
          'exchange',
          '--code',
          code,
          '--referrer',
          'sandbox',
          '--json',
        ],
        {
          env: { PATH: process.env.PATH, HOME: home, MINIAPP_CONFIG_DIR: join(home, 'config'), MINIAPP_TRACE_LOADS: trace, ...sandbox.env },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let stderr = '';
      child.stderr.on('data', (chunk) => (stderr += chunk));
      const exit = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      expect(exit, stderr).toBe(0);
      const loaded = readTrace(trace);
      expect(loaded.some((line) => line.includes('dist/login/partner-client.js'))).toBe(true);
      expect(loaded.filter((line) => line.includes('prom-client'))).toEqual([]);
    } finally {
      await sandbox.close();
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe('gRPC counters counted between reads', () => {
  it('adds what an observer held since the last read once, at the next read of any of them', async () => {
    const metrics = createMetrics({ prefix: 'flush_' });
    const labels = { grpc_type: 'unary', grpc_service: 'user.v1.UserService', grpc_method: 'GetUser' };
    let held = 0;
    metrics.grpc.flushBeforeRead(() => {
      if (held) metrics.grpc.started.inc(labels, held);
      held = 0;
    });
    const started = async () => (await metrics.grpc.started.get()).values.map((v) => v.value);
    expect(await started()).toEqual([]);
    held = 3;
    expect(await started()).toEqual([3]);
    // Reading again adds nothing; a scrape flushes as well.
    expect(await started()).toEqual([3]);
    held = 2;
    expect((await metrics.scrape()).body).toContain(
      '\nflush_grpc_server_started_total{grpc_type="unary",grpc_service="user.v1.UserService",grpc_method="GetUser"} 5\n',
    );
    expect(await started()).toEqual([5]);
  });
});
