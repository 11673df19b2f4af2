/**
 * What every gRPC client of `miniapp serve`'s services shares (users,
 * commerce, monitoring, as equals): the channel as the spec's reference
 * client opens it (keepalive pings every 10 s with a 3 s time-out, also
 * without calls; the round_robin policy), plaintext or TLS credentials, the
 * bearer token as per-call metadata, the deadline, and the mapping of a
 * failed call to the project's typed errors (errors.ts).
 *
 * The token travels as metadata `authorization: Bearer <token>` rather than
 * as call credentials, which grpc-js refuses on a plaintext channel (and
 * the server is often a local plaintext `miniapp serve`).
 */
import * as grpc from '@grpc/grpc-js';
import type { Telemetry } from '../../telemetry/telemetry.js';
import { clientTracingInterceptor } from './tracing.js';
import { readPem } from '../../login/pem.js';
import { serviceDefinition, type ServiceName } from '../protos.js';
import { DEFAULT_DEADLINE_MS, serviceCallError, type ErrorContext } from './errors.js';

export { DEFAULT_DEADLINE_MS } from './errors.js';

/** Keepalive and load balancing of the spec's reference client (Limits table). */
const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.keepalive_time_ms': 10_000,
  'grpc.keepalive_timeout_ms': 3_000,
  'grpc.keepalive_permit_without_calls': 1,
  'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
};

export interface ConnectOptions {
  /** HOST:PORT */
  address: string;
  /** Sent as `authorization: Bearer <token>` when given. */
  token?: string | undefined;
  tls?: boolean | undefined;
  /** CA for TLS: a PEM file path or the PEM text; the system roots without it. */
  ca?: string | undefined;
  /** Time limit of each unary call and list; for the other streams, of connecting. */
  deadlineMs?: number | undefined;
  /**
   * No call ends later than this (epoch ms): a call made after a light one that never reached an answering server
   * (light-call.ts) keeps to the command's one deadline. Errors still name `deadlineMs`, the limit the user gave.
   */
  endsBy?: number | undefined;
  /** A client span for every call, its traceparent sent along (tracing.ts); none when tracing is off. */
  telemetry?: Telemetry | undefined;
}

function credentialsOf(options: ConnectOptions): grpc.ChannelCredentials {
  if (!options.tls) return grpc.credentials.createInsecure();
  const ca = options.ca ? Buffer.from(readPem(options.ca, '--ca')) : null;
  return grpc.credentials.createSsl(ca);
}

/**
 * Waits for `channel` to connect: 'ready'; 'unreachable' as soon as an
 * attempt fails (no waiting out the channel's back-off); 'timeout' once
 * `deadline` (ms since the epoch) passes without either. Each client words
 * the outcome for its service.
 */
export function channelReady(channel: ReturnType<grpc.Client['getChannel']>, deadline: number): Promise<'ready' | 'unreachable' | 'timeout'> {
  const State = grpc.connectivityState;
  return new Promise((resolve) => {
    const check = () => {
      const state = channel.getConnectivityState(true);
      if (state === State.READY) return resolve('ready');
      if (state === State.TRANSIENT_FAILURE || state === State.SHUTDOWN) return resolve('unreachable');
      channel.watchConnectivityState(state, deadline, (error) => (error ? resolve('timeout') : check()));
    };
    check();
  });
}

/**
 * One connection to serve's gRPC port, for the clients of its services: it
 * opens a service's client (the second and later ride on the first one's
 * channel), gives each call its metadata and deadline, and words failures.
 */
export class ServiceConnection {
  readonly address: string;
  readonly deadlineMs: number;
  readonly context: ErrorContext;
  readonly #options: ConnectOptions;
  readonly #clients: grpc.Client[] = [];
  /** Made once: with --ca, reading the CA file is I/O that every client of the connection would repeat. */
  #credentials: grpc.ChannelCredentials | undefined;

  /** `service` names what the address serves, in messages (default: the user service). */
  constructor(options: ConnectOptions, service?: string) {
    this.#options = options;
    this.address = options.address;
    this.deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
    this.context = { address: this.address, deadlineMs: this.deadlineMs, tls: Boolean(options.tls), ...(service ? { service } : {}) };
  }

  /** The raw client of one service, typed by the caller with the methods its loader adds. */
  client<T extends grpc.Client>(name: ServiceName): T {
    const { Client } = serviceDefinition(name);
    const first = this.#clients[0];
    this.#credentials ??= credentialsOf(this.#options);
    const credentials = this.#credentials;
    const telemetry = this.#options.telemetry;
    const traced = telemetry ? { interceptors: [clientTracingInterceptor(telemetry)] } : {};
    const client = first
      ? new Client(this.address, credentials, { channelOverride: first.getChannel(), ...traced })
      : new Client(this.address, credentials, { ...CHANNEL_OPTIONS, ...traced });
    this.#clients.push(client);
    return client as unknown as T;
  }

  /** A call's metadata: the bearer token when there is one. */
  metadata(): grpc.Metadata {
    const metadata = new grpc.Metadata();
    if (this.#options.token) metadata.set('authorization', `Bearer ${this.#options.token}`);
    return metadata;
  }

  /** The deadline of a call starting now. */
  deadline(): number {
    return Math.min(Date.now() + this.deadlineMs, this.#options.endsBy ?? Number.POSITIVE_INFINITY);
  }

  /** A failed call as the project's typed error (errors.ts); other errors pass through. */
  error(error: unknown): unknown {
    return serviceCallError(error, this.context);
  }

  close(): void {
    for (const client of this.#clients.splice(0)) client.close();
  }
}
