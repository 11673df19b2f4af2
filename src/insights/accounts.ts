/**
 * Business accounts a token reaches, and which one a command is about:
 * --account, then the graph-account setting, then the only account the
 * token reaches.
 *
 * Finding them takes one of three shapes (FIELD-NOTES, "Two hosts"):
 *
 * - `spec`: the spec's `/me/social_business_accounts`;
 * - `facebook`: graph.facebook.com with Facebook Login, the user's pages
 *   `GET /me/accounts?fields=instagram_business_account{id,username,name}`
 *   (`facebook-page`: a page token, whose `/me` is the page itself);
 * - `instagram`: graph.instagram.com with Instagram Login, `GET /me` is
 *   the token's own professional account.
 *
 * Which one is tried first: the graph-shape setting when not `auto`; else
 * the shape that answered last time at this graph-url (the profile keeps
 * it); else by host (graph.facebook.com, graph.instagram.com); else the
 * spec's edge first. A shape that answers "no such field" (code 100) gives
 * way to the next, so the common case costs the one call it always did.
 */
import { ConfigError, MiniappError } from '../errors.js';
import type { GraphClient } from './client.js';
import { GraphApiError } from './errors.js';

export interface BusinessAccount {
  id: string;
  name: string | undefined;
}

export type DiscoveryShape = 'spec' | 'facebook' | 'facebook-page' | 'instagram';
/** What the graph-shape setting takes. */
const GRAPH_SHAPE_SETTINGS = ['auto', 'spec', 'facebook', 'instagram'] as const;
export type GraphShapeSetting = (typeof GRAPH_SHAPE_SETTINGS)[number];

const IG_FIELDS = 'id,username,name';

type Item = { id?: unknown; name?: unknown; username?: unknown };
const idOf = (item: Item | undefined) => (typeof item?.id === 'string' || typeof item?.id === 'number' ? String(item.id) : undefined);
const nameOf = (item: Item) => (typeof item.name === 'string' ? item.name : typeof item.username === 'string' ? item.username : undefined);

function accountsOf(items: readonly Item[]): BusinessAccount[] {
  return items.flatMap((item) => {
    const id = idOf(item);
    return id === undefined ? [] : [{ id, name: nameOf(item) }];
  });
}

const READERS: Record<DiscoveryShape, (client: GraphClient) => Promise<BusinessAccount[]>> = {
  spec: async (client) => accountsOf(await client.list<Item>('me/social_business_accounts')),
  facebook: async (client) => {
    const pages = await client.list<{ instagram_business_account?: Item }>('me/accounts', { fields: `id,name,instagram_business_account{${IG_FIELDS}}` });
    return accountsOf(pages.flatMap((page) => (page.instagram_business_account ? [page.instagram_business_account] : [])));
  },
  'facebook-page': async (client) => {
    const page = await client.get<{ instagram_business_account?: Item }>('me', { fields: `id,name,instagram_business_account{${IG_FIELDS}}` });
    return accountsOf(page.instagram_business_account ? [page.instagram_business_account] : []);
  },
  instagram: async (client) => {
    const me = await client.get<Item & { user_id?: unknown }>('me', { fields: 'user_id,username,name' });
    const id = idOf({ id: me.user_id }) ?? idOf(me);
    return id === undefined ? [] : [{ id, name: nameOf(me) }];
  },
};

export interface DiscoveryHint {
  /** The graph-shape setting (default auto). */
  setting?: GraphShapeSetting | undefined;
  /** The shape that answered last time at this graph-url. */
  remembered?: DiscoveryShape | undefined;
}

/** The shapes to try, in order. */
export function discoveryOrder(client: GraphClient, hint: DiscoveryHint = {}): DiscoveryShape[] {
  const setting = hint.setting ?? 'auto';
  if (setting === 'spec') return ['spec'];
  if (setting === 'facebook') return hint.remembered === 'facebook-page' ? ['facebook-page', 'facebook'] : ['facebook', 'facebook-page'];
  if (setting === 'instagram') return ['instagram'];
  const host = client.root.hostname;
  const byHost: DiscoveryShape[] =
    host === 'graph.facebook.com'
      ? ['facebook', 'facebook-page']
      : host === 'graph.instagram.com'
        ? ['instagram']
        : ['spec', 'facebook', 'facebook-page', 'instagram'];
  return hint.remembered && byHost.includes(hint.remembered) ? [hint.remembered, ...byHost.filter((s) => s !== hint.remembered)] : byHost;
}

/** Whether an error says "this node has no such edge or field": the sign of another shape. */
function otherShape(error: unknown): boolean {
  return (
    error instanceof GraphApiError &&
    error.graph.code === 100 &&
    /nonexisting field|unknown path|does not exist|unsupported get request/i.test(error.graph.message)
  );
}

export async function discoverAccounts(client: GraphClient, hint: DiscoveryHint = {}): Promise<{ accounts: BusinessAccount[]; shape: DiscoveryShape }> {
  const order = discoveryOrder(client, hint);
  let first: unknown;
  for (const shape of order) {
    try {
      return { accounts: await READERS[shape](client), shape };
    } catch (error) {
      if (!otherShape(error)) throw error;
      first ??= error;
    }
  }
  throw new MiniappError(
    `no way of finding the business account worked at ${client.root.href.replace(/\/$/, '')} (tried ${order.join(', ')}): ${(first as Error).message}`,
    {
      hint: 'pass --account ID, or set graph-shape (spec, facebook or instagram) to the host you use',
    },
  );
}

export async function listBusinessAccounts(client: GraphClient, hint: DiscoveryHint = {}): Promise<BusinessAccount[]> {
  return (await discoverAccounts(client, hint)).accounts;
}

export interface ResolvedAccount {
  id: string;
  /** Where the ID came from: the flag, the setting, or the lookup (one call). */
  source: 'flag' | 'setting' | 'lookup';
  name?: string | undefined;
  /** The discovery shape that answered, for a lookup. */
  shape?: DiscoveryShape;
}

/** The account to read: the given one, or the only one the token reaches. */
export async function resolveAccount(
  client: GraphClient,
  given: { flag?: string | undefined; setting?: string | undefined },
  hint: DiscoveryHint = {},
): Promise<ResolvedAccount> {
  if (given.flag) return { id: given.flag, source: 'flag' };
  if (given.setting) return { id: given.setting, source: 'setting' };
  const { accounts, shape } = await discoverAccounts(client, hint);
  if (accounts.length === 1) return { id: accounts[0]!.id, source: 'lookup', name: accounts[0]!.name, shape };
  if (accounts.length === 0) {
    throw new MiniappError('the token reaches no business or creator account', {
      hint: 'convert the account to business or creator, link it to a page, and create a new token with access to that page',
    });
  }
  const list = accounts.map((a) => `  ${a.id}  ${a.name ?? ''}`.trimEnd()).join('\n');
  throw new ConfigError(`the token reaches ${accounts.length} business accounts; choose one:\n${list}`, {
    hint: 'pass --account ID, or store it with `miniapp config set graph-account ID` (or MINIAPP_GRAPH_ACCOUNT)',
  });
}
