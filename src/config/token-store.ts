/**
 * Stored tokens live in the profile, beside its settings, through the same
 * config file: read without conf, written through it (loaded on the first
 * write only, so `token show` never loads it).
 */
import type { StoredTokens, TokenStore } from '../login/session.js';
import type { ConfigFile } from './file.js';
import type { ConfigStore } from './store.js';

const SECTION = 'tokens';

export function profileTokenStore(file: ConfigFile, openStore: () => Promise<ConfigStore>, profile: string): TokenStore {
  return {
    load: () => file.getSection<StoredTokens>(profile, SECTION),
    save: async (tokens) => (await openStore()).setSection(profile, SECTION, tokens),
    clear: async () => (await openStore()).setSection(profile, SECTION, undefined),
  };
}
