/**
 * What `miniapp monitor dashboard` shows, computed from serve's metric
 * snapshots (monitoring.v1 StreamMetrics: `name{label="v"}` -> value):
 * rates between two snapshots, the p99 of a histogram's buckets that
 * filled between them, and a history of each for the sparklines. Names are
 * matched by their ending, so any `--metrics-prefix` of serve works.
 * Pure data: the screen is dashboard.ts.
 */

export interface Series {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** `name{a="1",b="x"}` into its parts (the exposition syntax serve's snapshots use). */
export function parseSeries(key: string, value: number): Series {
  const brace = key.indexOf('{');
  if (brace < 0) return { name: key, labels: {}, value };
  const labels: Record<string, string> = {};
  const pattern = /([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
  for (const match of key.slice(brace).matchAll(pattern)) labels[match[1]!] = match[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
  return { name: key.slice(0, brace), labels, value };
}

/** The series whose metric name is `suffix` after serve's prefix (`miniapp_` or another). */
function named(snapshot: readonly Series[], suffix: string): Series[] {
  return snapshot.filter((s) => s.name === suffix || s.name.endsWith(`_${suffix}`));
}

function sum(series: readonly Series[]): number {
  return series.reduce((total, s) => total + s.value, 0);
}

/** Buckets of a histogram summed over every label but `le`: upper bound -> cumulative count. */
function buckets(snapshot: readonly Series[], histogram: string): Map<number, number> {
  const out = new Map<number, number>();
  for (const s of named(snapshot, `${histogram}_bucket`)) {
    const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
    if (Number.isNaN(le)) continue;
    out.set(le, (out.get(le) ?? 0) + s.value);
  }
  return out;
}

/**
 * The `q` quantile, in seconds, of what fell into the buckets between two
 * snapshots (Prometheus's histogram_quantile: linear inside the bucket);
 * undefined when nothing was observed.
 */
export function quantileBetween(before: Map<number, number> | undefined, after: Map<number, number>, q: number): number | undefined {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const counts = bounds.map((le) => Math.max(0, (after.get(le) ?? 0) - (before?.get(le) ?? 0)));
  const total = counts.at(-1) ?? 0;
  if (total <= 0) return undefined;
  const rank = q * total;
  for (let i = 0; i < bounds.length; i++) {
    if (counts[i]! >= rank) {
      const upper = bounds[i]!;
      const lower = i === 0 ? 0 : bounds[i - 1]!;
      if (upper === Infinity) return lower;
      const below = i === 0 ? 0 : counts[i - 1]!;
      const inBucket = counts[i]! - below;
      return inBucket <= 0 ? upper : lower + ((upper - lower) * (rank - below)) / inBucket;
    }
  }
  return bounds.at(-2);
}

interface Snapshot {
  at: number;
  series: Series[];
}

export interface DashboardPoint {
  at: number;
  httpRate: number;
  grpcRate: number;
  httpP99: number | undefined;
  grpcP99: number | undefined;
  ordersPerMinute: number;
  paymentsPerMinute: number;
}

export interface DashboardState {
  /** Points, oldest first, one per snapshot after the first of a connection. */
  history: DashboardPoint[];
  /** The latest gauges. */
  httpInFlight: number | undefined;
  grpcInFlight: number | undefined;
  webhooksPending: number | undefined;
  ready: boolean | undefined;
  /** Errors within the history's time span: HTTP status / gRPC code -> count. */
  httpErrors: Map<string, number>;
  grpcErrors: Map<string, number>;
  /** Webhook attempts that did not deliver (retry_scheduled, failed) within the span. */
  webhooksFailing: number;
  /** How long the history spans, in ms. */
  spanMs: number;
}

/** Counts by a label within a set of series (errors by status). */
function countsBy(series: readonly Series[], label: string, keep: (value: string) => boolean): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of series) {
    const key = s.labels[label];
    if (key === undefined || !keep(key)) continue;
    out.set(key, (out.get(key) ?? 0) + s.value);
  }
  return out;
}

function minus(after: Map<string, number>, before: Map<string, number> | undefined): Map<string, number> {
  const out = new Map<string, number>();
  for (const [key, value] of after) {
    const delta = value - (before?.get(key) ?? 0);
    if (delta > 0) out.set(key, delta);
  }
  return out;
}

const httpError = (status: string) => Number(status) >= 400;
const MONITORING_SERVICE = 'monitoring.v1.MonitoringService';
const grpcError = (code: string) => code !== 'OK';

/**
 * The dashboard's numbers over the last `windowMs`. A new connection (serve
 * restarted: its counters start again from zero) starts a new baseline
 * rather than reading the drop as a negative rate; the history stays.
 */
export class DashboardModel {
  readonly #windowMs: number;
  readonly #history: DashboardPoint[] = [];
  /** The snapshot of the window's start, for the error counts, and the previous one, for rates. */
  #windowStart: Snapshot[] = [];
  #previous: Snapshot | undefined;
  #latest: Snapshot | undefined;

  constructor(windowMs: number) {
    this.#windowMs = windowMs;
  }

  /** Serve was reconnected to: its counters are new. */
  restart(): void {
    this.#previous = undefined;
    this.#windowStart = [];
  }

  add(at: number, metrics: Record<string, number>): void {
    const snapshot: Snapshot = { at, series: Object.entries(metrics).map(([key, value]) => parseSeries(key, value)) };
    const previous = this.#previous;
    this.#previous = snapshot;
    this.#latest = snapshot;
    this.#windowStart.push(snapshot);
    while (this.#windowStart.length > 1 && at - this.#windowStart[0]!.at > this.#windowMs) this.#windowStart.shift();
    if (!previous) return;
    const seconds = Math.max((at - previous.at) / 1000, 0.001);
    const rate = (suffix: string) => Math.max(0, sum(named(snapshot.series, suffix)) - sum(named(previous.series, suffix))) / seconds;
    this.#history.push({
      at,
      httpRate: rate('http_requests_total'),
      grpcRate: rate('grpc_server_handled_total'),
      httpP99: quantileBetween(buckets(previous.series, 'http_request_duration_seconds'), buckets(snapshot.series, 'http_request_duration_seconds'), 0.99),
      grpcP99: quantileBetween(buckets(previous.series, 'grpc_server_handling_seconds'), buckets(snapshot.series, 'grpc_server_handling_seconds'), 0.99),
      // Orders are counted by status at each scrape: their sum grows by the orders placed.
      ordersPerMinute: rate('orders') * 60,
      paymentsPerMinute: rate('payments_total') * 60,
    });
    while (this.#history.length > 1 && at - this.#history[0]!.at > this.#windowMs) this.#history.shift();
  }

  state(): DashboardState {
    const latest = this.#latest?.series ?? [];
    const first = this.#windowStart[0];
    const gauge = (suffix: string) => {
      const found = named(latest, suffix);
      return found.length === 0 ? undefined : sum(found);
    };
    // Calls in flight but the monitoring service's streams (this dashboard's own among them, open as long as it runs).
    // A counter without series yet has counted nothing: serve had no gRPC call.
    const calls = (suffix: string) => sum(named(latest, suffix).filter((s) => s.labels.grpc_service !== MONITORING_SERVICE));
    const started = latest.length === 0 ? undefined : calls('grpc_server_started_total');
    const handled = latest.length === 0 ? undefined : calls('grpc_server_handled_total');
    const failing = (series: readonly Series[]) => sum(named(series, 'webhook_attempts_total').filter((s) => s.labels.outcome !== 'delivered'));
    const ready = gauge('ready');
    return {
      history: [...this.#history],
      httpInFlight: gauge('http_requests_in_flight'),
      grpcInFlight: started === undefined || handled === undefined ? undefined : Math.max(0, started - handled),
      webhooksPending: gauge('webhook_deliveries_pending'),
      ready: ready === undefined ? undefined : ready > 0,
      httpErrors: minus(
        countsBy(named(latest, 'http_requests_total'), 'status', httpError),
        first && countsBy(named(first.series, 'http_requests_total'), 'status', httpError),
      ),
      grpcErrors: minus(
        countsBy(named(latest, 'grpc_server_handled_total'), 'grpc_code', grpcError),
        first && countsBy(named(first.series, 'grpc_server_handled_total'), 'grpc_code', grpcError),
      ),
      webhooksFailing: Math.max(0, failing(latest) - (first ? failing(first.series) : 0)),
      spanMs: first && this.#latest ? this.#latest.at - first.at : 0,
    };
  }
}
