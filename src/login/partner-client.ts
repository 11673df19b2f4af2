/**
 * The one partner-API client, used by the CLI and by the relay: undici with
 * a 10 s time-out on every call, JSON bodies, mutual TLS when a client
 * certificate is configured, and every failure as a typed error.
 */
import type { Agent, Dispatcher } from 'undici';
import { UpstreamError } from '../errors.js';
import { explainTlsFailure, transportError } from '../transport-error.js';
import { readFailure, unwrapEnvelope, type PartnerOperation } from './envelope.js';
import { readTokenData, type TokenData } from './token-data.js';
import { DEFAULT_PARTNER_PREFIX } from './partner-prefix.js';

const DEFAULT_TIMEOUT_MS = 10_000;
const MAX_RESPONSE_BYTES = 1024 * 1024;
/**
 * How the partner API's own path ends, whatever its prefix. A base URL that
 * already ends so is the whole partner URL (as `serve` and the sandbox print
 * it), and the prefix is not added a second time.
 */
const PARTNER_PATH_END = /\/user\/oauth2$/;

export interface ClientTls {
  /** PEM text. */
  cert?: string | undefined;
  key?: string | undefined;
  ca?: string | undefined;
}

export interface PartnerClientOptions {
  baseUrl: string;
  pathPrefix?: string;
  timeoutMs?: number;
  tls?: ClientTls;
  /** A dispatcher to share; the client then does not own it. Make it with `partnerAgent`, which carries the time-outs. */
  dispatcher?: Dispatcher;
  /** Told about every finished call (serve counts them); the CLI passes none. */
  observe?: PartnerCallObserver | undefined;
}

/** The partner-API calls a client makes (the doctor's probe is not one). */
export type PartnerEndpoint = Exclude<PartnerOperation, 'probe'>;

/**
 * How a call ended: `ok`; `api_error`, the partner answered with a failure
 * (its error envelope or an HTTP error status); `bad_response`, an answer
 * that is not what the spec describes; or no answer at all: `timeout`,
 * `unreachable`, `tls`, `transport_error` (any other network failure).
 */
export type PartnerCallOutcome = 'ok' | 'api_error' | 'bad_response' | 'timeout' | 'unreachable' | 'tls' | 'transport_error';

export interface PartnerCall {
  endpoint: PartnerEndpoint;
  outcome: PartnerCallOutcome;
  /** From the request's start until its answer was read and checked. */
  seconds: number;
}

export type PartnerCallObserver = (call: PartnerCall) => void;

const TRANSPORT_OUTCOMES: Readonly<Record<string, PartnerCallOutcome>> = {
  UPSTREAM_TIMEOUT: 'timeout',
  UPSTREAM_UNREACHABLE: 'unreachable',
  UPSTREAM_TLS: 'tls',
};

/** An undici Agent with the client certificate and CA, and our time-outs (undici loaded on first use: 150 ms of start-up that serve does not need before its first partner call). */
export async function partnerAgent(tls: ClientTls | undefined, timeoutMs: number, connections?: number): Promise<Agent> {
  const { Agent } = await import('undici');
  return new Agent({
    connect: {
      ...(tls?.cert ? { cert: tls.cert } : {}),
      ...(tls?.key ? { key: tls.key } : {}),
      ...(tls?.ca ? { ca: tls.ca } : {}),
      timeout: timeoutMs,
    },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    maxResponseSize: MAX_RESPONSE_BYTES,
    ...(connections ? { connections } : {}),
  });
}

export class PartnerClient {
  readonly baseUrl: string;
  readonly pathPrefix: string;
  readonly timeoutMs: number;
  /** Given, or made at the first call (#making until then). */
  #dispatcher: Dispatcher | undefined;
  #making: Promise<Dispatcher> | undefined;
  readonly #ownsDispatcher: boolean;
  readonly #clientCertificate: boolean;
  readonly #tls: ClientTls;
  readonly #origin: string;
  readonly #basePath: string;
  /** Whether the path prefix was added to the base URL's path (not when the base URL already ends in the partner path). */
  readonly #prefixed: boolean;
  readonly #observe: PartnerCallObserver | undefined;

  constructor(options: PartnerClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.pathPrefix = (options.pathPrefix ?? DEFAULT_PARTNER_PREFIX).replace(/\/+$/, '');
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#tls = options.tls ?? {};
    // Parsed once: the relay calls this on every request.
    const base = new URL(this.baseUrl);
    this.#origin = base.origin;
    const basePath = base.pathname.replace(/\/+$/, '');
    this.#prefixed = !(basePath.endsWith(this.pathPrefix) || PARTNER_PATH_END.test(basePath));
    this.#basePath = this.#prefixed ? `${basePath}${this.pathPrefix}` : basePath;
    this.#clientCertificate = Boolean(this.#tls.cert && this.#tls.key);
    this.#ownsDispatcher = !options.dispatcher;
    this.#dispatcher = options.dispatcher;
    this.#observe = options.observe;
  }

  async generateToken(authorizationCode: string, referrer: string): Promise<TokenData> {
    return this.#call('generate-token', 'POST', '/generate-token', { body: { authorizationCode, referrer } }, readTokenData);
  }

  async refreshToken(refreshToken: string): Promise<TokenData> {
    return this.#call('refresh-token', 'POST', '/refresh-token', { body: { refreshToken } }, readTokenData);
  }

  /** The signed-in user, personal fields still encrypted. */
  async loginMe(accessToken: string): Promise<Record<string, unknown>> {
    return this.#call('login-me', 'GET', '/login-me', { accessToken }, (payload) => {
      if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
        throw new UpstreamError('the partner API answered login-me without a user object', { code: 'BAD_RESPONSE' });
      }
      return payload as Record<string, unknown>;
    });
  }

  async removeByAccessToken(accessToken: string): Promise<void> {
    await this.#call('remove-by-access-token', 'POST', '/access/remove-by-access-token', { accessToken, body: {} });
  }

  /** The spec requires the Bearer token; some integrations send none, so it is optional. */
  async removeByUserKey(userKey: number, accessToken?: string): Promise<void> {
    await this.#call('remove-by-user-key', 'POST', '/access/remove-by-user-key', { accessToken, body: { userKey } });
  }

  /**
   * One GET of login-me with a token that cannot be valid: any HTTP answer
   * proves that TLS and routing work. Returns the status and whether the
   * body was one of the partner API's answers.
   */
  async probe(): Promise<{ status: number; envelope: boolean; prefixed: boolean }> {
    const { status, body } = await this.#send('probe', 'GET', '/login-me', { accessToken: 'miniapp-doctor-probe' });
    // Any of the partner API's answers proves the path: its envelope, a bare OAuth error (a snake_case code such as
    // invalid_grant, not a web server's "Not Found"), a top-level errorCode.
    const answer = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : undefined;
    const envelope =
      answer !== undefined &&
      ('resultType' in answer || (typeof answer.error === 'string' && /^[a-z][a-z_]*$/.test(answer.error)) || typeof answer.errorCode === 'string');
    return { status, envelope, prefixed: this.#prefixed };
  }

  async close(): Promise<void> {
    if (this.#ownsDispatcher) await (this.#dispatcher ?? (await this.#making))?.close();
  }

  #agent(): Promise<Dispatcher> {
    this.#making ??= partnerAgent(this.#tls, this.timeoutMs).then((agent) => {
      this.#dispatcher = agent;
      return agent;
    });
    return this.#making;
  }

  /** The partner API's URL: the base URL with the path prefix (added only when the base URL lacks it). */
  get partnerUrl(): string {
    return `${this.#origin}${this.#basePath}`;
  }

  url(path: string): string {
    return `${this.partnerUrl}${path}`;
  }

  /** One call: sent, unwrapped, read by `read` (which throws on a payload of the wrong shape), and observed. */
  async #call<T>(
    endpoint: PartnerEndpoint,
    method: 'GET' | 'POST',
    path: string,
    options: { accessToken?: string | undefined; body?: unknown },
    read: (payload: unknown) => T = (payload) => payload as T,
  ): Promise<T> {
    const started = performance.now();
    const call: { outcome?: PartnerCallOutcome } = {};
    try {
      const { status, body } = await this.#send(endpoint, method, path, options, call);
      try {
        const value = read(unwrapEnvelope(endpoint, status, body));
        call.outcome = 'ok';
        return value;
      } catch (error) {
        call.outcome = readFailure(status, body) ? 'api_error' : 'bad_response';
        throw error;
      }
    } finally {
      this.#observe?.({ endpoint, outcome: call.outcome ?? 'transport_error', seconds: (performance.now() - started) / 1000 });
    }
  }

  /** Sends one request and parses its JSON body; when it throws, `call.outcome` says why. */
  async #send(
    operation: PartnerOperation,
    method: 'GET' | 'POST',
    path: string,
    options: { accessToken?: string | undefined; body?: unknown },
    call: { outcome?: PartnerCallOutcome } = {},
  ): Promise<{ status: number; body: unknown }> {
    const url = this.url(path);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    if (options.accessToken) headers.authorization = `Bearer ${options.accessToken}`;
    let status: number;
    let text: string;
    try {
      const dispatcher = this.#dispatcher ?? (await this.#agent());
      const response = await dispatcher.request({
        origin: this.#origin,
        path: `${this.#basePath}${path}`,
        method,
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        // From a second up, the Agent's own header and body time-outs apply; undici's coarse
        // timers do not fire below a second, so shorter time-outs take a signal (its cost,
        // about 20 us a call, matters on the relay's hot path).
        ...(this.timeoutMs < 1000 ? { signal: AbortSignal.timeout(this.timeoutMs) } : {}),
      });
      status = response.statusCode;
      text = await response.body.text();
    } catch (error) {
      const explained = await explainTlsFailure(error, url, this.#tls, this.timeoutMs);
      const failure = transportError(explained ?? error, {
        service: 'the partner API',
        url: this.baseUrl,
        timeoutMs: this.timeoutMs,
        clientCertificate: this.#clientCertificate,
      });
      call.outcome = TRANSPORT_OUTCOMES[failure.code] ?? 'transport_error';
      throw failure;
    }
    if (!text.trim()) return { status, body: status < 300 ? {} : undefined };
    try {
      return { status, body: JSON.parse(text) as unknown };
    } catch {
      if (operation === 'probe' || status >= 400) return { status, body: undefined }; // e.g. a proxy's HTML error page
      call.outcome = 'bad_response';
      throw new UpstreamError(`the partner API answered ${operation} with HTTP ${status} and a body that is not JSON`, {
        code: 'BAD_RESPONSE',
      });
    }
  }
}
