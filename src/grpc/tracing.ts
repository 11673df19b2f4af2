/**
 * A server span for every gRPC call serve answers, when tracing is on:
 * continued from the call's `traceparent` metadata, named as
 * OpenTelemetry's RPC conventions name it ("user.v1.UserService/GetUser"),
 * active while the handler runs (so the store's spans nest below it), and
 * ended with the call's status. Its own interceptor, inside the request
 * checks (request-check.ts): a call the checks refuse never reaches a
 * handler, and is not traced; with tracing off the layer is not there.
 *
 * grpc-js runs a handler from the listener event that completes its
 * request (metadata for client and bidirectional streams, half-close for
 * unary and server streams); every event is passed on with the span active.
 */
import * as grpc from '@grpc/grpc-js';
import { SPAN_KIND, type Span, type Telemetry } from '../telemetry/telemetry.js';
import { statusName } from './status.js';

/** Statuses that are the server's failure rather than the caller's (OpenTelemetry's RPC conventions for servers). */
const SERVER_ERRORS = new Set([
  grpc.status.UNKNOWN,
  grpc.status.DEADLINE_EXCEEDED,
  grpc.status.UNIMPLEMENTED,
  grpc.status.INTERNAL,
  grpc.status.UNAVAILABLE,
  grpc.status.DATA_LOSS,
]);

function first(metadata: grpc.Metadata, key: string): string | undefined {
  const value = metadata.get(key)[0];
  return typeof value === 'string' ? value : undefined;
}

export function tracingInterceptor(telemetry: Telemetry): grpc.ServerInterceptor {
  return (method, call) => {
    const name = method.path.slice(1);
    const slash = name.lastIndexOf('/');
    let span: Span | undefined;
    const end = (code: grpc.status) => {
      if (!span) return;
      span.setAttribute('rpc.grpc.status_code', code);
      if (SERVER_ERRORS.has(code)) telemetry.fail(span, statusName(code));
      span.end();
      span = undefined;
    };
    const inSpan = (fn: () => void) => (span ? telemetry.withSpan(span, fn) : fn());
    return new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, pass) => {
            span = telemetry.startSpan(name, {
              kind: SPAN_KIND.SERVER,
              parent: telemetry.extract(first(metadata, 'traceparent'), first(metadata, 'tracestate')),
              attributes: { 'rpc.system': 'grpc', 'rpc.service': name.slice(0, slash), 'rpc.method': name.slice(slash + 1) },
            });
            inSpan(() => pass(metadata));
          },
          onReceiveMessage: (message, pass) => inSpan(() => pass(message)),
          onReceiveHalfClose: (pass) => inSpan(pass),
          onCancel: () => end(grpc.status.CANCELLED),
        }),
      sendStatus: (status, next) => {
        end(status.code);
        next(status);
      },
    });
  };
}
