/** Stored tokens live in the profile, beside its settings, through the same config file. */
import type { StoredTokens, TokenStore } from '../login/session.js';
import type { ConfigStore } from './store.js';

const SECTION = 'tokens';

export function profileTokenStore(store: ConfigStore, profile: string): TokenStore {
  return {
    load: () => store.getSection<StoredTokens>(profile, SECTION),
    save: (tokens) => store.setSection(profile, SECTION, tokens),
    clear: () => store.setSection(profile, SECTION, undefined),
  };
}
