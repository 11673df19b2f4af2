/**
 * Checks of every request, for every service the server hosts (ours,
 * health, reflection), before any handler runs:
 *
 * - request metadata over MAX_METADATA_BYTES ends the call with
 *   RESOURCE_EXHAUSTED;
 * - a string field that is not valid UTF-8, or bytes that are no message at
 *   all, end it with INVALID_ARGUMENT naming the field.
 *
 * grpc-js decodes a request with the method's `requestDeserialize` and
 * answers INTERNAL when that throws, which would blame the server for the
 * client's bytes. So the deserializer never throws: it returns a
 * RejectedRequest instead, and an interceptor turns that into the status,
 * which the call's observer sees (metrics and logs count INVALID_ARGUMENT).
 * The same interceptor observes every call for the server's metrics and
 * logs: one layer per call for both.
 */
import type { Http2SecureServer, Http2Server, Http2Session } from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { methodOf } from './proto-wire.js';
import { invalidUtf8Field, MalformedMessageError } from './wire-utf8.js';
import { isTokenKey, type RequestRates } from '../auth/request-rates.js';
import { resourceExhausted } from './retry-info.js';
import { AddressPenalties, DEFAULT_RESET_LIMITS, guardSessions, type ClosedSession, type ResetLimits } from './session-guard.js';

/**
 * Request metadata the server reads, counted as HTTP/2 counts a header list
 * (name + value + 32 per entry). Far above what clients send (a bearer
 * token is 54 bytes) and well below what HTTP/2 itself fails on, so that a
 * request too large for us gets a status rather than a reset: Node's HTTP/2
 * library closes the connection (GOAWAY COMPRESSION_ERROR) for a single
 * value over 64 KiB as compressed, which no server option changes.
 */
const MAX_METADATA_BYTES = 16 * 1024;

/**
 * The header-list size of request metadata as it arrived: what
 * `toHttp2Headers()` gives, counted without building it (every call is
 * counted, and that built an object, base64 strings and arrays to throw
 * away). A binary (-bin) value travels as base64.
 */
export function metadataBytes(metadata: grpc.Metadata): number {
  let bytes = 0;
  const entries = metadata.toJSON();
  // Own keys only, as Object.entries(toHttp2Headers()) counted them.
  for (const name of Object.keys(entries)) {
    if (name.startsWith(':')) continue;
    for (const value of entries[name]!) {
      bytes += name.length + 32 + (typeof value === 'string' ? Buffer.byteLength(value) : Math.ceil(value.length / 3) * 4);
    }
  }
  return bytes;
}

/** What a checked deserializer returns in place of a request the server refuses. */
class RejectedRequest {
  constructor(readonly details: string) {}
}

/** The request type (full name) of a method path such as `/user.v1.UserService/CreateUser`, from the compiled schema. */
function inputOf(path: string): string {
  try {
    return methodOf(path).input;
  } catch {
    // A service missing from the compiled protos would go unchecked: refuse to start instead.
    throw new Error(`no descriptor of ${path} in the compiled protos: add its .proto under proto/ and run \`npm run build\``);
  }
}

/** The definition with each method's deserializer checking the wire bytes first. */
function checkedService(service: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const checked: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const [name, method] of Object.entries(service as Record<string, grpc.MethodDefinition<unknown, unknown>>)) {
    const input = inputOf(method.path);
    const decode = method.requestDeserialize;
    checked[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer) => {
        try {
          const field = invalidUtf8Field(bytes, input);
          if (field) return new RejectedRequest(`${field} is not valid UTF-8`);
          return decode(bytes);
        } catch (error) {
          const why = error instanceof MalformedMessageError ? `: ${error.message}` : '';
          return new RejectedRequest(`the request is not a valid ${input} message${why}`);
        }
      },
    };
  }
  return checked as grpc.ServiceDefinition;
}

/**
 * What the server learns of one call, for its metrics and logs: made by an
 * ObserveCall when the call starts (so that it counts as started).
 */
export interface CallObserver {
  /** A request message arrived (one the checks refuse too). */
  received(): void;
  /** A response message is on its way. */
  sent(): void;
  /** The call ended: with its status, or CANCELLED when the client left first. Once per call. */
  finished(code: grpc.status): void;
}

export type ObserveCall = (method: grpc.ServerMethodDefinition<unknown, unknown>) => CallObserver;

/** How close to its deadline a call that ends cancelled counts as DEADLINE_EXCEEDED (CheckedCall's #pastDeadline). */
const DEADLINE_SLACK_MS = 5;

/** What grpc-js passes a call's events to (its InterceptingServerListener, not exported by name). */
type CallListener = Parameters<grpc.ServerInterceptingCallInterface['start']>[0];
/** A status as a call sends it (grpc-js's PartialStatusObject, not exported by name). */
type SentStatus = Parameters<grpc.ServerInterceptingCallInterface['sendStatus']>[0];

/** How a checked call is limited: the metadata bound and the request rates. */
interface CheckSettings {
  maxBytes: number;
  rates: RequestRates | undefined;
}

/**
 * One call behind the checks: the call grpc-js gives the interceptor, and
 * the listener of that call's events, in one object. It does what a
 * grpc-js ServerInterceptingCall with a listener and a responder did (see
 * requestCheckInterceptor), without that class's machinery for
 * interceptors that answer later: each check here decides at once, so an
 * event is passed on, or refused, in the same turn. That machinery (the
 * pending message, half-close and status, a second listener object, the
 * default responders and an empty Metadata before each first message) cost
 * every call of every service about a tenth of serve's CPU for a GetUser.
 *
 * After a refusal (its status sent) nothing more of the call reaches the
 * handler, as the ServerInterceptingCall that never passed the refused
 * event on let nothing after it through; a cancellation still does.
 */
class CheckedCall implements grpc.ServerInterceptingCallInterface, CallListener {
  #listener: CallListener | undefined;
  /** A status was sent by the checks: what the client sends after it is dropped. */
  #refused = false;
  /** The call's first end (a status, or a cancellation after it too): reported once. */
  #ended = false;

  constructor(
    private readonly next: grpc.ServerInterceptingCallInterface,
    private readonly path: string,
    private readonly settings: CheckSettings,
    private readonly observer: CallObserver | undefined,
  ) {}

  // ---- the events of the call, from grpc-js to the handler

  start(listener: CallListener): void {
    this.#listener = listener;
    this.next.start(this);
  }

  onReceiveMetadata(metadata: grpc.Metadata): void {
    if (this.#refused) return;
    const { maxBytes, rates } = this.settings;
    const bytes = metadataBytes(metadata);
    if (bytes > maxBytes) {
      this.#refuse({ code: grpc.status.RESOURCE_EXHAUSTED, details: `request metadata is ${bytes} bytes; the limit is ${maxBytes}` });
      return;
    }
    if (rates !== undefined && !this.path.startsWith('/grpc.')) {
      const key = callRateKey(rates, metadata, () => this.next.getPeer());
      const waitMs = rates.take(key);
      if (waitMs > 0) {
        this.#refuse(resourceExhausted(rateMessage(rates, key, waitMs), waitMs));
        return;
      }
    }
    this.#listener!.onReceiveMetadata(metadata);
  }

  onReceiveMessage(message: unknown): void {
    if (this.#refused) return;
    this.observer?.received();
    if (message instanceof RejectedRequest) this.#refuse({ code: grpc.status.INVALID_ARGUMENT, details: message.details });
    else this.#listener!.onReceiveMessage(message);
  }

  onReceiveHalfClose(): void {
    if (!this.#refused) this.#listener!.onReceiveHalfClose();
  }

  onCancel(): void {
    this.#finish(this.#pastDeadline() ? grpc.status.DEADLINE_EXCEEDED : grpc.status.CANCELLED);
    this.#listener!.onCancel();
  }

  // ---- the handler's answers, on their way to grpc-js

  sendMetadata(metadata: grpc.Metadata): void {
    this.next.sendMetadata(metadata);
  }

  sendMessage(message: unknown, callback: () => void): void {
    this.observer?.sent();
    this.next.sendMessage(message, callback);
  }

  sendStatus(status: SentStatus): void {
    this.#finish(status.code);
    this.next.sendStatus(status);
  }

  startRead(): void {
    this.next.startRead();
  }

  getPeer(): string {
    return this.next.getPeer();
  }

  getDeadline(): grpc.Deadline {
    return this.next.getDeadline();
  }

  getHost(): string {
    return this.next.getHost();
  }

  getAuthContext(): ReturnType<grpc.ServerInterceptingCallInterface['getAuthContext']> {
    return this.next.getAuthContext();
  }

  getConnectionInfo(): ReturnType<grpc.ServerInterceptingCallInterface['getConnectionInfo']> {
    return this.next.getConnectionInfo();
  }

  getMetricsRecorder(): ReturnType<grpc.ServerInterceptingCallInterface['getMetricsRecorder']> {
    return this.next.getMetricsRecorder();
  }

  /**
   * Whether the call has run out its deadline. grpc-js ends such a call itself (DEADLINE_EXCEEDED, sent below this
   * layer) and then reports it cancelled, as it does a client that gives up at its deadline (its RST_STREAM arrives
   * when the server's copy of the deadline passes: both are the send time, the way over and the timeout). Timers
   * may fire a little before the wall clock reaches the deadline, hence the slack.
   */
  #pastDeadline(): boolean {
    const deadline = this.next.getDeadline();
    const ms = deadline instanceof Date ? deadline.getTime() : deadline;
    return Number.isFinite(ms) && Date.now() >= ms - DEADLINE_SLACK_MS;
  }

  #refuse(status: SentStatus): void {
    this.#refused = true;
    this.sendStatus(status);
  }

  /** grpc-js reports a cancellation after the status too (the stream closes): the first end is the call's. */
  #finish(code: grpc.status): void {
    if (this.#ended) return;
    this.#ended = true;
    this.observer?.finished(code);
  }
}

/**
 * The one interceptor of every call: the checks, and the observation of
 * the call when `observe` is given (one layer per call, not one per
 * concern: each layer costs every call). Metadata over `maxBytes` ends the
 * call with RESOURCE_EXHAUSTED before the handler starts; a request message
 * the checked deserializer rejected ends it with INVALID_ARGUMENT. Both
 * statuses are sent through this layer, so the observer sees them as any
 * other; a refused message still counts as received.
 *
 * With `rates`, each call of our services takes one request from its
 * token's bucket (once the token has authenticated; else its address's) when its metadata
 * arrives, so a stream counts once, at its start; over the rate, the call
 * ends with RESOURCE_EXHAUSTED and a RetryInfo (retry-info.ts). Health
 * and reflection (the grpc.* services) are never limited.
 */
function requestCheckInterceptor(maxBytes = MAX_METADATA_BYTES, observe?: ObserveCall, rates?: RequestRates): grpc.ServerInterceptor {
  const settings: CheckSettings = { maxBytes, rates };
  // grpc-js types an interceptor as returning its ServerInterceptingCall class, but uses only the interface it
  // implements (server.ts and the next interceptor call nothing else); test/grpc/request-check.test.ts and the
  // metrics tests drive every method of it through a real server.
  return (method, call) => new CheckedCall(call, method.path, settings, observe?.(method)) as unknown as grpc.ServerInterceptingCall;
}

/** The request-rate key of a gRPC call (RequestRates.keyOf): its bearer token's, else its peer's address, read only then. */
export function callRateKey(rates: RequestRates, metadata: grpc.Metadata, peer: () => string): string {
  const authorization = metadata.get('authorization')[0];
  return rates.keyOf(typeof authorization === 'string' ? authorization : undefined, () => addressOf(peer()));
}

/** The address of a peer such as `127.0.0.1:50312` or `[::1]:50312` (grpc-js's getPeer), without its port. */
export function addressOf(peer: string): string {
  const colon = peer.lastIndexOf(':');
  return colon > 0 && peer.indexOf(':') === colon ? peer.slice(0, colon) : peer.startsWith('[') ? peer.slice(1, peer.indexOf(']')) : peer;
}

function rateMessage(rates: RequestRates, key: string, waitMs: number): string {
  const { perSecond, burst } = rates.limits;
  return `more than ${perSecond} call${perSecond === 1 ? '' : 's'} a second (bursts of ${burst}) with this ${isTokenKey(key) ? 'token' : 'address'}: retry in ${waitMs} ms`;
}

export interface RequestCheckingServerOptions extends grpc.ServerOptions {
  /** What each call reports to (metrics, logs), from the same layer as the checks. */
  observe?: ObserveCall | undefined;
  /** Request rates per token or address (auth/request-rates.ts), checked in the same layer; none when absent. */
  rates?: RequestRates | undefined;
  /** Told of each connection closed for resetting too many streams (session-guard.ts). */
  onResetFlood?: ((closed: ClosedSession) => void) | undefined;
  /** The reset budget of every connection; session-guard.ts's default when absent. */
  resetLimits?: ResetLimits | undefined;
}

/** grpc-js's table of the HTTP/2 servers it listens with, and their sessions (not part of its API). */
type Http2Servers = Map<Http2Server | Http2SecureServer, { sessions?: Set<Http2Session> }>;

/**
 * A grpc-js server whose every service, whoever adds it (health and
 * reflection add their own), checks its requests. The checking
 * interceptor is the outermost; statuses it sends pass through its own
 * observer (metrics, logs) and through any other interceptors given.
 */
export class RequestCheckingServer extends grpc.Server {
  readonly #guarded = new WeakSet<object>();
  readonly #onResetFlood: (closed: ClosedSession) => void;
  readonly #resetLimits: ResetLimits;
  /** One table of refused addresses for every address serve listens on. */
  readonly #penalties: AddressPenalties;

  constructor({ observe, rates, onResetFlood, resetLimits, ...options }: RequestCheckingServerOptions = {}) {
    super({ ...options, interceptors: [...(options.interceptors ?? []), requestCheckInterceptor(MAX_METADATA_BYTES, observe, rates)] });
    this.#onResetFlood = onResetFlood ?? (() => undefined);
    this.#resetLimits = resetLimits ?? DEFAULT_RESET_LIMITS;
    this.#penalties = new AddressPenalties(this.#resetLimits);
  }

  #http2Servers(): Http2Servers | undefined {
    return (this as unknown as { http2Servers?: Http2Servers }).http2Servers;
  }

  /**
   * grpc-js's, then the reset guard (session-guard.ts) on every HTTP/2
   * server it listens with: grpc-js builds them inside bindAsync and takes
   * no option for this, so they are read from its own table once bound.
   * Should a later grpc-js name that table otherwise, nothing is guarded
   * and test/grpc/rapid-reset.test.ts fails.
   */
  override bindAsync(port: string, creds: grpc.ServerCredentials, callback: (error: Error | null, port: number) => void): void {
    super.bindAsync(port, creds, (error, bound) => {
      if (!error) {
        for (const server of this.#http2Servers()?.keys() ?? []) {
          if (this.#guarded.has(server)) continue;
          this.#guarded.add(server);
          guardSessions(server, this.#onResetFlood, this.#resetLimits, this.#penalties);
        }
      }
      callback(error, bound);
    });
  }

  override addService(service: grpc.ServiceDefinition, implementation: grpc.UntypedServiceImplementation): void {
    super.addService(checkedService(service), implementation);
  }

  /**
   * grpc-js's, then every connection destroyed. grpc-js (1.14) destroys only
   * the sessions it tracks for channelz, which this server turns off: a
   * client stream left open (an import that never ends) kept its
   * connection, and serve's process, alive after the deadline of a stop.
   * The sessions are read from grpc-js's own table of its HTTP/2 servers;
   * should a later version name it otherwise, nothing is found here and
   * test/server/drain.test.ts fails.
   */
  override forceShutdown(): void {
    const servers = this.#http2Servers();
    const sessions = [...(servers?.values() ?? [])].flatMap((server) => [...(server.sessions ?? [])]);
    super.forceShutdown();
    for (const session of sessions) if (!session.destroyed) session.destroy();
  }
}
