/**
 * The fields client libraries ask for by default (FIELD-NOTES), on IG User
 * and IG Media nodes, albums' children, and errors naming Meta's node types.
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

async function get(path: string, query: Record<string, string> = {}) {
  sandbox ??= await buildSandbox({ key: randomBytes(32), aad: randomBytes(8), clock: new SandboxClock(() => NOW), graph: { media: 30 } });
  const params = new URLSearchParams({ access_token: SANDBOX_GRAPH_TOKENS.page, ...query });
  const response = await sandbox.app.inject({ method: 'GET', url: `/graph/v24.0${path}?${params}` });
  return response.json() as Record<string, any>;
}

const data = createGraphData({ now: NOW, media: 30 });
const media = data.account(MAIN_ACCOUNT_ID)!.media;

describe('graph sandbox: default fields of the libraries', () => {
  it('answers every IG User field', async () => {
    const fields = 'biography,id,ig_id,followers_count,follows_count,media_count,name,profile_picture_url,username';
    const user = await get(`/${MAIN_ACCOUNT_ID}`, { fields });
    const account = data.account(MAIN_ACCOUNT_ID)!;
    expect(user).toEqual({
      id: MAIN_ACCOUNT_ID,
      biography: account.biography,
      ig_id: account.igId,
      followers_count: account.followersCount,
      follows_count: account.followsCount,
      media_count: 30,
      name: 'Sandbox Studio',
      profile_picture_url: account.profilePictureUrl,
      username: 'sandbox.studio',
    });
  });

  it('answers every IG Media field: owner, album children with their fields, video thumbnails', async () => {
    const fields =
      'caption,comments_count,id,children,like_count,media_type,media_url,owner,permalink,timestamp,username,media_product_type,ig_id,is_comment_enabled,shortcode,thumbnail_url';
    const album = media.find((m) => m.kind === 'CAROUSEL_ALBUM')!;
    const answer = await get(`/${album.id}`, { fields });
    expect(answer.owner).toEqual({ id: MAIN_ACCOUNT_ID });
    expect(answer.children.data).toEqual(album.children!.map((c) => ({ id: c.id })));
    expect(answer).toMatchObject({
      media_product_type: 'FEED',
      shortcode: album.fields.shortcode,
      ig_id: album.fields.ig_id,
      is_comment_enabled: album.fields.is_comment_enabled,
    });
    expect(answer.thumbnail_url).toBeUndefined();
    const video = media.find((m) => m.kind === 'VIDEO')!;
    expect((await get(`/${video.id}`, { fields })).thumbnail_url).toBe(video.fields.thumbnail_url);
    expect((await get(`/${video.id}`, { fields })).children).toBeUndefined();
    // Nested fields of the children, on the list too, and the children edge.
    const list = await get(`/${MAIN_ACCOUNT_ID}/media`, { fields: 'id,children{id,media_type,media_url}', limit: '10' });
    const listed = list.data.find((m: { id: string }) => m.id === album.id);
    expect(listed.children.data[0]).toEqual({ id: album.children![0]!.id, media_type: 'IMAGE', media_url: album.children![0]!.fields.media_url });
    expect((await get(`/${album.id}/children`)).data).toEqual(album.children!.map((c) => ({ id: c.id })));
    const child = await get(`/${album.children![0]!.id}`, { fields: 'id,media_type,timestamp' });
    expect(child).toEqual({ id: album.children![0]!.id, media_type: 'IMAGE', timestamp: album.fields.timestamp });
    expect((await get(`/${album.children![0]!.id}/insights`, { metric: 'reach' })).error).toMatchObject({ code: 100 });
  });

  it('names Meta node types in errors', async () => {
    expect((await get(`/${MAIN_ACCOUNT_ID}`, { fields: 'colour' })).error.message).toBe(
      '(#100) Tried accessing nonexisting field (colour) on node type (IGUser)',
    );
    expect((await get(`/${media[0]!.id}`, { fields: 'colour' })).error.message).toBe(
      '(#100) Tried accessing nonexisting field (colour) on node type (IGMedia)',
    );
  });
});
