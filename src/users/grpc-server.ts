/**
 * The gRPC server of `miniapp serve`: UserService and MonitoringService,
 * the standard health service, server reflection, optional TLS, a
 * receive-size limit, per-call metrics through a server interceptor, and a
 * graceful shutdown with a deadline.
 */
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation, protoPath as healthProtoPath } from 'grpc-health-check';
import * as protoLoader from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import type { Metrics } from '../server/metrics.js';
import { LOADER_OPTIONS, loadUserProto, monitoringServiceDefinition, toTimestamp, userServiceDefinition } from './proto.js';
import { RpcError, statusName, type UserServiceImpl } from './service.js';

export const DEFAULT_GRPC_PORT = 50051;
export const MAX_RECEIVE_BYTES = 4 * 1024 * 1024;
export const USER_SERVICE_NAME = 'user.v1.UserService';

export interface GrpcServerOptions {
  host: string;
  port: number;
  service: UserServiceImpl;
  metrics: Metrics;
  tls?: { cert: string; key: string } | undefined;
}

export interface RunningGrpcServer {
  server: grpc.Server;
  port: number;
  address: string;
  health: HealthImplementation;
  /** Stops accepting calls, lets running ones finish until `deadlineMs`, then cancels the rest. */
  shutdown(deadlineMs?: number): Promise<void>;
}

/** Counts every call by method and final status, and times it. */
function metricsInterceptor(metrics: Metrics): grpc.ServerInterceptor {
  return (descriptor, call) => {
    const method = descriptor.path.split('/').pop() ?? descriptor.path;
    const stop = metrics.grpcDuration.startTimer({ method });
    let recorded = false;
    const record = (code: grpc.status) => {
      if (recorded) return;
      recorded = true;
      stop();
      metrics.grpcRequests.inc({ method, status: statusName(code) });
    };
    return new grpc.ServerInterceptingCall(call, {
      start: (next) => next(new grpc.ServerListenerBuilder().withOnCancel(() => record(grpc.status.CANCELLED)).build()),
      sendStatus: (status, next) => {
        record(status.code);
        next(status);
      },
    });
  };
}

function monitoringHandlers(service: UserServiceImpl, metrics: Metrics): grpc.UntypedServiceImplementation {
  return {
    StreamMetrics: (call: grpc.ServerWritableStream<{ service_name: string; interval_ms: number; count: number }, unknown>) => {
      try {
        service.authenticate(call.metadata);
      } catch (error) {
        const details = error instanceof RpcError ? error.message : 'unauthenticated';
        call.emit('error', Object.assign(new Error(details), { code: grpc.status.UNAUTHENTICATED, details }));
        return;
      }
      const interval = Math.max(100, call.request.interval_ms || 1000);
      const wanted = Math.max(0, call.request.count || 0);
      const name = call.request.service_name || USER_SERVICE_NAME;
      let sent = 0;
      const send = async () => {
        const requests = await metrics.grpcRequests.get();
        const values: Record<string, number> = {
          grpc_requests_total: requests.values.reduce((sum, v) => sum + v.value, 0),
          grpc_requests_failed: requests.values.filter((v) => v.labels.status !== 'OK').reduce((sum, v) => sum + v.value, 0),
          watch_streams: service.watcherCount(),
          chat_participants: service.chatParticipantCount(),
          resident_memory_bytes: process.memoryUsage().rss,
          uptime_seconds: process.uptime(),
        };
        call.write({ service_name: name, metrics: values, timestamp: toTimestamp(new Date()) });
        sent++;
        if (wanted && sent >= wanted) {
          clearInterval(timer);
          call.end();
        }
      };
      const timer = setInterval(() => void send(), interval);
      void send();
      const stop = () => clearInterval(timer);
      call.once('cancelled', stop);
      call.once('close', stop);
    },
  };
}

export async function startGrpcServer(options: GrpcServerOptions): Promise<RunningGrpcServer> {
  const server = new grpc.Server({
    'grpc.max_receive_message_length': MAX_RECEIVE_BYTES,
    interceptors: [metricsInterceptor(options.metrics)],
  });
  server.addService(userServiceDefinition().service, options.service.handlers());
  server.addService(monitoringServiceDefinition().service, monitoringHandlers(options.service, options.metrics));
  const health = new HealthImplementation({ '': 'SERVING', [USER_SERVICE_NAME]: 'SERVING', 'user.v1.MonitoringService': 'SERVING' });
  health.addToServer(server);
  // Reflection describes every service this server offers, health included.
  const healthDefinition = protoLoader.loadSync(healthProtoPath, LOADER_OPTIONS);
  new ReflectionService({ ...loadUserProto().definition, ...healthDefinition }).addToServer(server);

  const credentials = options.tls
    ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: Buffer.from(options.tls.cert), private_key: Buffer.from(options.tls.key) }], false)
    : grpc.ServerCredentials.createInsecure();
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${options.port}`, credentials, (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  return {
    server,
    port,
    address: `${options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : host}:${port}`,
    health,
    shutdown: (deadlineMs = 5_000) =>
      new Promise<void>((resolve) => {
        health.setStatus('', 'NOT_SERVING');
        health.setStatus(USER_SERVICE_NAME, 'NOT_SERVING');
        options.service.endStreams();
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, deadlineMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }),
  };
}
