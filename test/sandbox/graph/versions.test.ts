/**
 * Versions in the graph sandbox, as Meta's Graph API serves them: paths
 * without a version (and with empty segments), a retired version served at
 * the oldest usable one (named in `facebook-api-version`), and a version
 * Meta has not released refused.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { buildSandbox, type Sandbox } from '../../../src/sandbox/server.js';
import { SandboxClock } from '../../../src/sandbox/clock.js';
import { MAIN_ACCOUNT_ID, SANDBOX_GRAPH_TOKENS, createGraphData } from '../../../src/sandbox/graph/data.js';

const NOW = Date.parse('2026-11-21T12:00:00Z');
let sandbox: Sandbox | undefined;
afterEach(async () => {
  await sandbox?.app.close();
  sandbox = undefined;
});

async function build(now = NOW) {
  sandbox = await buildSandbox({ key: randomBytes(32), aad: randomBytes(8), clock: new SandboxClock(() => now), graph: { media: 30 } });
  return sandbox;
}

async function raw(path: string, query: Record<string, string> = {}) {
  const params = new URLSearchParams({ access_token: SANDBOX_GRAPH_TOKENS.page, ...query });
  const response = await sandbox!.app.inject({ method: 'GET', url: `${path}?${params}` });
  return { status: response.statusCode, version: response.headers['facebook-api-version'], body: response.json() as Record<string, any> };
}

describe('graph sandbox: versions', () => {
  it('serves /{id} without a version, and tolerates the empty segments of ///{id}', async () => {
    await build();
    const media = createGraphData({ now: NOW, media: 30 }).account(MAIN_ACCOUNT_ID)!.media[0]!;
    for (const path of [`/graph/${media.id}`, `/graph///${media.id}`, `/graph/v24.0//${media.id}`]) {
      const answer = await raw(path, { fields: 'id,caption' });
      expect(answer.status, path).toBe(200);
      expect(answer.body).toEqual({ id: media.id, caption: media.fields.caption });
    }
    const account = await raw(`/graph///${MAIN_ACCOUNT_ID}/media`, { fields: 'id', limit: '10' });
    expect(account.body.data).toHaveLength(10);
    // The paging link is a clean path under the same mount, without the empty segments.
    expect(new URL(account.body.paging.next).pathname).toBe(`/graph/${MAIN_ACCOUNT_ID}/media`);
  });

  it('serves a retired version and an unversioned call at the oldest usable version, as Meta does', async () => {
    await build();
    // On 2026-11-21 v18.0 (retired 2026-01-23) and v20.0 (retired 2026-10-02) are gone; v21.0 lives until 2027-01-21.
    expect((await raw(`/graph/v18.0/${MAIN_ACCOUNT_ID}`)).version).toBe('v21.0');
    expect((await raw(`/graph/${MAIN_ACCOUNT_ID}`)).version).toBe('v21.0');
    expect((await raw(`/graph/v24.0/${MAIN_ACCOUNT_ID}`)).version).toBe('v24.0');
  });

  it('refuses a retired metric at a retired version once the version that serves it has retired the metric', async () => {
    const media = createGraphData({ now: NOW, media: 30 }).account(MAIN_ACCOUNT_ID)!.media[0]!;
    await build();
    expect((await raw(`/graph/v18.0/${media.id}/insights`, { metric: 'impressions' })).status).toBe(200);
    await sandbox!.app.close();
    // After 2027-01-21 the oldest usable version is v22.0, where impressions is gone.
    await build(Date.parse('2027-02-01T00:00:00Z'));
    const later = await raw(`/graph/v18.0/${media.id}/insights`, { metric: 'impressions' });
    expect(later.version).toBe('v22.0');
    expect(later.body.error).toMatchObject({ code: 100 });
    expect(later.body.error.message).toContain('impressions');
  });

  it('refuses a version Meta has not released with error 2500', async () => {
    await build();
    const answer = await raw(`/graph/v99.0/${MAIN_ACCOUNT_ID}`);
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatchObject({ code: 2500, message: 'Unknown path components: /v99.0' });
  });
});
