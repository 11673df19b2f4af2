/**
 * Traces of `miniapp serve`, received by a real OTLP collector
 * (test/helpers/otlp-receiver.ts) as the exporters send them, on both
 * backends: one checkout (create order, pay) sent with one `traceparent`
 * arrives as one trace whose spans nest (gRPC server spans, transactions
 * and statements, the provider's charge, the outbox), and the later
 * webhook delivery is a trace of its own linked to it, whose POST carries
 * its traceparent to the receiver; an HTTP request continues the trace of
 * its `traceparent` and calls the partner API below it; every log line of
 * a traced request carries its trace_id and span_id; and no secret (a
 * password, a token, an authorization code, a decrypted field, a query
 * value) is in anything exported.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { request } from 'undici';
import { randomBytes } from 'node:crypto';
import { startTestServe } from '../helpers/serve.js';
import { BACKENDS } from '../helpers/postgres.js';
import { CommerceClients } from '../helpers/commerce-client.js';
import { unary } from '../helpers/user-client.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { freePort } from '../helpers/embedded-postgres.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { resolveTracing } from '../../src/telemetry/config.js';
import type { RunningServe } from '../../src/server/serve.js';

const traceparentOf = () => {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, header: `00-${traceId}-${spanId}-01` };
};

/** The chain of parents from `span` up to the root, by name. */
function ancestry(spans: ReceivedSpan[], span: ReceivedSpan): string[] {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const names: string[] = [];
  for (let at = byId.get(span.parentSpanId); at; at = byId.get(at.parentSpanId)) names.push(at.name);
  return names;
}

class Lines {
  readonly lines: Record<string, any>[] = [];
  write(line: string): void {
    for (const text of line.split('\n').filter(Boolean)) this.lines.push(JSON.parse(text));
  }
}

describe.each(BACKENDS)('traces of serve on %s', (backend) => {
  let collector: OtlpReceiver;
  let hooks: WebhookReceiver;
  let running: RunningServe;
  let c: CommerceClients;
  const log = new Lines();
  const checkout = traceparentOf();
  const secrets: string[] = [];
  let closed = false;

  beforeAll(async () => {
    // Spans are sent every 100 ms rather than every 5 s (the SDK reads this when serve starts); none is lost either way.
    vi.stubEnv('OTEL_BSP_SCHEDULE_DELAY', '100');
    collector = await startOtlpReceiver();
    hooks = await startWebhookReceiver();
    running = await startTestServe(
      {
        grpc: { host: '127.0.0.1', port: 0 },
        tracing: resolveTracing({ OTEL_SERVICE_NAME: 'shop' }, { otlpEndpoint: collector.url }),
        logger: { level: 'info', stream: log },
        webhooks: { urls: [hooks.url], secret: 'webhook-secret-value' },
      },
      backend,
    );
    secrets.push(running.adminToken, 'webhook-secret-value');
    c = new CommerceClients(running);

    // One checkout, both calls in the caller's trace.
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${running.adminToken}`);
    metadata.set('traceparent', checkout.header);
    await c.call('inventory', 'SetStock', { sku: 'MUG', quantity: 3, price: 12000, has_price: true, reason: 'initial count' });
    const order = await unary(c.client('order'), 'CreateOrder', { items: [{ sku: 'MUG', quantity: 1 }], idempotency_key: 'checkout-1' }, metadata);
    await unary(c.client('order'), 'ProcessPayment', { order_id: order.id, idempotency_key: 'pay-1' }, metadata);
    await collector.waitFor(() => hooks.received.some((r) => r.headers['x-webhook-event'] === 'order.paid'));
  });
  afterAll(async () => {
    c?.close();
    if (!closed) await running?.close();
    await collector?.close();
    await hooks?.close();
  });

  it('a checkout sent with one traceparent is one trace: gRPC server spans, transactions, statements, the charge and the outbox nest', async () => {
    // The webhook's delivery span ends after the receiver answered: wait for it.
    const spans = await collector.waitFor((all) => all.some((s) => s.name === 'webhook deliver order.paid'));
    const trace = spans.filter((s) => s.traceId === checkout.traceId);
    const servers = trace.filter((s) => s.kind === 'SPAN_KIND_SERVER');
    expect(servers.map((s) => s.name).sort()).toEqual(['order.v1.OrderService/CreateOrder', 'order.v1.OrderService/ProcessPayment']);
    for (const server of servers) {
      // Children of the caller's span: the trace was continued, not restarted.
      expect(server.parentSpanId).toBe(checkout.spanId);
      expect(server.attributes).toMatchObject({ 'rpc.system': 'grpc', 'rpc.service': 'order.v1.OrderService', 'rpc.grpc.status_code': 0 });
      expect(server.resource['service.name']).toBe('shop');
    }
    const pay = servers.find((s) => s.name.endsWith('ProcessPayment'))!;
    const charge = trace.find((s) => s.name === 'payment provider charge')!;
    expect(charge.attributes).toMatchObject({ 'payment.provider': 'sandbox', 'payment.outcome': 'approved' });
    expect(ancestry(trace, charge)).toContain(pay.name);
    const outbox = trace.find((s) => s.name === 'webhook enqueue order.paid')!;
    expect(outbox.kind).toBe('SPAN_KIND_PRODUCER');
    expect(ancestry(trace, outbox)).toContain(pay.name);
    const statements = trace.filter((s) => s.attributes['db.query.text'] !== undefined);
    expect(statements.length).toBeGreaterThan(5);
    for (const statement of statements) {
      expect(statement.attributes['db.system.name']).toBe(backend === 'postgres' ? 'postgresql' : 'sqlite');
      expect(String(statement.attributes['db.query.text'])).not.toMatch(/checkout-1|pay-1|MUG/);
      expect(ancestry(trace, statement).some((name) => name.startsWith('order.v1.OrderService/'))).toBe(true);
    }
    expect(trace.find((s) => s.name === 'INSERT webhook_deliveries')).toBeDefined();
    expect(trace.some((s) => s.name === 'transaction' && s.parentSpanId === pay.spanId)).toBe(true);

    // The delivery: a trace of its own, linked to the outbox span; its POST is a client span below it, whose
    // traceparent the receiver got.
    const delivery = spans.find((s) => s.name === 'webhook deliver order.paid')!;
    expect(delivery.traceId).not.toBe(checkout.traceId);
    expect(delivery.links).toEqual([{ traceId: checkout.traceId, spanId: outbox.spanId }]);
    expect(delivery.attributes).toMatchObject({
      'messaging.destination.name': 'order.paid',
      'webhook.attempt': 1,
      'webhook.state': 'delivered',
      'server.address': '127.0.0.1',
    });
    const post = spans.find((s) => s.traceId === delivery.traceId && s.parentSpanId === delivery.spanId && s.name === 'POST')!;
    expect(post.attributes).toMatchObject({ 'http.request.method': 'POST', 'http.response.status_code': 204 });
    const received = hooks.received.find((r) => r.headers['x-webhook-event'] === 'order.paid')!;
    expect(received.headers.traceparent).toBe(`00-${delivery.traceId}-${post.spanId}-01`);
  });

  it('the gRPC call log lines of the checkout carry its trace_id and span_id', () => {
    const calls = log.lines.filter((line) => line.msg === 'grpc call' && String(line.method).startsWith('/order.v1.OrderService/'));
    expect(calls).toHaveLength(2);
    const servers = collector.spans.filter((s) => s.traceId === checkout.traceId && s.kind === 'SPAN_KIND_SERVER');
    for (const call of calls) {
      expect(call.trace_id).toBe(checkout.traceId);
      expect(servers.map((s) => s.spanId)).toContain(call.span_id);
    }
    const delivered = log.lines.find((line) => line.msg === 'webhook delivered' && line.event === 'order.paid')!;
    const delivery = collector.spans.find((s) => s.name === 'webhook deliver order.paid')!;
    expect({ trace_id: delivered.trace_id, span_id: delivered.span_id }).toEqual({ trace_id: delivery.traceId, span_id: delivery.spanId });
  });

  it('an HTTP request continues its traceparent, calls the partner API below it, and every log line of it has the ids', async () => {
    const incoming = traceparentOf();
    const login = await request(`${running.sandbox!.url}/__sandbox/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userKey: 1001 }),
    });
    const { authorizationCode } = (await login.body.json()) as { authorizationCode: string };
    const exchanged = await request(`${running.url}/api/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: incoming.header },
      body: JSON.stringify({ authorizationCode, referrer: 'sandbox' }),
    });
    expect(exchanged.statusCode).toBe(200);
    const tokens = (await exchanged.body.json()) as { accessToken: string; refreshToken: string };
    const me = await request(`${running.url}/api/auth/me?fields=secret-query-value`, { headers: { authorization: `Bearer ${tokens.accessToken}` } });
    const personal = (await me.body.json()) as Record<string, unknown>;
    secrets.push(authorizationCode, tokens.accessToken, tokens.refreshToken, 'secret-query-value');
    for (const value of Object.values((personal.data ?? personal) as Record<string, unknown>)) {
      if (typeof value === 'string' && value.length >= 6 && !/^\d{4}-\d{2}-\d{2}/.test(value)) secrets.push(value);
    }

    const isUpstream = (s: ReceivedSpan) => s.traceId === incoming.traceId && s.kind === 'SPAN_KIND_CLIENT' && s.attributes['url.full'] !== undefined;
    const spans = await collector.waitFor((all) => all.some(isUpstream));
    const server = spans.find((s) => s.traceId === incoming.traceId && s.kind === 'SPAN_KIND_SERVER')!;
    expect(server).toMatchObject({ name: 'POST /api/auth/token', parentSpanId: incoming.spanId });
    expect(server.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/api/auth/token',
      'url.path': '/api/auth/token',
      'http.response.status_code': 200,
    });
    const upstream = spans.find(isUpstream)!;
    expect(upstream.parentSpanId).toBe(server.spanId);
    expect(String(upstream.attributes['url.full'])).toContain(running.sandbox!.url);

    const lines = log.lines.filter((line) => line.trace_id === incoming.traceId);
    expect(lines.map((line) => line.msg)).toEqual(expect.arrayContaining(['incoming request', 'request completed']));
    for (const line of lines) expect(line.span_id).toBe(server.spanId);
  });

  it('a blog login, a post and a query leave no password, token or query value in any span', async () => {
    const password = `pw-${randomBytes(6).toString('hex')}`;
    secrets.push(password);
    const signed = await request(`${running.url}/api/users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'carol', email: 'carol@example.com', password }),
    });
    expect(signed.statusCode).toBe(201);
    const loggedIn = await request(`${running.url}/api/v2/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'carol@example.com', password }),
    });
    const { access_token } = (await loggedIn.body.json()) as { access_token: string };
    secrets.push(access_token);
    const wrong = await request(`${running.url}/api/v2/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'carol@example.com', password: `${password}-wrong` }),
    });
    expect(wrong.statusCode).toBe(401);
    const listed = await request(`${running.url}/api/v2/posts?tag=tag-secret-value&q=query-secret-value`, {
      headers: { authorization: `Bearer ${access_token}` },
    });
    await listed.body.dump();
    secrets.push('tag-secret-value', 'query-secret-value');

    // Closing serve sends every span still buffered: all of them are searched.
    closed = true;
    await running.close();
    const exported = collector.raw.join('\n');
    const everything = JSON.stringify(collector.spans);
    expect(collector.spans.some((s) => s.name === 'POST /api/v2/auth/login')).toBe(true);
    for (const secret of secrets) {
      expect(exported.includes(secret), `a secret (${secret.slice(0, 3)}...) was exported`).toBe(false);
      expect(everything.includes(secret)).toBe(false);
    }
  });
});

describe('a collector that does not answer', () => {
  it('is said once in the log (not once per batch), spans are dropped meanwhile, and its return is said too', async () => {
    vi.stubEnv('OTEL_BSP_SCHEDULE_DELAY', '50');
    vi.stubEnv('OTEL_EXPORTER_OTLP_TIMEOUT', '500');
    const port = await freePort();
    const log = new Lines();
    const running = await startTestServe({ tracing: resolveTracing({}, { otlpEndpoint: `http://127.0.0.1:${port}` }), logger: { level: 'info', stream: log } });
    let collector: OtlpReceiver | undefined;
    try {
      const tracingLines = () => log.lines.filter((line) => line.component === 'tracing');
      const get = async () => (await request(`${running.url}/api/v2/blog/posts`)).body.dump();
      // Batches fail one after another while nothing listens: one warning for them all.
      for (let i = 0; i < 3; i++) {
        await get();
        await new Promise((resolve) => setTimeout(resolve, 700));
      }
      await vi.waitFor(() => expect(tracingLines().length).toBeGreaterThan(0), { timeout: 10_000 });
      expect(tracingLines()).toMatchObject([
        {
          level: 40,
          msg: expect.stringMatching(
            new RegExp(`^tracing: cannot send spans to http://127.0.0.1:${port}/v1/traces: .*ECONNREFUSED.*; they are dropped until it answers$`),
          ),
        },
      ]);
      collector = await startOtlpReceiver(port);
      await get();
      await collector.waitFor((spans) => spans.some((span) => span.name === 'GET /api/v2/blog/posts'));
      await vi.waitFor(() => expect(tracingLines().length).toBe(2), { timeout: 10_000 });
      expect(tracingLines()[1]).toMatchObject({ level: 30, msg: `tracing: spans reach http://127.0.0.1:${port}/v1/traces again` });
    } finally {
      await running.close();
      await collector?.close();
    }
  });
});

describe('tracing configuration', () => {
  it('is off unless an exporter or an endpoint is named, and off when the SDK is disabled', () => {
    expect(resolveTracing({})).toBeUndefined();
    expect(resolveTracing({ OTEL_SERVICE_NAME: 'x' })).toBeUndefined();
    expect(resolveTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
    expect(resolveTracing({ OTEL_TRACES_EXPORTER: 'none' }, { otlpEndpoint: 'http://c:4318' })).toBeUndefined();
    expect(resolveTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' })).toMatchObject({
      exporter: 'otlp',
      protocol: 'http/protobuf',
      url: 'http://c:4318/v1/traces',
      serviceName: 'miniapp',
    });
    expect(resolveTracing({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/custom' })!.url).toBe('http://c:4318/custom');
    expect(resolveTracing({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_TRACES_EXPORTER: 'otlp' })!.url).toBe('http://localhost:4317');
    expect(resolveTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318' }, { otlpEndpoint: 'http://flag:4318' })!.url).toBe('http://flag:4318/v1/traces');
    expect(resolveTracing({ OTEL_TRACES_EXPORTER: 'console' })).toMatchObject({ exporter: 'console', timeoutMs: 10_000 });
    expect(resolveTracing({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_TIMEOUT: '3000', OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '1500' })!.timeoutMs).toBe(
      1500,
    );
    expect(resolveTracing({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1', OTEL_TRACES_EXPORTER: 'otlp' })!.sampler).toBe(
      'traceidratio (0.1)',
    );
  });

  it('refuses what it cannot honour, naming the variable or flag', () => {
    expect(() => resolveTracing({}, { otlpEndpoint: 'localhost:4318' })).toThrow(
      "--otlp-endpoint must be an http:// or https:// URL such as http://127.0.0.1:4318; got 'localhost:4318'",
    );
    expect(() => resolveTracing({}, { otlpEndpoint: 'not a url' })).toThrow("--otlp-endpoint must be a URL such as http://127.0.0.1:4318; got 'not a url'");
    expect(() => resolveTracing({}, { otlpEndpoint: 'http://user:pw@c:4318' })).toThrow('must not carry credentials');
    expect(() => resolveTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'thrift' })).toThrow(
      "OTEL_EXPORTER_OTLP_PROTOCOL 'thrift' is not supported; use http/protobuf, http/json, grpc",
    );
    expect(() => resolveTracing({ OTEL_TRACES_EXPORTER: 'zipkin' })).toThrow("OTEL_TRACES_EXPORTER 'zipkin' is not supported; use otlp, console or none");
    expect(() => resolveTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'ftp://c' })).toThrow('OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL');
    expect(() => resolveTracing({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_TIMEOUT: '5s' })).toThrow(
      "OTEL_EXPORTER_OTLP_TIMEOUT must be a whole number of milliseconds; got '5s'",
    );
  });
});
