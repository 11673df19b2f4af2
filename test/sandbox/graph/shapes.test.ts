/**
 * The three ways of finding the business account, each at its own mount:
 * the spec's edge (/graph), graph.facebook.com's pages (/facebook) and
 * graph.instagram.com's `me` (/instagram).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { buildSandbox, type Sandbox } from '../../../src/sandbox/server.js';
import { SandboxClock } from '../../../src/sandbox/clock.js';
import { MAIN_ACCOUNT_ID, SANDBOX_GRAPH_TOKENS, SANDBOX_PAGES, SECOND_ACCOUNT_ID } from '../../../src/sandbox/graph/data.js';

const NOW = Date.parse('2026-11-21T12:00:00Z');
let sandbox: Sandbox | undefined;
afterEach(async () => {
  await sandbox?.app.close();
  sandbox = undefined;
});

async function get(path: string, query: Record<string, string> = {}, token: string = SANDBOX_GRAPH_TOKENS.page) {
  sandbox ??= await buildSandbox({ key: randomBytes(32), aad: randomBytes(8), clock: new SandboxClock(() => NOW), graph: { media: 30 } });
  const params = new URLSearchParams({ access_token: token, ...query });
  const response = await sandbox.app.inject({ method: 'GET', url: `${path}?${params}` });
  return response.json() as Record<string, any>;
}

const IG = { fields: 'instagram_business_account{id,username,name}' };

describe('graph sandbox: account discovery shapes', () => {
  it('graph.facebook.com: the user token lists its pages with their linked accounts; a page token is its page', async () => {
    const pages = await get('/facebook/v24.0/me/accounts', { fields: 'id,name,instagram_business_account{id,username,name}' }, SANDBOX_GRAPH_TOKENS.user);
    expect(pages.data).toEqual([
      {
        id: SANDBOX_PAGES.main,
        name: 'Sandbox Studio Page',
        instagram_business_account: { id: MAIN_ACCOUNT_ID, username: 'sandbox.studio', name: 'Sandbox Studio' },
      },
      {
        id: SANDBOX_PAGES.second,
        name: 'Sandbox Shop Page',
        instagram_business_account: { id: SECOND_ACCOUNT_ID, username: 'sandbox.shop', name: 'Sandbox Shop' },
      },
      { id: SANDBOX_PAGES.unlinked, name: 'Sandbox Notes Page' },
    ]);
    expect(await get(`/facebook/v24.0/${SANDBOX_PAGES.second}`, { fields: 'instagram_business_account' }, SANDBOX_GRAPH_TOKENS.user)).toEqual({
      id: SANDBOX_PAGES.second,
      instagram_business_account: { id: SECOND_ACCOUNT_ID },
    });
    expect(await get('/facebook/v24.0/me', IG)).toEqual({
      id: SANDBOX_PAGES.main,
      instagram_business_account: { id: MAIN_ACCOUNT_ID, username: 'sandbox.studio', name: 'Sandbox Studio' },
    });
    expect((await get('/facebook/v24.0/me/accounts')).error.message).toBe('(#100) Tried accessing nonexisting field (accounts) on node type (Page)');
    expect((await get('/facebook/v24.0/me/social_business_accounts', {}, SANDBOX_GRAPH_TOKENS.user)).error).toMatchObject({ code: 100 });
  });

  it('graph.instagram.com: me is the professional account, and its edges work through me', async () => {
    expect(await get('/instagram/v24.0/me', { fields: 'user_id,username,name' })).toEqual({
      id: MAIN_ACCOUNT_ID,
      user_id: MAIN_ACCOUNT_ID,
      username: 'sandbox.studio',
      name: 'Sandbox Studio',
    });
    expect((await get('/instagram/v24.0/me/media', { fields: 'id', limit: '5' })).data).toHaveLength(5);
    expect((await get('/instagram/v24.0/me/accounts')).error.message).toBe('(#100) Tried accessing nonexisting field (accounts) on node type (IGUser)');
    expect((await get('/instagram/v24.0/me', IG)).error).toMatchObject({ code: 100 });
  });

  it('the spec mount keeps the spec edge, and the mounts share one rate limit', async () => {
    expect((await get('/graph/v24.0/me/social_business_accounts')).data).toEqual([{ id: MAIN_ACCOUNT_ID, name: 'Sandbox Studio' }]);
    const stats = (await sandbox!.app.inject({ method: 'GET', url: '/__sandbox/stats' })).json();
    await get('/facebook/v24.0/me', IG);
    await get('/instagram/v24.0/me');
    expect((await sandbox!.app.inject({ method: 'GET', url: '/__sandbox/stats' })).json().graphCalls).toBe(stats.graphCalls + 2);
  });
});

describe('graph sandbox: data built at the first request', () => {
  it('anchors the media at the clock of the start, however late the first request comes', async () => {
    const { createGraphData } = await import('../../../src/sandbox/graph/data.js');
    const clock = new SandboxClock(() => NOW);
    sandbox = await buildSandbox({ key: randomBytes(32), aad: randomBytes(8), clock, graph: { media: 30 } });
    clock.advance(3 * 86_400_000);
    const params = new URLSearchParams({ access_token: SANDBOX_GRAPH_TOKENS.page, fields: 'id,timestamp', limit: '5' });
    const listed = (await sandbox.app.inject({ method: 'GET', url: `/graph/v24.0/${MAIN_ACCOUNT_ID}/media?${params}` })).json() as {
      data: { id: string; timestamp: string }[];
    };
    const expected = createGraphData({ now: NOW, media: 30 });
    expect(listed.data).toHaveLength(5);
    for (const item of listed.data) expect(item.timestamp).toBe(expected.media(item.id)?.fields.timestamp);
  });
});
