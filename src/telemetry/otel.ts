/**
 * The Telemetry of telemetry.ts over OpenTelemetry's Node SDK: a tracer
 * provider with the W3C trace-context propagator and an AsyncLocalStorage
 * context manager, a batch span processor, and the OTLP exporter of the
 * configured protocol (or the console's). Sampling, batching and the OTLP
 * headers and time-outs follow the standard OTEL_* variables, read by the
 * SDK. undici's requests (the partner API, the graph API, webhook
 * deliveries) are traced by OpenTelemetry's undici instrumentation, which
 * listens on undici's diagnostics channels: a client span below the active
 * span, and its `traceparent` on the request.
 *
 * Loaded only when tracing is on (`startTelemetry`).
 */
import { redactUrl } from '../url-redaction.js';
import {
  context,
  diag,
  DiagLogLevel,
  propagation,
  ROOT_CONTEXT,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Context,
  type DiagLogger,
  type Link,
  type Span,
} from '@opentelemetry/api';
import { BatchSpanProcessor, NodeTracerProvider, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-node';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  CompositePropagator,
  ExportResultCode,
  loggingErrorHandler,
  setGlobalErrorHandler,
  W3CBaggagePropagator,
  W3CTraceContextPropagator,
} from '@opentelemetry/core';
import { describeTracing, type TracingConfig } from './config.js';
import type { SpanStart, Telemetry, TraceLogFields } from './telemetry.js';

export interface TelemetryOptions {
  config: TracingConfig;
  /** service.version and service.instance.id of the resource. */
  version: string;
  instance?: string | undefined;
  /** Where the SDK's own warnings go (an unreachable collector, a refused export). */
  warn?: ((message: string) => void) | undefined;
  /** Where the console exporter (OTEL_TRACES_EXPORTER=console) writes its lines; standard error by default. */
  console?: ((line: string) => void) | undefined;
  /** Where the SDK's news that is no warning goes (spans reach the collector again). */
  info?: ((message: string) => void) | undefined;
  /**
   * The longest one export may take, whatever OTEL_*_TIMEOUT says: what the
   * process can afford to wait for its last spans when it stops. A request
   * to a collector that never answers keeps the process alive until it
   * times out, so this bounds the stop, not only the wait.
   */
  exportTimeoutMs?: number | undefined;
}

/** The first line of an error's message, without its stack: what an operator needs in one log line. */
function reason(error: unknown): string {
  const text = error instanceof Error ? error.message || error.name : typeof error === 'string' ? error : JSON.stringify(error);
  return (text ?? 'unknown error').split('\n')[0]!.slice(0, 300);
}

/**
 * The configured exporter, saying when spans stop reaching the collector
 * and when they reach it again: once each, not once per batch (a batch
 * goes out every few seconds, and a collector that is down would fill the
 * log). Failed batches are dropped, as the SDK drops them.
 */
class ReportingExporter implements SpanExporter {
  failing = false;

  constructor(
    readonly inner: SpanExporter,
    readonly url: string,
    readonly warn: (message: string) => void,
    readonly info: (message: string) => void,
  ) {}

  export(spans: ReadableSpan[], done: (result: { code: number; error?: Error }) => void): void {
    this.inner.export(spans, (result) => {
      if (result.code === ExportResultCode.SUCCESS) {
        if (this.failing) this.info(`tracing: spans reach ${this.url} again`);
        this.failing = false;
      } else if (!this.failing) {
        this.failing = true;
        this.warn(`tracing: cannot send spans to ${this.url}: ${reason(result.error)}; they are dropped until it answers`);
      }
      done(result);
    });
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}

const KINDS = ['internal', 'server', 'client', 'producer', 'consumer'];

/**
 * OTEL_TRACES_EXPORTER=console: each span as one JSON line (ids, parent,
 * name, kind, duration, status, attributes), written where the caller
 * says: never on standard output, which is a command's answer.
 */
class JsonLinesExporter implements SpanExporter {
  constructor(readonly write: (line: string) => void) {}

  export(spans: ReadableSpan[], done: (result: { code: number }) => void): void {
    for (const span of spans) {
      const { traceId, spanId } = span.spanContext();
      const [seconds, nanos] = span.duration;
      this.write(
        `${JSON.stringify({
          traceId,
          spanId,
          parentSpanId: span.parentSpanContext?.spanId ?? null,
          name: span.name,
          kind: KINDS[span.kind] ?? String(span.kind),
          durationMs: Math.round((seconds * 1e3 + nanos / 1e6) * 1000) / 1000,
          status: span.status.code === SpanStatusCode.ERROR ? 'error' : 'ok',
          attributes: span.attributes,
          service: span.resource.attributes['service.name'],
        })}\n`,
      );
    }
    done({ code: 0 });
  }

  async shutdown(): Promise<void> {}
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

async function exporterFor(config: TracingConfig, console: ((line: string) => void) | undefined, timeoutMillis: number): Promise<SpanExporter> {
  if (config.exporter === 'console') return new JsonLinesExporter(console ?? ((line) => process.stderr.write(line)));
  const { OTLPTraceExporter } = await (config.protocol === 'grpc'
    ? import('@opentelemetry/exporter-trace-otlp-grpc')
    : config.protocol === 'http/json'
      ? import('@opentelemetry/exporter-trace-otlp-http')
      : import('@opentelemetry/exporter-trace-otlp-proto'));
  return new OTLPTraceExporter({ url: config.url, timeoutMillis });
}

function errorType(error: unknown): string {
  if (error && typeof error === 'object') {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string' && /^[A-Z0-9_]{2,40}$/.test(code)) return code;
    const name = (error as { constructor?: { name?: string } }).constructor?.name;
    if (name) return name;
  }
  return 'Error';
}

class OtelTelemetry implements Telemetry {
  constructor(
    readonly description: string,
    readonly provider: NodeTracerProvider,
    readonly undici: UndiciInstrumentation,
    readonly tracer = provider.getTracer('miniapp'),
  ) {}

  startSpan(name: string, start: SpanStart = {}): Span | undefined {
    const parent = start.parent ?? context.active();
    if (start.requireParent && !trace.getSpan(parent)) return undefined;
    return this.tracer.startSpan(name, { kind: start.kind ?? 0, attributes: start.attributes, links: start.links }, parent);
  }

  async inSpan<T>(name: string, start: SpanStart, work: (span: Span | undefined) => Promise<T>): Promise<T> {
    const span = this.startSpan(name, start);
    if (!span) return work(undefined);
    return context.with(trace.setSpan(start.parent ?? context.active(), span), async () => {
      try {
        return await work(span);
      } catch (error) {
        this.fail(span, errorType(error));
        throw error;
      } finally {
        span.end();
      }
    });
  }

  withSpan<T>(span: Span, fn: () => T): T {
    return context.with(trace.setSpan(context.active(), span), fn);
  }

  withContext<T>(active: Context, fn: () => T): T {
    return context.with(active, fn);
  }

  extract(traceparent: string | undefined, tracestate?: string | undefined): Context {
    if (!traceparent) return ROOT_CONTEXT;
    return propagation.extract(ROOT_CONTEXT, tracestate ? { traceparent, tracestate } : { traceparent });
  }

  traceparent(span: Span | undefined = trace.getActiveSpan()): string | undefined {
    if (!span) return undefined;
    const { traceId, spanId, traceFlags } = span.spanContext();
    if (!trace.isSpanContextValid(span.spanContext())) return undefined;
    return `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, '0')}`;
  }

  linkTo(traceparent: string | null | undefined): Link[] {
    const match = traceparent ? TRACEPARENT.exec(traceparent) : null;
    if (!match) return [];
    const spanContext = { traceId: match[1]!, spanId: match[2]!, traceFlags: parseInt(match[3]!, 16) & TraceFlags.SAMPLED, isRemote: true };
    return trace.isSpanContextValid(spanContext) ? [{ context: spanContext }] : [];
  }

  logFields(span: Span | undefined = trace.getActiveSpan()): TraceLogFields {
    if (!span) return {};
    const { traceId, spanId } = span.spanContext();
    return { trace_id: traceId, span_id: spanId };
  }

  fail(span: Span, description: string): void {
    span.setAttribute('error.type', description);
    span.setStatus({ code: SpanStatusCode.ERROR, message: description });
  }

  async shutdown(): Promise<void> {
    this.undici.disable();
    try {
      // The last spans go out if the collector takes them; a collector that fails is said by the exporter (once), and a
      // process that stops is no failure of its own for it.
      await this.provider.shutdown().catch(() => undefined);
    } finally {
      releaseGlobals();
    }
  }
}

/**
 * The process-wide parts (the context manager, the propagator, the SDK's
 * diagnostics), installed by the first running Telemetry and removed with
 * the last: several serve instances may share a process (tests do), and
 * once none traces, nothing of tracing stays (an enabled AsyncLocalStorage
 * costs every asynchronous operation of the process).
 */
let users = 0;

function holdGlobals(warn: ((message: string) => void) | undefined, exporter: ReportingExporter | undefined): void {
  if (users++ > 0) return;
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }));
  if (!warn) return;
  diag.setLogger(diagLogger(warn), { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true });
  // The SDK reports every failed batch here; the exporter has said so once already (ReportingExporter).
  setGlobalErrorHandler((error) => {
    if (!exporter?.failing) warn(`tracing: ${reason(error)}`);
  });
}

function releaseGlobals(): void {
  if (--users > 0) return;
  context.disable();
  propagation.disable();
  diag.disable();
  setGlobalErrorHandler(loggingErrorHandler());
}

function diagLogger(warn: (message: string) => void): DiagLogger {
  const say = (message: string) => warn(`tracing: ${message}`);
  const quiet = () => undefined;
  return { error: say, warn: say, info: quiet, debug: quiet, verbose: quiet };
}

/** Starts tracing as `config` says; the returned Telemetry is also the process's global tracer provider. */
export async function startTelemetry(options: TelemetryOptions): Promise<Telemetry> {
  const { config } = options;
  const ours = resourceFromAttributes({
    'service.name': config.serviceName,
    'service.version': options.version,
    ...(options.instance ? { 'service.instance.id': options.instance } : {}),
  });
  // OTEL_RESOURCE_ATTRIBUTES adds to the resource; OTEL_SERVICE_NAME (in config.serviceName) names the service.
  const resource = defaultResource()
    .merge(detectResources({ detectors: [envDetector] }))
    .merge(ours);
  const configured = await exporterFor(config, options.console, Math.min(config.timeoutMs, options.exportTimeoutMs ?? Infinity));
  const exporter =
    options.warn && config.exporter === 'otlp' ? new ReportingExporter(configured, config.url, options.warn, options.info ?? (() => undefined)) : configured;
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter)] });
  // Not registered as the global tracer provider: every span here comes from this provider's tracer (and the undici
  // instrumentation is given it), so that two instances in one process each send to their own collector.
  holdGlobals(options.warn, exporter instanceof ReportingExporter ? exporter : undefined);
  const undici = new UndiciInstrumentation({
    // A request made outside any traced work (a background poll) is not a trace of its own.
    requireParentforSpans: true,
    requestHook: (span, request) => {
      if (!request.path.includes('?')) return;
      const path = redactUrl(request.path);
      span.setAttribute('url.full', `${request.origin}${path}`);
      span.setAttribute('url.query', path.slice(path.indexOf('?')));
    },
  });
  undici.setTracerProvider(provider);
  return new OtelTelemetry(describeTracing(config), provider, undici);
}
