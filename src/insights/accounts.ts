/**
 * Business accounts a token reaches (`/me/social_business_accounts`) and
 * which one a command is about: --account, then the graph-account
 * setting, then the only account the token reaches.
 */
import { ConfigError, MiniappError } from '../errors.js';
import type { GraphClient } from './client.js';

export interface BusinessAccount {
  id: string;
  name: string | undefined;
}

export async function listBusinessAccounts(client: GraphClient): Promise<BusinessAccount[]> {
  const items = await client.list<{ id?: unknown; name?: unknown }>('me/social_business_accounts');
  return items
    .filter((item) => typeof item.id === 'string' || typeof item.id === 'number')
    .map((item) => ({ id: String(item.id), name: typeof item.name === 'string' ? item.name : undefined }));
}

export interface ResolvedAccount {
  id: string;
  /** Where the ID came from: the flag, the setting, or the lookup (one call). */
  source: 'flag' | 'setting' | 'lookup';
  name?: string | undefined;
}

/** The account to read: the given one, or the only one the token reaches. */
export async function resolveAccount(client: GraphClient, given: { flag?: string | undefined; setting?: string | undefined }): Promise<ResolvedAccount> {
  if (given.flag) return { id: given.flag, source: 'flag' };
  if (given.setting) return { id: given.setting, source: 'setting' };
  const accounts = await listBusinessAccounts(client);
  if (accounts.length === 1) return { id: accounts[0]!.id, source: 'lookup', name: accounts[0]!.name };
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
