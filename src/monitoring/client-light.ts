/**
 * `miniapp monitor metrics --count N` on the light path
 * (grpc/client/light-call.ts): StreamMetrics without grpc-js, each
 * snapshot the object the grpc-js client (client.ts) gives.
 */
import type { ConnectOptions } from '../grpc/client/channel.js';
import { lightStream, type LightStreamEnd } from '../grpc/client/light-call.js';
import type { MetricData, MetricsRequest } from './service.js';

/** What the address serves, in the errors of both clients. */
export const MONITORING_SERVICE = 'the monitoring service of `miniapp serve`';

/** Streams snapshots to `onData` until the server ends the stream; how it ended (see lightStream). */
export function lightMetrics(
  connection: ConnectOptions,
  request: Partial<MetricsRequest>,
  onData: (data: MetricData) => void,
  connectMs: number,
  signal?: AbortSignal,
): Promise<LightStreamEnd> {
  return lightStream<MetricData>(connection, '/monitoring.v1.MonitoringService/StreamMetrics', request, {
    service: MONITORING_SERVICE,
    connectMs,
    signal,
    onMessage: onData,
  });
}
