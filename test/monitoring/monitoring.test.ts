/**
 * monitoring.v1.MonitoringService through a real serve (HTTP and gRPC on
 * port 0, a real logger), and `miniapp monitor` driving it as a user would.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { serviceDefinition } from '../../src/grpc/protos.js';
import { Capture, Sandbox, plain } from '../helpers/cli.js';
import { bearer, runLive, waitFor } from '../users/cli/harness.js';
import { BACKENDS } from '../helpers/postgres.js';
import { startTestServe } from '../helpers/serve.js';

describe.each(BACKENDS)('on %s', (backend) => {
  let running: RunningServe;
  let logSink: Capture;
  let userToken: string;
  let sandboxSecrets: string[];
  const clients: grpc.Client[] = [];

  type AnyClient = grpc.Client & Record<string, any>;

  function monitoring(): AnyClient {
    const { Client } = serviceDefinition('monitoring.v1.MonitoringService');
    const client = new Client(running.grpc!.address, grpc.credentials.createInsecure()) as AnyClient;
    clients.push(client);
    return client;
  }

  function collect<T>(call: grpc.ClientReadableStream<T>): Promise<T[]> {
    return new Promise((resolve, reject) => {
      const items: T[] = [];
      call.on('data', (item: T) => items.push(item));
      call.on('end', () => resolve(items));
      call.on('error', reject);
    });
  }

  async function statusOf(promise: Promise<unknown>): Promise<string> {
    try {
      await promise;
      return 'OK';
    } catch (error) {
      return grpc.status[(error as grpc.ServiceError).code]!;
    }
  }

  async function http(method: string, path: string, json?: unknown, headers: Record<string, string> = {}) {
    const response = await request(`${running.url}${path}`, {
      method: method as 'GET',
      headers: json === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      body: json === undefined ? undefined : JSON.stringify(json),
    });
    const text = await response.body.text();
    return { status: response.statusCode, body: text ? JSON.parse(text) : undefined };
  }

  beforeAll(async () => {
    logSink = new Capture();
    // One serve (and on PostgreSQL one database) for the whole file: the tests share its users and log.
    running = await startTestServe({ logger: { level: 'info', stream: logSink }, grpc: { host: '127.0.0.1', port: 0 }, shutdownDeadlineMs: 500 }, backend);
    // A full login through the relay, so that the log has had every kind of secret pass by.
    const code = await request(`${running.sandbox!.url}/__sandbox/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userKey: 1001 }),
    }).then((r) => r.body.json() as Promise<{ authorizationCode: string }>);
    const tokens = (await http('POST', '/api/auth/token', { authorizationCode: code.authorizationCode, referrer: 'sandbox' })).body;
    const me = (await http('GET', '/api/auth/me', undefined, { authorization: `Bearer ${tokens.accessToken}` })).body;
    await http('POST', '/api/users', { username: 'olivia', email: 'olivia@example.com', password: 'password-123' });
    userToken = (await http('POST', '/api/v2/auth/login', { email: 'olivia@example.com', password: 'password-123' })).body.access_token;
    sandboxSecrets = [
      tokens.accessToken,
      tokens.refreshToken,
      code.authorizationCode,
      running.sandbox!.key,
      running.sandbox!.aad,
      me.name,
      me.phone,
      me.ci,
      running.adminToken,
      userToken,
      'password-123',
    ];
  });
  afterAll(async () => {
    for (const client of clients) client.close();
    await running.close();
  });

  describe('StreamMetrics', () => {
    it('streams the live series, filtered by name prefix', async () => {
      await http('GET', '/health');
      const items = await collect<any>(
        monitoring().StreamMetrics(
          { name_prefixes: ['miniapp_http_requests_total', 'miniapp_process_cpu'], interval_ms: 100, count: 2 },
          bearer(running.adminToken),
        ),
      );
      expect(items).toHaveLength(2);
      expect(items[0].service_name).toBe(`miniapp ${running.url}`);
      const keys = Object.keys(items[1].metrics);
      expect(keys.length).toBeGreaterThan(0);
      expect(keys.every((key) => key.startsWith('miniapp_http_requests_total') || key.startsWith('miniapp_process_cpu'))).toBe(true);
      expect(keys.some((key) => key.startsWith('miniapp_process_cpu'))).toBe(true);
    });

    it('refuses intervals outside 100 ms to 1 h and too many prefixes', async () => {
      const c = monitoring();
      expect(await statusOf(collect(c.StreamMetrics({ interval_ms: 10, count: 1 }, bearer(running.adminToken))))).toBe('INVALID_ARGUMENT');
      expect(await statusOf(collect(c.StreamMetrics({ interval_ms: 3_600_001, count: 1 }, bearer(running.adminToken))))).toBe('INVALID_ARGUMENT');
      expect(
        await statusOf(collect(c.StreamMetrics({ name_prefixes: Array.from({ length: 21 }, (_, i) => `p${i}`), count: 1 }, bearer(running.adminToken)))),
      ).toBe('INVALID_ARGUMENT');
    });
  });

  describe('admin token only', () => {
    it('is UNAUTHENTICATED without a token and PERMISSION_DENIED with a user token, on every method', async () => {
      const c = monitoring();
      expect(await statusOf(collect(c.StreamMetrics({ count: 1 })))).toBe('UNAUTHENTICATED');
      expect(await statusOf(collect(c.StreamLogs({ tail: 1 })))).toBe('UNAUTHENTICATED');
      expect(await statusOf(collect(c.StreamMetrics({ count: 1 }, bearer(userToken))))).toBe('PERMISSION_DENIED');
      expect(await statusOf(collect(c.StreamLogs({ tail: 1 }, bearer(userToken))))).toBe('PERMISSION_DENIED');
      const chat = c.Chat(bearer(userToken));
      expect(await statusOf(collect(chat))).toBe('PERMISSION_DENIED');
    });
  });

  describe('StreamLogs', () => {
    it('sends the kept lines that match, then new ones as they are written', async () => {
      const c = monitoring();
      const tail = await collect<any>(c.StreamLogs({ tail: 1000, components: ['http'] }, bearer(running.adminToken)));
      expect(tail.length).toBeGreaterThan(3);
      expect(tail.every((entry) => entry.component === 'http')).toBe(true);
      expect(tail.map((entry) => Number(entry.sequence))).toEqual([...tail.map((entry) => Number(entry.sequence))].sort((a, b) => a - b));

      const call = c.StreamLogs({ tail: 0, follow: true, min_level: 'LOG_LEVEL_INFO' }, bearer(running.adminToken));
      const seen: any[] = [];
      call.on('data', (entry: any) => seen.push(entry));
      call.on('error', () => undefined);
      await waitFor(() => running.logs.subscribers() > 0, 'the follower to subscribe');
      await http('GET', '/health?probe=follow');
      await waitFor(() => seen.some((entry) => JSON.parse(entry.fields_json).req?.url === '/health?probe=REDACTED'), 'the request in the followed log');
      call.cancel();
    });

    it('filters by level', async () => {
      running.app.log.warn({ component: 'webhooks', deliveryId: 7 }, 'webhook attempt failed; will retry');
      const warnings = await collect<any>(monitoring().StreamLogs({ tail: 1000, min_level: 'LOG_LEVEL_WARN' }, bearer(running.adminToken)));
      expect(warnings.map((entry) => entry.message)).toContain('webhook attempt failed; will retry');
      expect(warnings.find((entry) => entry.message === 'webhook attempt failed; will retry')).toMatchObject({
        component: 'webhooks',
        level: 'LOG_LEVEL_WARN',
      });
      expect(warnings.every((entry) => ['LOG_LEVEL_WARN', 'LOG_LEVEL_ERROR', 'LOG_LEVEL_FATAL'].includes(entry.level))).toBe(true);
      expect(await statusOf(collect(monitoring().StreamLogs({ tail: -1 }, bearer(running.adminToken))))).toBe('INVALID_ARGUMENT');
    });

    it('refuses a min_level the LogLevel enum does not name with INVALID_ARGUMENT naming the field', async () => {
      const refusal = await collect(monitoring().StreamLogs({ tail: 10, min_level: 99 }, bearer(running.adminToken))).then(
        () => undefined,
        (error: grpc.ServiceError) => ({ code: grpc.status[error.code], details: error.details }),
      );
      expect(refusal).toEqual({
        code: 'INVALID_ARGUMENT',
        details:
          'min_level 99 is not a LogLevel: give one of LOG_LEVEL_UNSPECIFIED, LOG_LEVEL_TRACE, LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR, LOG_LEVEL_FATAL (0 to 6)',
      });
      // Every named level, by name or number, and none at all, is taken.
      expect(await statusOf(collect(monitoring().StreamLogs({ tail: 1, min_level: 6 }, bearer(running.adminToken))))).toBe('OK');
      expect(await statusOf(collect(monitoring().StreamLogs({ tail: 1 }, bearer(running.adminToken))))).toBe('OK');
    });

    it('holds no token, key, AAD, password or personal value, as the log itself', async () => {
      const entries = await collect<any>(monitoring().StreamLogs({ tail: 1000, min_level: 'LOG_LEVEL_TRACE' }, bearer(running.adminToken)));
      expect(entries.length).toBeGreaterThan(5);
      const text = JSON.stringify(entries);
      for (const secret of sandboxSecrets) if (secret) expect(text).not.toContain(secret);
      for (const secret of sandboxSecrets) if (secret) expect(logSink.text).not.toContain(secret);
    });
  });

  describe('Chat', () => {
    it("passes each message to every other operator, with the sender's name", async () => {
      const a = monitoring().Chat(bearer(running.adminToken));
      const b = monitoring().Chat(bearer(running.adminToken));
      const got: any[] = [];
      b.on('data', (message: any) => got.push(message));
      a.on('data', () => undefined);
      b.write({ sender: 'bea', text: '' });
      a.write({ sender: 'ann', text: '' });
      await waitFor(() => running.monitoring.chatParticipants() === 2, 'both to join');
      a.write({ text: 'deploying v2' });
      await waitFor(() => got.length === 1, 'the message');
      expect(got[0]).toMatchObject({ sender: 'ann', text: 'deploying v2', sent_at: expect.any(Object) });
      a.end();
      b.end();
    });
  });

  describe('miniapp monitor', () => {
    it('logs -f shows a request made meanwhile, and no secret', async () => {
      const sb = new Sandbox();
      try {
        const env = { MINIAPP_GRPC_ADDR: running.grpc!.address, MINIAPP_GRPC_TOKEN: running.adminToken };
        const live = runLive(sb, ['monitor', 'logs', '-f', '--tail', '0'], env);
        await waitFor(() => running.logs.subscribers() > 0, 'monitor logs -f to follow the log');
        await http('GET', '/api/v2/blog/posts?search=monitor-probe');
        await waitFor(() => live.stdout.text.includes('search=monitor-probe'), 'the request in monitor logs -f');
        live.interrupt();
        expect(await live.done).toBe(0);
        expect(plain(live.stdout.text)).toMatch(/INFO\s+http\s+GET \/api\/v2\/blog\/posts\?search=monitor-probe 200 [\d.]+ms/);
        const all = await sb.run(['monitor', 'logs', '--json'], { env });
        expect(all.code).toBe(0);
        for (const secret of sandboxSecrets) if (secret) expect(all.stdout).not.toContain(secret);
        const lines = all.stdout
          .trim()
          .split('\n')
          .map((line) => JSON.parse(line));
        expect(lines[0]).toMatchObject({ sequence: expect.any(Number), level: expect.any(String), component: expect.any(String), message: expect.any(String) });
      } finally {
        sb.dispose();
      }
    });

    it('metrics shows request counts rising', async () => {
      const sb = new Sandbox();
      try {
        const env = { MINIAPP_GRPC_ADDR: running.grpc!.address, MINIAPP_GRPC_TOKEN: running.adminToken };
        const live = runLive(sb, ['monitor', 'metrics', '--interval', '200ms', '--name', 'miniapp_http_requests_total', '--count', '3'], env);
        await waitFor(() => live.stdout.text.split('\n').filter(Boolean).length >= 1, 'the first snapshot');
        for (let i = 0; i < 5; i++) await http('GET', '/health');
        expect(await live.done).toBe(0);
        const snapshots = live.stdout.text
          .trim()
          .split('\n')
          .map((line) => JSON.parse(line));
        expect(snapshots).toHaveLength(3);
        const health = (s: any) => s.metrics['miniapp_http_requests_total{method="GET",route="/health",status="200"}'] ?? 0;
        expect(health(snapshots[2])).toBeGreaterThanOrEqual(health(snapshots[0]) + 5);
        const human = runLive(sb, ['monitor', 'metrics', '--interval', '100ms', '--count', '1', '--name', 'miniapp_http_'], env, { tty: true });
        expect(await human.done).toBe(0);
        expect(plain(human.stdout.text)).toMatch(/series\s+value\s+per second/);
        // A metric's name once, each of its label sets under it.
        expect(plain(human.stdout.text)).toMatch(/\nminiapp_http_requests_total\x1b\[K\n( {2}\{.*\n)*? {2}\{method="GET",route="\/health",status="200"\} +\d+/);
        // On a narrow terminal a long label set takes lines of its own rather than being cut: two label sets never look alike.
        const narrow = runLive(sb, ['monitor', 'metrics', '--interval', '100ms', '--count', '1', '--name', 'miniapp_http_requests_total'], env, {
          tty: true,
          columns: 50,
        });
        expect(await narrow.done).toBe(0);
        const drawn = plain(narrow.stdout.text).replace(/\x1b\[[HJK2]+/g, '');
        expect(drawn).not.toContain('…');
        for (const line of drawn.split('\n')) expect(line.length, line).toBeLessThan(50);
        const keys = Object.keys(snapshots[2].metrics).filter((key) => key.startsWith('miniapp_http_requests_total'));
        expect(keys.length).toBeGreaterThan(0);
        // Read back (the value columns removed, continuation lines joined, each label set after its name), each series is there whole.
        const shown: string[] = [];
        let name = '';
        for (const line of drawn
          .split('\n')
          .slice(3)
          .map((text) => text.replace(/ {2,}[-\d.e+]+( {2,}[-\d.e+]+)?$/, ''))) {
          if (line.startsWith('    ')) shown[shown.length - 1] += line.trim();
          else if (line.startsWith('  {')) shown.push(`${name}${line.trim()}`);
          else if (line) {
            name = line;
            shown.push(name);
          }
        }
        for (const key of keys) expect(shown, key).toContain(key);
      } finally {
        sb.dispose();
      }
    });

    it('says what to do without a token, and refuses a bad --level', async () => {
      const sb = new Sandbox();
      try {
        const noToken = await sb.run(['monitor', 'logs'], { env: { MINIAPP_GRPC_ADDR: running.grpc!.address } });
        expect(noToken.code).toBe(4);
        expect(noToken.stderr).toContain('no token for the monitoring service');
        const level = await sb.run(['monitor', 'logs', '--level', 'loud'], {
          env: { MINIAPP_GRPC_ADDR: running.grpc!.address, MINIAPP_GRPC_TOKEN: running.adminToken },
        });
        expect(level.code).toBe(2);
        expect(level.stderr).toContain('--level must be one of');
      } finally {
        sb.dispose();
      }
    });
  });
});
