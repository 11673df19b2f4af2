/**
 * `serve --metrics-token` (issue 42, item 7): /metrics shows payment totals
 * and the server's traffic, so it can ask for a Bearer token, sent as
 * Prometheus sends the `authorization` of a scrape config. In process for the
 * route, and as a real process for the flag, its environment variable and
 * the logs.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { startServeProcess, type ServeProcess } from '../helpers/chaos.js';
import { Sandbox } from '../helpers/cli.js';

const TOKEN = 'scrape-3f9c2a71e0b84d5c';
/** What Prometheus 2.x sends for a scrape, with `authorization: { credentials: ... }` in its scrape config. */
const PROMETHEUS_ACCEPT =
  'application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1';

async function scrape(url: string, authorization?: string) {
  const response = await request(`${url}/metrics`, { headers: { accept: PROMETHEUS_ACCEPT, ...(authorization === undefined ? {} : { authorization }) } });
  return { status: response.statusCode, headers: response.headers, body: await response.body.text() };
}

describe('GET /metrics with a metrics token', () => {
  let running: RunningServe | undefined;
  afterEach(async () => {
    await running?.close();
    running = undefined;
  });

  it('answers only a request that carries the token as a Bearer token; anything else is 401 with the challenge and no metric', async () => {
    running = await startTestServe({ metricsToken: TOKEN });
    const missing = await scrape(running.url);
    expect(missing.status).toBe(401);
    expect(missing.headers['www-authenticate']).toBe('Bearer realm="miniapp metrics"');
    expect(JSON.parse(missing.body)).toEqual({
      error: 'GET /metrics needs "Authorization: Bearer <the metrics token>" (serve --metrics-token)',
      detail: 'GET /metrics needs "Authorization: Bearer <the metrics token>" (serve --metrics-token)',
      code: 'UNAUTHORIZED',
    });
    for (const wrong of [`Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(0, -1)}`, `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}`, TOKEN, 'Bearer ']) {
      const refused = await scrape(running.url, wrong);
      expect(refused.status, wrong).toBe(401);
      expect(refused.headers['www-authenticate']).toBe(
        'Bearer realm="miniapp metrics", error="invalid_token", error_description="the metrics token is not this one"',
      );
      expect(refused.body).not.toContain('miniapp_');
    }
    const taken = await scrape(running.url, `Bearer ${TOKEN}`);
    expect(taken.status).toBe(200);
    expect(taken.headers['content-type']).toContain('application/openmetrics-text');
    // The refusals were counted as any request is: under the route, by status.
    expect(taken.body).toMatch(/^miniapp_http_requests_total\{method="GET",route="\/metrics",status="401"\} 6$/m);
    // The scheme's name is case-insensitive (RFC 9110 section 11.1).
    expect((await scrape(running.url, `bearer ${TOKEN}`)).status).toBe(200);
  });

  it('is open to anyone without one, as before', async () => {
    running = await startTestServe();
    const open = await scrape(running.url);
    expect(open.status).toBe(200);
    expect(open.body).toContain('miniapp_ready');
  });
});

describe('serve --metrics-token and MINIAPP_METRICS_TOKEN', () => {
  let served: ServeProcess | undefined;
  afterEach(() => {
    served?.dispose();
    served = undefined;
  });

  it('takes the token from the environment, and never writes it to the log', async () => {
    served = await startServeProcess({ extraArgs: ['--no-grpc', '--log-level', 'info'], env: { MINIAPP_METRICS_TOKEN: TOKEN } });
    const url = (served.info as { url: string }).url;
    expect((await scrape(url)).status).toBe(401);
    expect((await scrape(url, `Bearer ${TOKEN}`)).status).toBe(200);
    expect((await scrape(url, `Bearer not-the-${TOKEN}`)).status).toBe(401);
    await served.stop('SIGINT');
    expect(served.stderr()).toContain('"url":"/metrics"');
    expect(served.stderr()).not.toContain(TOKEN);
  });

  it('takes --metrics-token, and refuses a short one with exit 2 without echoing it', async () => {
    served = await startServeProcess({ extraArgs: ['--no-grpc', '--metrics-token', TOKEN] });
    const url = (served.info as { url: string }).url;
    expect((await scrape(url, `Bearer ${TOKEN}`)).status).toBe(200);
    expect((await scrape(url)).status).toBe(401);
    const sb = new Sandbox();
    try {
      const short = await sb.run(['serve', '--port', '0', '--no-grpc', '--metrics-token', 'sh0rt-secret']);
      expect(short.code).toBe(2);
      expect(short.stderr).toContain(
        'the metrics token (--metrics-token or MINIAPP_METRICS_TOKEN) must be at least 16 printable characters without spaces; it has 12',
      );
      expect(short.stderr).not.toContain('sh0rt-secret');
    } finally {
      sb.dispose();
    }
  });
});
