import { UsageError } from '../errors.js';

/** The spec's two referrers; any casing is accepted (the SDK's types say SANDBOX). */
export function normalizeReferrer(value: string): 'DEFAULT' | 'sandbox' {
  const lower = value.trim().toLowerCase();
  if (lower === 'default') return 'DEFAULT';
  if (lower === 'sandbox') return 'sandbox';
  throw new UsageError(`unknown referrer "${value}": use DEFAULT (production host app) or sandbox`);
}
