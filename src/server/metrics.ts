/**
 * Prometheus metrics of `miniapp serve` (prom-client, its own registry):
 * the spec's grpc_requests_total{method,status} and
 * grpc_request_duration_seconds{method}, plus the process defaults.
 */
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface Metrics {
  registry: Registry;
  grpcRequests: Counter<'method' | 'status'>;
  grpcDuration: Histogram<'method'>;
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'miniapp_' });
  return {
    registry,
    grpcRequests: new Counter({
      name: 'grpc_requests_total',
      help: 'gRPC calls handled, by method and status code name (OK or the status name).',
      labelNames: ['method', 'status'],
      registers: [registry],
    }),
    grpcDuration: new Histogram({
      name: 'grpc_request_duration_seconds',
      help: 'Time from the start of a gRPC call to its status, by method.',
      labelNames: ['method'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
  };
}
