/**
 * The graph's nodes as the sandbox renders them: IG Media (and album
 * children), IG User, and a Facebook page with its linked account; a field
 * a node does not have is Meta's error 100 naming the node type.
 */
import {
  MAIN_ACCOUNT_ID,
  SANDBOX_GRAPH_TOKENS,
  SANDBOX_PAGES,
  seedHash,
  type GraphData,
  type SandboxAccount,
  type SandboxChild,
  type SandboxMedia,
} from './data.js';
import type { FieldRequest } from './fields.js';
import { insightsFieldMetrics, mediaInsights } from './insights.js';
import { oauth, type Caller } from './request.js';

const MEDIA_FIELDS = new Set([
  'id',
  'caption',
  'media_type',
  'media_product_type',
  'timestamp',
  'permalink',
  'shortcode',
  'username',
  'media_url',
  'like_count',
  'comments_count',
  'thumbnail_url',
  'is_comment_enabled',
  'ig_id',
]);
/** What an album item answers: no counts, no caption, no insights. */
const CHILD_FIELDS = new Set(['id', 'media_type', 'media_url', 'permalink', 'shortcode', 'timestamp', 'username', 'ig_id', 'thumbnail_url']);
const ACCOUNT_FIELDS = new Set([
  'id',
  'name',
  'username',
  'biography',
  'profile_picture_url',
  'followers_count',
  'follows_count',
  'media_count',
  'ig_id',
  'website',
]);

export function renderMedia(item: SandboxMedia, fields: readonly FieldRequest[], caller: Caller): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    if (field.name === 'insights') {
      out.insights = { data: mediaInsights(item, insightsFieldMetrics(field), caller) };
    } else if (field.name === 'owner') {
      out.owner = { id: item.accountId };
    } else if (field.name === 'children') {
      // Albums only, as the real API: other media leave the field out.
      if (item.children) out.children = { data: item.children.map((child) => renderChild(child, field.children ?? [])) };
    } else if (MEDIA_FIELDS.has(field.name)) {
      const value = item.fields[field.name];
      if (value !== undefined) out[field.name] = value;
    } else {
      throw oauth(100, `(#100) Tried accessing nonexisting field (${field.name}) on node type (IGMedia)`);
    }
  }
  out.id = item.id;
  return out;
}

export function renderChild(child: SandboxChild, fields: readonly FieldRequest[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    if (field.name === 'owner') out.owner = { id: child.accountId };
    else if (CHILD_FIELDS.has(field.name)) {
      const value = child.fields[field.name];
      if (value !== undefined) out[field.name] = value;
    } else throw oauth(100, `(#100) Tried accessing nonexisting field (${field.name}) on node type (IGMedia)`);
  }
  out.id = child.id;
  return out;
}

/** A node of plain values: the asked fields it has, else the nonexisting-field error of its type. */
export function renderFields(values: Record<string, unknown>, fields: readonly FieldRequest[], type: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    if (!(field.name in values)) throw oauth(100, `(#100) Tried accessing nonexisting field (${field.name}) on node type (${type})`);
    out[field.name] = values[field.name];
  }
  out.id = values.id;
  return out;
}

/** A Facebook page (graph.facebook.com shape): its linked Instagram account, when it has one, as `instagram_business_account`. */
export function renderPage(pageId: string, fields: readonly FieldRequest[], data: GraphData): Record<string, unknown> {
  const linked = data.accounts.find((account) => account.pageId === pageId);
  const category = linked ? (linked.id === MAIN_ACCOUNT_ID ? 'Digital creator' : 'Shopping & retail') : 'Personal blog';
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    if (field.name === 'instagram_business_account') {
      if (linked) out.instagram_business_account = renderAccount(linked, field.children ?? [{ name: 'id', modifiers: {}, children: undefined }]);
    } else if (field.name === 'name') out.name = linked?.pageName ?? 'Sandbox Notes Page';
    else if (field.name === 'access_token') {
      // The page token of the first page is the sandbox's page token; it issues none for the others.
      if (pageId === SANDBOX_PAGES.main) out.access_token = SANDBOX_GRAPH_TOKENS.page;
    } else if (field.name === 'category') out.category = category;
    else if (field.name === 'category_list') out.category_list = [{ id: String(2_000 + (seedHash(category) % 1_000)), name: category }];
    else if (field.name === 'tasks') out.tasks = ['ADVERTISE', 'ANALYZE', 'CREATE_CONTENT', 'MESSAGING', 'MODERATE', 'MANAGE'];
    else if (field.name !== 'id') throw oauth(100, `(#100) Tried accessing nonexisting field (${field.name}) on node type (Page)`);
  }
  out.id = pageId;
  return out;
}

export function renderAccount(account: SandboxAccount, fields: readonly FieldRequest[]): Record<string, unknown> {
  const values: Record<string, unknown> = {
    id: account.id,
    name: account.name,
    username: account.username,
    biography: account.biography,
    profile_picture_url: account.profilePictureUrl,
    followers_count: account.followersCount,
    follows_count: account.followsCount,
    media_count: account.media.length,
    ig_id: account.igId,
    website: `https://${account.username.replace('.', '-')}.example`,
  };
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    if (!ACCOUNT_FIELDS.has(field.name)) {
      throw oauth(100, `(#100) Tried accessing nonexisting field (${field.name}) on node type (IGUser)`);
    }
    out[field.name] = values[field.name];
  }
  out.id = account.id;
  return out;
}
