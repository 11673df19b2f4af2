/**
 * The graph client against a real listening sandbox: paging to the end,
 * errors by code, retries on throttling (with a sleep that moves the
 * sandbox clock instead of waiting), the time-out, and the token kept out
 * of every message.
 */
import { afterEach, describe, expect, it } from 'vitest';
import Fastify, { type FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { AuthError, ExitCode, UpstreamError } from '../../src/errors.js';
import { GraphClient, metricsOf, type GraphClientOptions } from '../../src/insights/client.js';
import {
  GraphApiError,
  MetricRejectedError,
  NotBusinessAccountError,
  RateLimitError,
  isThrottleCode,
  mapGraphError,
  redact,
  redactUrl,
} from '../../src/insights/errors.js';
import { listBusinessAccounts, resolveAccount } from '../../src/insights/accounts.js';
import { SandboxClock } from '../../src/sandbox/clock.js';
import { MAIN_ACCOUNT_ID, SANDBOX_GRAPH_TOKENS } from '../../src/sandbox/graph/data.js';
import { NOW, startGraphSandbox, type GraphSandbox } from './graph-sandbox.js';

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (closers.length > 0) await closers.pop()!();
});

async function sandbox(...args: Parameters<typeof startGraphSandbox>): Promise<GraphSandbox> {
  const started = await startGraphSandbox(...args);
  closers.push(started.close);
  return started;
}

function client(url: string, options: Partial<GraphClientOptions> = {}): GraphClient {
  const created = new GraphClient({ baseUrl: url, version: 'v18.0', token: SANDBOX_GRAPH_TOKENS.page, sleep: async () => {}, ...options });
  closers.push(() => created.close());
  return created;
}

async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a failure');
}

describe('GraphClient', () => {
  it('follows paging.next to the end and counts its calls', async () => {
    const sb = await sandbox({ media: 230 });
    const graph = client(sb.url);
    const items = await graph.list<{ id: string }>(`${MAIN_ACCOUNT_ID}/media`, { fields: 'id', limit: 100 });
    expect(items.map((i) => i.id)).toEqual(sb.data.account(MAIN_ACCOUNT_ID)!.media.map((m) => m.id));
    expect(graph.calls).toBe(3);
    expect(await sb.graphCalls()).toBe(3);
  });

  it('resolves the only business account, and asks to choose among several', async () => {
    const sb = await sandbox({ media: 3 });
    expect(await resolveAccount(client(sb.url), {})).toEqual({ id: MAIN_ACCOUNT_ID, source: 'lookup', name: 'Sandbox Studio', shape: 'spec' });
    expect(await resolveAccount(client(sb.url), { setting: '42' })).toEqual({ id: '42', source: 'setting' });
    const several = await failure(resolveAccount(client(sb.url, { token: SANDBOX_GRAPH_TOKENS.user }), {}));
    expect(several.message).toContain('17841400000000002  Sandbox Shop');
    expect((several as AuthError).exitCode).toBe(ExitCode.usage);
    expect((await listBusinessAccounts(client(sb.url, { token: SANDBOX_GRAPH_TOKENS.user }))).length).toBe(2);
  });

  it('maps 190, 200 and the personal-account error to their own errors, without the token', async () => {
    const sb = await sandbox({ media: 3 });
    const expired = await failure(client(sb.url, { token: SANDBOX_GRAPH_TOKENS.expired }).get('me/social_business_accounts'));
    expect(expired).toBeInstanceOf(AuthError);
    expect((expired as AuthError).exitCode).toBe(4);
    expect(expired.message).toContain('expired');
    expect((expired as AuthError).hint).toContain('create a new token');

    const noperm = await failure(client(sb.url, { token: SANDBOX_GRAPH_TOKENS.noPermission }).get(`${MAIN_ACCOUNT_ID}/media`));
    expect(noperm).toBeInstanceOf(AuthError);
    expect(noperm.message).toContain('lacks the pages_read_engagement permission');

    const personal = await failure(client(sb.url, { token: SANDBOX_GRAPH_TOKENS.personal }).get(`${MAIN_ACCOUNT_ID}/media`));
    expect(personal).toBeInstanceOf(NotBusinessAccountError);
    expect((personal as NotBusinessAccountError).exitCode).toBe(1);
    expect((personal as NotBusinessAccountError).hint).toContain('convert the account to business or creator and link it to a page');

    for (const error of [expired, noperm, personal]) {
      expect(`${error.message} ${(error as AuthError).hint} ${error.stack}`).not.toMatch(/sandbox-graph-token|access_token=/);
    }
  });

  it('names the rejected metric on error 100, with the successor of a retired one', async () => {
    const sb = await sandbox({ media: 12 });
    const image = sb.data.account(MAIN_ACCOUNT_ID)!.media[0]!;
    const unsupported = await failure(client(sb.url).get(`${image.id}/insights`, { metric: 'reach,video_views' }));
    expect(unsupported).toBeInstanceOf(MetricRejectedError);
    expect((unsupported as MetricRejectedError).rejected).toEqual(['video_views']);
    expect((unsupported as MetricRejectedError).exitCode).toBe(ExitCode.usage);

    const retired = await failure(client(sb.url, { version: 'v22.0' }).get(`${image.id}/insights`, { metric: 'reach,engagement' }));
    expect((retired as MetricRejectedError).rejected).toEqual(['engagement']);
    expect((retired as MetricRejectedError).onlyRetired).toBe(true);
    expect((retired as MetricRejectedError).hint).toContain('engagement -> total_interactions');

    const typo = await failure(client(sb.url).get(`${image.id}/insights`, { metric: 'reach,reachh' }));
    expect((typo as MetricRejectedError).rejected).toEqual(['reachh']);
    expect((typo as MetricRejectedError).hint).toMatch(/^metrics this object answers: impressions, reach/);

    const missing = await failure(client(sb.url).get('1234/insights', { metric: 'reach' }));
    expect(missing).toBeInstanceOf(GraphApiError);
    expect((missing as GraphApiError).graph.error_subcode).toBe(33);
  });

  it('retries when throttled, waiting the regain estimate, and gives up after --max-retries', async () => {
    let now = NOW;
    const sb = await sandbox({ media: 3, rateLimit: { calls: 3, windowMs: 3_600_000 } }, new SandboxClock(() => now));
    const waits: { ms: number; reason: string }[] = [];
    const warnings: string[] = [];
    const graph = client(sb.url, {
      sleep: async (ms, why) => {
        waits.push({ ms, reason: why.reason });
        now += ms;
      },
      onWarn: (m) => warnings.push(m),
    });
    for (let i = 0; i < 4; i++) await graph.get(MAIN_ACCOUNT_ID, { fields: 'id,name' });
    // 33 %, 67 %, 100 % (pace one back-off), then throttled: wait until the window frees a call.
    expect(waits).toEqual([
      { ms: 60_000, reason: 'pacing' },
      { ms: 59 * 60_000, reason: 'throttled' },
    ]);
    expect(warnings).toHaveLength(1);
    expect(graph.calls).toBe(5);

    // Another token's budget, used up, with a clock that does not move.
    const stuck = client(sb.url, { token: SANDBOX_GRAPH_TOKENS.user, maxRetries: 2, sleep: async () => {} });
    for (let i = 0; i < 3; i++) await stuck.get(MAIN_ACCOUNT_ID);
    const error = await failure(stuck.get(MAIN_ACCOUNT_ID));
    expect(error).toBeInstanceOf(RateLimitError);
    expect((error as RateLimitError).exitCode).toBe(ExitCode.upstream);
    expect(error.message).toContain('after 2 retries (code 17');
    expect(stuck.calls).toBe(3 + 3);
  });

  it('doubles the back-off from 60 s when the API gives no estimate', async () => {
    let answers = 0;
    const app = await server(async (app) => {
      app.get('/v18.0/me', async (_request, reply) => {
        answers++;
        if (answers <= 3) return reply.status(400).send({ error: { message: '(#4) Application request limit reached', type: 'OAuthException', code: 4 } });
        return { id: '1' };
      });
    });
    const waits: number[] = [];
    const graph = client(app, { sleep: async (ms) => void waits.push(ms) });
    expect(await graph.get('me')).toEqual({ id: '1' });
    expect(waits).toEqual([60_000, 120_000, 240_000]);
  });

  it('times out, and says so without the token', async () => {
    const app = await server(async (app) => {
      app.get('/v18.0/me', () => new Promise(() => {}));
    });
    const error = await failure(client(app, { timeoutMs: 150, token: 'secret-token-value' }).get('me'));
    expect(error).toBeInstanceOf(UpstreamError);
    expect((error as UpstreamError).code).toBe('UPSTREAM_TIMEOUT');
    expect(error.message).toContain('did not answer within 0.15 s');
    expect(error.message).not.toContain('secret-token-value');
  });

  it('reports an unreachable API and a body that is not JSON as upstream failures', async () => {
    const refused = await failure(client('http://127.0.0.1:9', { token: 'secret-token-value' }).get('me'));
    expect((refused as UpstreamError).code).toBe('UPSTREAM_UNREACHABLE');
    expect(refused.message).not.toContain('secret-token-value');
    const app = await server(async (app) => {
      app.get('/v18.0/me', async (_request, reply) => reply.status(502).type('text/html').send('<html>bad gateway</html>'));
    });
    const html = await failure(client(app).get('me'));
    expect(html.message).toContain('HTTP 502 with a body that is not JSON');
  });

  it('never sends the token to a paging link outside graph-url', async () => {
    const graph = client('http://127.0.0.1:1/graph');
    expect(() => graph.followUrl('http://elsewhere.example/graph/v18.0/1/media?access_token=x')).toThrow(/outside graph-url/);
    expect(graph.followUrl('http://127.0.0.1:1/graph/v18.0/1/media?after=abc&access_token=theirs').searchParams.has('access_token')).toBe(false);
  });
});

describe('redaction and error mapping', () => {
  it('strips access_token from URLs in text and the token anywhere', () => {
    expect(redact('see https://h/v1/x?after=a&access_token=SECRET123&limit=2 now', 'SECRET123')).toBe('see https://h/v1/x?after=a&limit=2 now');
    expect(redact('token SECRET123 leaked', 'SECRET123')).toBe('token *** leaked');
    expect(redact('access_token=abc&x=1')).toBe('access_token=***&x=1');
    expect(redactUrl('http://h/g/v18.0/1/media?fields=id,insights.metric(reach)&access_token=abc')).toBe(
      'http://h/g/v18.0/1/media?fields=id,insights.metric(reach)',
    );
  });

  it('maps the other code-100 cases and knows the throttling codes', () => {
    const context = { status: 400, what: 'http://h/v18.0/1/insights?metric=reach', metrics: ['reach'], token: 'secret-token-value' };
    const early = mapGraphError(
      { message: 'Invalid parameter', code: 100, error_subcode: 2108006, error_user_msg: 'The media was posted before the conversion.' },
      context,
    );
    expect(early).toBeInstanceOf(GraphApiError);
    expect(early.exitCode).toBe(ExitCode.failure);
    expect(early.message).toContain('posted before the account became a business account');
    const period = mapGraphError({ message: '(#100) Param period must be one of {day, lifetime}', code: 100 }, context);
    expect(period.exitCode).toBe(ExitCode.usage);
    expect(period.code).toBe('GRAPH_INVALID_PARAMETER');
    const echoed = mapGraphError({ message: 'bad token secret-token-value in https://h/x?access_token=secret-token-value', code: 1 }, context);
    expect(echoed.exitCode).toBe(ExitCode.upstream);
    expect(echoed.message).not.toContain('secret-token-value');
    expect([4, 17, 32, 613, 80002].every(isThrottleCode)).toBe(true);
    expect(isThrottleCode(100)).toBe(false);
  });

  it('finds the metrics of a request in metric= and in field expansion', () => {
    expect(metricsOf(new URL('http://h/1/insights?metric=reach,saved'))).toEqual(['reach', 'saved']);
    expect(metricsOf(new URL('http://h/1/media?fields=id,insights.metric(reach,shares)'))).toEqual(['reach', 'shares']);
  });
});

/** A stub for protocol cases the sandbox does not play (no usage headers, silence, HTML). */
async function server(routes: (app: FastifyInstance) => Promise<void>): Promise<string> {
  const app = Fastify();
  await app.register(routes);
  await app.listen({ host: '127.0.0.1', port: 0 });
  closers.push(() => app.close());
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}
