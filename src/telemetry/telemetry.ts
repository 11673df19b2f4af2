/**
 * What the instrumented places (HTTP, gRPC, the store, webhooks, payments)
 * ask of tracing. They hold a `Telemetry` only when tracing is on, and test
 * for it (`if (telemetry)`) where they would otherwise start a span: with
 * tracing off no OpenTelemetry module is loaded and no hook is installed,
 * so it costs nothing. The implementation is otel.ts, loaded on demand.
 */
import type { Attributes, Context, Link, Span, SpanKind } from '@opentelemetry/api';

export type { Span };

/** SpanKind's values, usable without loading @opentelemetry/api (a const enum there). */
export const SPAN_KIND = { INTERNAL: 0, SERVER: 1, CLIENT: 2, PRODUCER: 3, CONSUMER: 4 } as const satisfies Record<string, SpanKind>;

export interface SpanStart {
  kind?: (typeof SPAN_KIND)[keyof typeof SPAN_KIND];
  attributes?: Attributes;
  links?: Link[];
  /** The parent; default: the active context. */
  parent?: Context;
  /** Start only below an active span (store statements, upstream calls): no trace of their own. */
  requireParent?: boolean;
}

/** The log fields that lead from a log line to its trace. */
export interface TraceLogFields {
  trace_id?: string;
  span_id?: string;
}

export interface Telemetry {
  /** Where spans go, for the banner. */
  readonly description: string;
  /** A new span, child of `start.parent` or of the active context; undefined when a parent is required and none is active. */
  startSpan(name: string, start?: SpanStart): Span | undefined;
  /**
   * Runs `work` inside a new span (active for everything `work` starts) and
   * ends it; a thrown error marks the span failed (its type, never its
   * message, which may quote input) and is thrown on.
   */
  inSpan<T>(name: string, start: SpanStart, work: (span: Span | undefined) => Promise<T>): Promise<T>;
  /** Runs `fn` with `span` active. */
  withSpan<T>(span: Span, fn: () => T): T;
  /** Runs `fn` with `context` active. */
  withContext<T>(context: Context, fn: () => T): T;
  /** The context a W3C `traceparent` (and `tracestate`) continue; the active one when they are absent or malformed. */
  extract(traceparent: string | undefined, tracestate?: string | undefined): Context;
  /** The `traceparent` of `span` (default: the active span), or undefined. */
  traceparent(span?: Span): string | undefined;
  /** A link to the span a stored `traceparent` names (a webhook delivery to the request that made it). */
  linkTo(traceparent: string | null | undefined): Link[];
  /** trace_id and span_id of `span` (default: the active span); empty when there is none. */
  logFields(span?: Span): TraceLogFields;
  /** Marks `span` failed with a short, secret-free description (a status name, an error type). */
  fail(span: Span, description: string): void;
  /** Sends what is buffered and stops. */
  shutdown(): Promise<void>;
}
