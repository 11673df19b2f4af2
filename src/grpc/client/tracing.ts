/**
 * A client span for every gRPC call the CLI makes, when tracing is on
 * (`miniapp users ...` with OTEL_* set): named as the server names its
 * span, below the command's span, with its `traceparent` in the call's
 * metadata so that serve continues the same trace.
 */
import * as grpc from '@grpc/grpc-js';
import { SPAN_KIND, type Telemetry } from '../../telemetry/telemetry.js';
import { statusName } from '../status.js';

export function clientTracingInterceptor(telemetry: Telemetry): grpc.Interceptor {
  return (options, nextCall) => {
    const name = options.method_definition.path.slice(1);
    const slash = name.lastIndexOf('/');
    const span = telemetry.startSpan(name, {
      kind: SPAN_KIND.CLIENT,
      attributes: { 'rpc.system': 'grpc', 'rpc.service': name.slice(0, slash), 'rpc.method': name.slice(slash + 1) },
    });
    return new grpc.InterceptingCall(nextCall(options), {
      start(metadata, _listener, next) {
        const traceparent = span && telemetry.traceparent(span);
        if (traceparent) metadata.set('traceparent', traceparent);
        next(
          metadata,
          new grpc.ListenerBuilder()
            .withOnReceiveStatus((status, pass) => {
              if (span) {
                span.setAttribute('rpc.grpc.status_code', status.code);
                if (status.code !== grpc.status.OK) telemetry.fail(span, statusName(status.code));
                span.end();
              }
              pass(status);
            })
            .build(),
        );
      },
    });
  };
}
