/**
 * The gRPC server of `miniapp serve`: the services it is given (UserService,
 * MonitoringService, ...), the standard health service, server reflection
 * of the real proto files, optional TLS, a receive-size limit, per-call
 * metrics observed from the one interceptor of the request checks, and a
 * graceful shutdown with a deadline.
 */
import * as grpc from '@grpc/grpc-js';
import type { Counter, Histogram } from 'prom-client';
import { serviceDefinitions, type ServiceName } from './protos.js';
import { HealthService } from './health.js';
import { addReflection } from './reflection.js';
import { RequestCheckingServer, type CallObserver, type ObserveCall } from './request-check.js';
import { failStream, goCodeName, rpcType, SHUTTING_DOWN, statusName } from './status.js';
import { tracingInterceptor } from './tracing.js';
import type { Telemetry } from '../telemetry/telemetry.js';
import type { RequestRates } from '../auth/request-rates.js';

export type GrpcLabel = 'grpc_type' | 'grpc_service' | 'grpc_method';

/** The counters and histograms serve's metrics (server/metrics.ts) give the gRPC server for its calls. */
export interface GrpcMetrics {
  started: Counter<GrpcLabel>;
  handled: Counter<GrpcLabel | 'grpc_code'>;
  received: Counter<GrpcLabel>;
  sent: Counter<GrpcLabel>;
  handling: Histogram<GrpcLabel>;
  /** The spec's contract; `method` is the full name, such as user.v1.UserService/GetUser. */
  requests: Counter<'method' | 'status'>;
  duration: Histogram<'method'>;
  /**
   * Has `flush` called before every read of the five counters above (a
   * scrape, the monitoring service), so that the per-call observer may
   * count in plain numbers and add them to the counters only then: a
   * prom-client update builds and looks up a label string each time, and
   * five of them on every call cost more than the call's own bookkeeping.
   */
  flushBeforeRead(flush: () => void): void;
}

/**
 * What one connection may hold, and how long (the README's limits): grpc-js
 * leaves every one unbounded. The reset budget is session-guard.ts's.
 * - streams open at once on one connection (a grpc-js client queues past it);
 * - a ping every minute, and the connection closed when 20 s pass without its
 *   answer: a peer that is gone, or a session that no longer reads;
 * - a connection with no call for 5 minutes is closed (GOAWAY NO_ERROR, the
 *   client reconnects when it next calls);
 * - after 30 minutes (±10%) a connection takes no new calls: its client
 *   reconnects, so load spreads over new instances; the streams it has run
 *   on to their end (no grace limit: a watch is meant to last).
 */
const CONNECTION_BOUNDS = {
  'grpc.max_concurrent_streams': 1_000,
  'grpc.keepalive_time_ms': 60_000,
  'grpc.keepalive_timeout_ms': 20_000,
  'grpc.max_connection_idle_ms': 5 * 60_000,
  'grpc.max_connection_age_ms': 30 * 60_000,
} as const;
const MAX_RECEIVE_BYTES = 4 * 1024 * 1024;
const HEALTH_SERVICE = 'grpc.health.v1.Health';
const REFLECTION_SERVICES = ['grpc.reflection.v1.ServerReflection', 'grpc.reflection.v1alpha.ServerReflection'];

interface GrpcService {
  name: Exclude<ServiceName, typeof HEALTH_SERVICE>;
  handlers: grpc.UntypedServiceImplementation;
}

export interface GrpcServerOptions {
  host: string;
  port: number;
  services: readonly GrpcService[];
  metrics: GrpcMetrics;
  tls?: { cert: string; key: string } | undefined;
  /** Called when shutdown starts, before waiting: end the streams that never end by themselves. */
  onShutdown?: () => void;
  /** Where each finished call is logged (method, status, duration; never metadata or messages). */
  log?: CallLog | undefined;
  /** A span for every call (tracing.ts); none when tracing is off. */
  telemetry?: Telemetry | undefined;
  /** Request rates per token or address on every service but health and reflection; none when absent. */
  rates?: RequestRates | undefined;
}

interface CallLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export interface RunningGrpcServer {
  server: grpc.Server;
  port: number;
  address: string;
  health: HealthService;
  /** Every service the server answers, by full name (what reflection lists). */
  services: string[];
  /** SERVING or NOT_SERVING for the server and every service (readiness: the database answers, or not). */
  setServing(serving: boolean): void;
  /** Stops accepting calls, lets running ones finish until `deadlineMs`, then cancels the rest. */
  shutdown(deadlineMs?: number): Promise<void>;
  /** Cancels every call now, and ends a shutdown that is waiting for them (an operator's second signal). */
  cancelAll(): void;
}

/** The label sets of one method, and of its finished calls by status code; the counts not yet added to the counters. */
interface MethodSeries {
  labels: { grpc_type: string; grpc_service: string; grpc_method: string };
  method: { method: string };
  finished: Map<grpc.status, FinishedSeries>;
  started: number;
  received: number;
  sent: number;
}

interface FinishedSeries {
  handled: MethodSeries['labels'] & { grpc_code: string };
  requests: { method: string; status: string };
  /** Calls ended with this code since the last flush: handled and requests both. */
  count: number;
}

const SERVER_FAULTS = new Set([grpc.status.INTERNAL, grpc.status.UNKNOWN, grpc.status.DATA_LOSS, grpc.status.UNAVAILABLE]);

/** One call as the metrics and the log see it: one object per call, its methods shared. */
class ObservedCall implements CallObserver {
  readonly #started = performance.now();

  constructor(
    readonly path: string,
    readonly series: MethodSeries,
    readonly observations: CallObservations,
  ) {
    series.started++;
  }

  received(): void {
    this.series.received++;
  }

  sent(): void {
    this.series.sent++;
  }

  finished(code: grpc.status): void {
    const seconds = (performance.now() - this.#started) / 1000;
    const { metrics, log } = this.observations;
    const of = this.series;
    this.observations.finishedOf(of, code).count++;
    metrics.handling.observe(of.labels, seconds);
    metrics.duration.observe(of.method, seconds);
    if (log) {
      const fields = { method: this.path, type: of.labels.grpc_type, code: statusName(code), durationMs: Math.round(seconds * 10_000) / 10 };
      // A stream that the shutdown ends with UNAVAILABLE (for its client to reconnect elsewhere) is the plan, not a fault.
      if (code === grpc.status.UNAVAILABLE && this.observations.stopping) log.info(fields, 'grpc call ended by the shutdown');
      else if (SERVER_FAULTS.has(code)) log.warn(fields, 'grpc call failed');
      else log.info(fields, 'grpc call');
    }
  }
}

/**
 * Counts and times every call twice over: as go-grpc-prometheus does
 * (started, handled by code, messages each way, handling time), and as the
 * spec's two families; and with a log, one line per finished call (warn for
 * server-side failures, info otherwise). It observes from the one
 * interceptor layer of the request checks (request-check.ts): each layer
 * costs every call. A call ends at its status, or at its cancellation.
 *
 * The counts are plain numbers per label set, added to the prom-client
 * counters before each read of them (GrpcMetrics.flushBeforeRead); the two
 * histograms are observed as each call ends.
 */
class CallObservations {
  // Label objects are built once per method and code, not per call: a fresh object costs
  // more than prom-client's update (about 2.5 us against 0.3 us). Only registered
  // methods reach interceptors, so the map stays small.
  readonly #series = new Map<string, MethodSeries>();
  /** Set when the server's shutdown starts: the streams it ends from then on end by plan. */
  stopping = false;

  constructor(
    readonly metrics: GrpcMetrics,
    readonly log: CallLog | undefined,
  ) {
    metrics.flushBeforeRead(() => this.#flush());
  }

  readonly observe: ObserveCall = (descriptor) => new ObservedCall(descriptor.path, this.#seriesOf(descriptor), this);

  #seriesOf(descriptor: grpc.ServerMethodDefinition<unknown, unknown>): MethodSeries {
    let found = this.#series.get(descriptor.path);
    if (!found) {
      const method = descriptor.path.slice(1);
      const slash = method.lastIndexOf('/');
      const labels = { grpc_type: rpcType(descriptor), grpc_service: method.slice(0, slash), grpc_method: method.slice(slash + 1) };
      found = { labels, method: { method }, finished: new Map(), started: 0, received: 0, sent: 0 };
      this.#series.set(descriptor.path, found);
    }
    return found;
  }

  finishedOf(of: MethodSeries, code: grpc.status): FinishedSeries {
    let found = of.finished.get(code);
    if (!found) {
      found = { handled: { ...of.labels, grpc_code: goCodeName(code) }, requests: { method: of.method.method, status: statusName(code) }, count: 0 };
      of.finished.set(code, found);
    }
    return found;
  }

  #flush(): void {
    const { metrics } = this;
    for (const of of this.#series.values()) {
      if (of.started) metrics.started.inc(of.labels, of.started);
      if (of.received) metrics.received.inc(of.labels, of.received);
      if (of.sent) metrics.sent.inc(of.labels, of.sent);
      of.started = of.received = of.sent = 0;
      for (const finished of of.finished.values()) {
        if (!finished.count) continue;
        metrics.handled.inc(finished.handled, finished.count);
        metrics.requests.inc(finished.requests, finished.count);
        finished.count = 0;
      }
    }
  }
}

export async function startGrpcServer(options: GrpcServerOptions): Promise<RunningGrpcServer> {
  const observations = new CallObservations(options.metrics, options.log);
  const server = new RequestCheckingServer({
    'grpc.max_receive_message_length': MAX_RECEIVE_BYTES,
    // grpc-js keeps channelz statistics of every call and session unless told not to; nothing here serves
    // channelz (metrics are prom-client's), so they were bookkeeping on every call that no one could read.
    'grpc.enable_channelz': 0,
    ...CONNECTION_BOUNDS,
    observe: observations.observe,
    onResetFlood: ({ peer, resets, streams, refusedForMs }) =>
      options.log?.warn(
        { peer, resets, streams, refusedForMs },
        `grpc connection closed (GOAWAY ENHANCE_YOUR_CALM): it reset too many of its streams; new connections from its address refused for ${Math.round(refusedForMs / 1000)} s`,
      ),
    ...(options.telemetry ? { interceptors: [tracingInterceptor(options.telemetry)] } : {}),
    rates: options.rates,
  });
  const names = options.services.map((service) => service.name);
  // Every service's protos, the health service's with them, loaded in one go.
  const [healthDefinition, ...definitions] = serviceDefinitions([HEALTH_SERVICE, ...names]);
  for (const [i, service] of options.services.entries()) server.addService(definitions[i]!.service, service.handlers);
  const health = new HealthService({ '': 'SERVING', ...Object.fromEntries(names.map((name) => [name, 'SERVING' as const])) });
  server.addService(healthDefinition!.service, health.handlers());
  const healthWatches = health.watches;
  const all = [...names, HEALTH_SERVICE, ...REFLECTION_SERVICES];
  addReflection(server, all);

  const credentials = options.tls
    ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: Buffer.from(options.tls.cert), private_key: Buffer.from(options.tls.key) }], false)
    : grpc.ServerCredentials.createInsecure();
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${options.port}`, credentials, (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  // Each change once: grpc-health-check writes to every watcher at each setStatus, changed or not.
  let serving = true;
  const setServing = (now: boolean) => {
    if (now === serving) return;
    serving = now;
    const status = now ? 'SERVING' : 'NOT_SERVING';
    health.setStatus('', status);
    for (const name of names) health.setStatus(name, status);
  };
  let forced: (() => void) | undefined;
  return {
    server,
    port,
    address: `${options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : host}:${port}`,
    health,
    services: all,
    setServing,
    shutdown: (deadlineMs = 5_000) =>
      new Promise<void>((resolve) => {
        setServing(false);
        observations.stopping = true;
        // A health Watch never ends by itself, and grpc-js's forceShutdown misses the sessions of a server without
        // channelz: left open, one watcher kept the process alive after serve had stopped. Ended like the other streams.
        for (const call of healthWatches) failStream(call, SHUTTING_DOWN);
        healthWatches.clear();
        options.onShutdown?.();
        forced = () => {
          clearTimeout(force);
          server.forceShutdown();
          resolve();
        };
        const force = setTimeout(forced, deadlineMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }),
    cancelAll: () => (forced ? forced() : server.forceShutdown()),
  };
}
