/**
 * Where the partner endpoints live under the base URL. The spec writes
 * `/api-partner/v1/miniapp/user/oauth2`, and that stays the default; the
 * production service is reported at `/api-partner/v1/apps-in-toss/user/oauth2`
 * (FIELD-NOTES, "Path prefix"). Both have a one-word name, so a user of the
 * production service writes `path-prefix production` rather than the path.
 */
import { ConfigError } from '../errors.js';

export const PARTNER_PREFIXES = {
  /** The spec's prefix: the default. */
  spec: '/api-partner/v1/miniapp/user/oauth2',
  /** Where the production partner API answers. */
  production: '/api-partner/v1/apps-in-toss/user/oauth2',
} as const;

export type PartnerPrefixName = keyof typeof PARTNER_PREFIXES;

export const DEFAULT_PARTNER_PREFIX = PARTNER_PREFIXES.spec;

/** The one-word name of a prefix, if it has one. */
export function prefixName(path: string): PartnerPrefixName | undefined {
  return (Object.keys(PARTNER_PREFIXES) as PartnerPrefixName[]).find((name) => PARTNER_PREFIXES[name] === path);
}

/**
 * A prefix as written in a setting or a flag: `spec`, `production` (any
 * casing), or a URL path starting with "/"; returns the path, without a
 * trailing slash.
 */
export function resolvePartnerPrefix(value: string, name = 'path-prefix'): string {
  const trimmed = value.trim();
  const word = trimmed.toLowerCase();
  if (Object.hasOwn(PARTNER_PREFIXES, word)) return PARTNER_PREFIXES[word as PartnerPrefixName];
  if (!/^\/[A-Za-z0-9._~\-/]*$/.test(trimmed)) {
    throw new ConfigError(`${name} must be spec, production or a URL path starting with "/"; got "${value}"`, {
      hint: `production is ${PARTNER_PREFIXES.production}; spec (the default) is ${PARTNER_PREFIXES.spec}`,
    });
  }
  return trimmed.replace(/\/+$/, '') || '/';
}
