/**
 * Prometheus metrics of `miniapp serve`: one prom-client registry and one
 * name prefix (`miniapp_` by default) for every series. HTTP requests by
 * route template; gRPC calls as go-grpc-prometheus names them, plus the
 * spec's grpc_requests_total and grpc_request_duration_seconds; partner-API
 * calls; webhook attempts and the outbox; prom-client's process and Node.js
 * metrics. Served as Prometheus text, or as OpenMetrics to a scraper that
 * asks for it, from the same metric objects.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type Metric, type OpenMetricsContentType } from 'prom-client';
import type { GrpcLabel, GrpcMetrics } from '../grpc/server.js';
import type { PartnerCallObserver } from '../login/partner-client.js';
import type { WebhookAttemptObserver } from '../webhooks/dispatcher.js';
import type { CommerceObserver } from '../commerce/payment/payments.js';
import { ORDER_STATUSES } from '../commerce/order/order-rows.js';
import { checkMetricsPrefix, DEFAULT_METRICS_PREFIX } from './metric-prefix.js';

/** Seconds, from a millisecond up to the 10 s time-outs of the partner client and the webhook sender. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** go-grpc-prometheus's buckets (Prometheus's DefBuckets), so that its dashboards' quantiles mean the same. */
const GRPC_HANDLING_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

type HttpLabel = 'method' | 'route' | 'status';

interface HttpMetrics {
  requests: Counter<HttpLabel>;
  duration: Histogram<HttpLabel>;
  inFlight: Gauge;
}

export interface Metrics {
  registry: Registry;
  prefix: string;
  grpc: GrpcMetrics;
  http: HttpMetrics;
  /** For PartnerClient's `observe`. */
  observeUpstream: PartnerCallObserver;
  /** For WebhookDispatcher's `observe`. */
  observeWebhook: WebhookAttemptObserver;
  /** For the commerce services' `observe`: payments by outcome and amount, refunds, reservation expiries. */
  observeCommerce: CommerceObserver;
  /** Every series, in OpenMetrics when `accept` prefers it, else in the Prometheus text format. */
  scrape(accept?: string): Promise<{ contentType: string; body: string }>;
}

export interface MetricsOptions {
  /** Default `miniapp_`; empty gives the bare names. */
  prefix?: string;
  /** How many webhook deliveries are pending, asked at each scrape. */
  pendingWebhooks?: () => number | Promise<number>;
  /** How many orders are in each status, asked at each scrape. */
  ordersByStatus?: () => Promise<Record<string, number>>;
  /** Whether the instance is ready (its database answers, it is not draining), asked at each scrape. */
  ready?: () => boolean;
}

/**
 * prom-client's three gauges whose `_total` suffix promtool rejects (it
 * means a counter). Each is the sum over `type` of its namesake gauge; they
 * come back under an `_all` name so that a single series stays at hand.
 */
const TOTAL_GAUGES: readonly { from: string; to: string; help: string; count: (() => number) | undefined }[] = [
  {
    from: 'nodejs_active_handles_total',
    to: 'nodejs_active_handles_all',
    help: 'Active libuv handles of every type, a count (nodejs_active_handles summed over type).',
    count: countOf((process as unknown as { _getActiveHandles?: () => unknown[] })._getActiveHandles),
  },
  {
    from: 'nodejs_active_requests_total',
    to: 'nodejs_active_requests_all',
    help: 'Active libuv requests of every type, a count (nodejs_active_requests summed over type).',
    count: countOf((process as unknown as { _getActiveRequests?: () => unknown[] })._getActiveRequests),
  },
  {
    from: 'nodejs_active_resources_total',
    to: 'nodejs_active_resources_all',
    help: 'Resources of every type that keep the event loop alive, a count (nodejs_active_resources summed over type).',
    count: countOf(process.getActiveResourcesInfo),
  },
];

function countOf(list: (() => unknown[]) | undefined): (() => number) | undefined {
  return typeof list === 'function' ? () => list.call(process).length : undefined;
}

export function createMetrics(options: MetricsOptions = {}): Metrics {
  const prefix = checkMetricsPrefix(options.prefix ?? DEFAULT_METRICS_PREFIX);
  const registry = new Registry();
  const registers = [registry];
  collectDefaultMetrics({ register: registry, prefix });
  for (const gauge of TOTAL_GAUGES) {
    if (!registry.getSingleMetric(prefix + gauge.from)) continue;
    registry.removeSingleMetric(prefix + gauge.from);
    const count = gauge.count;
    if (!count) continue;
    new Gauge({
      name: prefix + gauge.to,
      help: gauge.help,
      registers,
      collect() {
        this.set(count());
      },
    });
  }

  const grpcLabels: GrpcLabel[] = ['grpc_type', 'grpc_service', 'grpc_method'];
  const grpcFlushes: (() => void)[] = [];
  // Each counter's read flushes all five: the others are then flushed already, and flushing again finds nothing.
  const flushGrpc = () => {
    for (const flush of grpcFlushes) flush();
  };
  const grpc: GrpcMetrics = {
    started: new Counter({
      name: `${prefix}grpc_server_started_total`,
      help: 'gRPC calls started on the server, a count by type, service and method.',
      labelNames: grpcLabels,
      registers,
      collect: flushGrpc,
    }),
    handled: new Counter({
      name: `${prefix}grpc_server_handled_total`,
      help: 'gRPC calls completed on the server, a count by type, service, method and status code (OK, NotFound, ...), failures included.',
      labelNames: [...grpcLabels, 'grpc_code'],
      registers,
      collect: flushGrpc,
    }),
    received: new Counter({
      name: `${prefix}grpc_server_msg_received_total`,
      help: 'Request messages received by the server, a count by type, service and method.',
      labelNames: grpcLabels,
      registers,
      collect: flushGrpc,
    }),
    sent: new Counter({
      name: `${prefix}grpc_server_msg_sent_total`,
      help: 'Response messages sent by the server, a count by type, service and method.',
      labelNames: grpcLabels,
      registers,
      collect: flushGrpc,
    }),
    handling: new Histogram({
      name: `${prefix}grpc_server_handling_seconds`,
      help: 'Time from the start of a gRPC call to its status, in seconds, by type, service and method.',
      labelNames: grpcLabels,
      buckets: GRPC_HANDLING_BUCKETS,
      registers,
    }),
    requests: new Counter({
      name: `${prefix}grpc_requests_total`,
      help: 'gRPC calls handled, a count by full method name and status (OK or the status-code name, such as NOT_FOUND).',
      labelNames: ['method', 'status'],
      registers,
      collect: flushGrpc,
    }),
    duration: new Histogram({
      name: `${prefix}grpc_request_duration_seconds`,
      help: 'Time from the start of a gRPC call to its status, in seconds, by full method name.',
      labelNames: ['method'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    flushBeforeRead: (flush) => void grpcFlushes.push(flush),
  };

  const httpLabels: HttpLabel[] = ['method', 'route', 'status'];
  const http: HttpMetrics = {
    requests: new Counter({
      name: `${prefix}http_requests_total`,
      help: 'HTTP requests answered, a count by method, route template and status code.',
      labelNames: httpLabels,
      registers,
    }),
    duration: new Histogram({
      name: `${prefix}http_request_duration_seconds`,
      help: 'Time from the arrival of an HTTP request to the end of its response, in seconds, by method, route template and status code.',
      labelNames: httpLabels,
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    inFlight: new Gauge({
      name: `${prefix}http_requests_in_flight`,
      help: 'HTTP requests received and not yet answered, a count.',
      registers,
    }),
  };

  const upstreamRequests = new Counter({
    name: `${prefix}upstream_requests_total`,
    help: 'Calls to the partner API, a count by endpoint and outcome (ok, api_error, bad_response, timeout, unreachable, tls, transport_error).',
    labelNames: ['endpoint', 'outcome'],
    registers,
  });
  const upstreamDuration = new Histogram({
    name: `${prefix}upstream_request_duration_seconds`,
    help: 'Time from sending a partner-API call to reading its answer (or its failure), in seconds, by endpoint.',
    labelNames: ['endpoint'],
    buckets: LATENCY_BUCKETS,
    registers,
  });

  const webhookAttempts = new Counter({
    name: `${prefix}webhook_attempts_total`,
    help: 'Webhook delivery attempts, a count by event and what the attempt led to (delivered, retry_scheduled, failed: no attempts left).',
    labelNames: ['event', 'outcome'],
    registers,
  });
  const webhookDuration = new Histogram({
    name: `${prefix}webhook_attempt_duration_seconds`,
    help: 'Time a webhook request took, answered or not, in seconds, by event.',
    labelNames: ['event'],
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const pending = options.pendingWebhooks;
  if (pending) {
    new Gauge({
      name: `${prefix}webhook_deliveries_pending`,
      help: 'Webhook deliveries in the outbox waiting for an attempt (due now or retrying later), a count read at scrape time.',
      registers,
      async collect() {
        // A database that cannot answer now leaves the last count: the rest of the scrape is still worth having.
        const count = await Promise.resolve()
          .then(pending)
          .catch(() => undefined);
        if (count !== undefined) this.set(count);
      },
    });
  }

  const ready = options.ready;
  if (ready) {
    new Gauge({
      name: `${prefix}ready`,
      help: 'Whether this instance is ready for traffic, as /health/ready answers: 1 while its database answers and it is not draining, else 0.',
      registers,
      collect() {
        this.set(ready() ? 1 : 0);
      },
    });
  }

  const byStatus = options.ordersByStatus;
  if (byStatus) {
    new Gauge({
      name: `${prefix}orders`,
      help: `Orders of the commerce services, a count by status (${ORDER_STATUSES.join(', ')}), read at scrape time.`,
      labelNames: ['status'],
      registers,
      async collect() {
        // As the pending webhooks: a database that cannot answer now leaves the last counts.
        const counts = await byStatus().catch(() => undefined);
        for (const [status, count] of Object.entries(counts ?? {})) this.set({ status }, count);
      },
    });
  }
  const payments = new Counter({
    name: `${prefix}payments_total`,
    help: 'Payment attempts answered by the provider, a count by outcome (approved, declined, unknown: no answer, reconciled later) and currency.',
    labelNames: ['outcome', 'currency'],
    registers,
  });
  const paymentAmount = new Counter({
    name: `${prefix}payment_amount_total`,
    help: 'Money of payment attempts, in minor units of the currency (KRW has none), by outcome and currency.',
    labelNames: ['outcome', 'currency'],
    registers,
  });
  const refundAmount = new Counter({
    name: `${prefix}refund_amount_total`,
    help: 'Money refunded, in minor units of the currency, by currency.',
    labelNames: ['currency'],
    registers,
  });
  const expiries = new Counter({
    name: `${prefix}reservation_expiries_total`,
    help: 'Stock reservations that ran out unpaid and gave their units back, a count.',
    registers,
  });

  return {
    registry,
    prefix,
    observeCommerce: {
      payment: (outcome, currency, amount) => {
        payments.inc({ outcome, currency });
        paymentAmount.inc({ outcome, currency }, amount);
      },
      refund: (currency, amount) => refundAmount.inc({ currency }, amount),
      expiries: (count) => expiries.inc(count),
    },
    grpc,
    http,
    observeUpstream: ({ endpoint, outcome, seconds }) => {
      upstreamRequests.inc({ endpoint, outcome });
      upstreamDuration.observe({ endpoint }, seconds);
    },
    observeWebhook: ({ event, outcome, seconds }) => {
      webhookAttempts.inc({ event, outcome });
      webhookDuration.observe({ event }, seconds);
    },
    scrape: async (accept) =>
      prefersOpenMetrics(accept)
        ? { contentType: Registry.OPENMETRICS_CONTENT_TYPE, body: await openMetricsText(registry) }
        : { contentType: registry.contentType, body: await registry.metrics() },
  };
}

/**
 * Whether an Accept header ranks OpenMetrics (any version) at least as high
 * as the Prometheus text format. Prometheus sends, for example,
 * `application/openmetrics-text;version=1.0.0,...,text/plain;version=0.0.4;q=0.5,*\/*;q=0.1`.
 */
function prefersOpenMetrics(accept: string | undefined): boolean {
  if (!accept) return false;
  let openMetrics = 0;
  let text = 0;
  for (const range of accept.split(',')) {
    const [type = '', ...parameters] = range.split(';').map((part) => part.trim().toLowerCase());
    const q = parameters.find((parameter) => parameter.startsWith('q='));
    const weight = q === undefined ? 1 : Number(q.slice(2));
    if (!(weight > 0)) continue;
    if (type === 'application/openmetrics-text') openMetrics = Math.max(openMetrics, weight);
    else if (type === 'text/plain' || type === 'text/*' || type === '*/*') text = Math.max(text, weight);
  }
  return openMetrics > 0 && openMetrics >= text;
}

/**
 * prom-client writes OpenMetrics only from a registry made for it, and on
 * the way renames each counter object itself (drops its `_total`), which
 * would break the Prometheus text written from the same objects later. So
 * each OpenMetrics scrape builds a throw-away registry of stand-ins, each
 * reading its metric's current values under the family name OpenMetrics
 * wants.
 */
async function openMetricsText(registry: Registry): Promise<string> {
  const openMetrics = new Registry<OpenMetricsContentType>();
  openMetrics.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
  for (const metric of registry.getMetricsAsArray() as Family[]) {
    // prom-client's typings call `type` an enum; at run time it is the exposition's word.
    const name = String(metric.type) === 'counter' ? metric.name.replace(/_total$/, '') : metric.name;
    const standIn = { name, help: metric.help, type: metric.type, get: async () => ({ ...(await metric.get()), name }) };
    openMetrics.registerMetric(standIn as unknown as Metric);
  }
  return openMetrics.metrics();
}

type Family = ReturnType<Registry['getMetricsAsArray']>[number] & { get(): Promise<object> };
