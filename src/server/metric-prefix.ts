/**
 * The name prefix of every series `miniapp serve` exposes. Kept apart from
 * metrics.ts so that `serve` can refuse a bad `--metrics-prefix` before it
 * loads prom-client and the servers.
 */
import { ConfigError } from '../errors.js';

export const DEFAULT_METRICS_PREFIX = 'miniapp_';

/**
 * Prometheus metric-name syntax without the colon, which is reserved for
 * recording rules (promtool flags it); names starting with `__` are
 * reserved for Prometheus itself. Empty is allowed: the bare names of the
 * spec and of go-grpc-prometheus, for stock dashboards.
 */
const PREFIX = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

export function checkMetricsPrefix(prefix: string): string {
  if (prefix === '') return prefix;
  if (!PREFIX.test(prefix) || prefix.startsWith('__')) {
    throw new ConfigError(`the metrics prefix must be letters, digits and underscores, not start with a digit or "__", such as "miniapp_"; got "${prefix}"`);
  }
  return prefix;
}
