/**
 * The gRPC client of monitoring.v1.MonitoringService, on the channel,
 * metadata and error mapping every client of serve shares (grpc/client/).
 * Streams report through callbacks; nothing here prints.
 */
import * as grpc from '@grpc/grpc-js';
import { channelReady, ServiceConnection, type ConnectOptions } from '../grpc/client/channel.js';
import type { ChatMessage, LogEntry, LogRequest, MetricData, MetricsRequest } from './service.js';
import { MONITORING_SERVICE as SERVICE } from './client-light.js';

export type { ChatMessage, LogEntry, LogLevelEnum, MetricData } from './service.js';

interface RawMonitoringClient extends grpc.Client {
  StreamMetrics(request: Partial<MetricsRequest>, metadata: grpc.Metadata, options: grpc.CallOptions): grpc.ClientReadableStream<MetricData>;
  StreamLogs(request: Partial<LogRequest>, metadata: grpc.Metadata, options: grpc.CallOptions): grpc.ClientReadableStream<LogEntry>;
  Chat(metadata: grpc.Metadata, options: grpc.CallOptions): grpc.ClientDuplexStream<Partial<ChatMessage>, ChatMessage>;
}

export class MonitoringClient {
  readonly #connection: ServiceConnection;
  readonly #raw: RawMonitoringClient;

  constructor(options: ConnectOptions) {
    this.#connection = new ServiceConnection(options, SERVICE);
    this.#raw = this.#connection.client<RawMonitoringClient>('monitoring.v1.MonitoringService');
  }

  #metadata(): grpc.Metadata {
    return this.#connection.metadata();
  }

  /** Reads a server stream to its end (or until `signal` aborts), item by item. */
  #read<T>(call: grpc.ClientReadableStream<T>, onItem: (item: T) => void, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const cancel = () => call.cancel();
      signal?.addEventListener('abort', cancel, { once: true });
      call.on('data', onItem);
      call.on('end', () => {
        signal?.removeEventListener('abort', cancel);
        resolve();
      });
      call.on('error', (error: grpc.ServiceError) => {
        signal?.removeEventListener('abort', cancel);
        if (signal?.aborted && error.code === grpc.status.CANCELLED) resolve();
        else reject(this.#connection.error(error));
      });
    });
  }

  metrics(request: Partial<MetricsRequest>, onData: (data: MetricData) => void, signal?: AbortSignal): Promise<void> {
    return this.#read(this.#raw.StreamMetrics(request, this.#metadata(), {}), onData, signal);
  }

  logs(request: Partial<LogRequest>, onEntry: (entry: LogEntry) => void, signal?: AbortSignal): Promise<void> {
    return this.#read(this.#raw.StreamLogs(request, this.#metadata(), {}), onEntry, signal);
  }

  /** Joins the operators' room: sends each of `lines`, hands over what the others say, ends with `lines` or `signal`. */
  async chat(options: { sender: string; lines: AsyncIterable<string>; onMessage: (message: ChatMessage) => void; signal?: AbortSignal }): Promise<void> {
    const call = this.#raw.Chat(this.#metadata(), {});
    const reading = this.#read(call as unknown as grpc.ClientReadableStream<ChatMessage>, options.onMessage, options.signal);
    call.write({ sender: options.sender, text: '' });
    for await (const line of options.lines) {
      if (options.signal?.aborted) break;
      if (line.trim()) call.write({ sender: options.sender, text: line });
    }
    if (!options.signal?.aborted) call.end();
    await reading;
  }

  /** Resolves once connected; UNAVAILABLE as soon as an attempt fails, DEADLINE_EXCEEDED after `timeoutMs`. */
  async ready(timeoutMs: number): Promise<void> {
    const outcome = await channelReady(this.#raw.getChannel(), Date.now() + timeoutMs);
    if (outcome === 'ready') return;
    const [code, details] = outcome === 'timeout' ? [grpc.status.DEADLINE_EXCEEDED, 'could not connect in time'] : [grpc.status.UNAVAILABLE, 'cannot connect'];
    throw this.#connection.error(Object.assign(new Error(details), { code, details, metadata: new grpc.Metadata() }));
  }

  close(): void {
    this.#connection.close();
  }
}
