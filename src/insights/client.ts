/**
 * The graph API client: `GET {graph-url}/{graph-version}/{object}` over
 * undici, the token as the `access_token` query parameter (spec 001,
 * "Authentication") and nowhere else, a 10 s time-out, typed errors,
 * throttling through throttle.ts, and paging that follows `paging.next`
 * until it is absent.
 *
 * The token is added to a request at the last moment and every URL that
 * reaches a message, a log line or an error goes through `redactUrl`.
 */
import { Agent, request, type Dispatcher } from 'undici';
import { UpstreamError } from '../errors.js';
import { transportError } from '../transport-error.js';
import { graphErrorOf, isThrottleCode, mapGraphError, RateLimitError, redact, redactUrl } from './errors.js';
import { parseUsage, Throttle, type Sleep, type UsageReading } from './throttle.js';

const DEFAULT_TIMEOUT_MS = 10_000;

export type Query = Record<string, string | number | undefined>;

export interface RequestLog {
  /** The URL without the token. */
  url: string;
  status: number | undefined;
  ms: number;
  /** 0 for the first try, then the retry number. */
  attempt: number;
}

export interface GraphClientOptions {
  /** `graph-url`, e.g. https://graph.facebook.com or http://127.0.0.1:PORT/graph. */
  baseUrl: string;
  /** `graph-version`, e.g. v18.0; empty: unversioned paths, served at the app's default version. */
  version: string;
  token: string;
  /** Without one, the client makes its own Agent and closes it in close(). */
  dispatcher?: Dispatcher;
  timeoutMs?: number;
  maxRetries?: number;
  /** Base back-off (default 60 s); tests shorten it. */
  backoffMs?: number;
  sleep?: Sleep;
  /** Warnings for the person at the terminal (usage near the limit). */
  onWarn?: (message: string) => void;
  /** Every request, token-free: for --debug. */
  onRequest?: (log: RequestLog) => void;
  userAgent?: string;
}

export interface ListPage<T> {
  data: T[];
  paging?: { cursors?: { before?: string; after?: string }; next?: string; previous?: string };
}

/** Metrics named in a request (the metric parameter or `.metric(...)` in fields): what a code-100 error may be about. */
export function metricsOf(url: URL): string[] {
  const metrics = (url.searchParams.get('metric') ?? '').split(',');
  for (const [, list] of (url.searchParams.get('fields') ?? '').matchAll(/\.metric\(([^()]*)\)/g)) metrics.push(...list!.split(','));
  return [...new Set(metrics.map((m) => m.trim()).filter(Boolean))];
}

export class GraphClient {
  readonly throttle: Throttle;
  readonly base: URL;
  /** graph-url itself, with a trailing slash: paging links must stay under it. */
  readonly root: URL;
  /** HTTP requests sent, retries included. */
  calls = 0;
  readonly #token: string;
  readonly #dispatcher: Dispatcher;
  readonly #ownDispatcher: boolean;
  readonly #timeoutMs: number;
  readonly #onRequest: (log: RequestLog) => void;
  readonly #userAgent: string;

  constructor(options: GraphClientOptions) {
    const root = `${options.baseUrl.replace(/\/+$/, '')}/`;
    this.root = new URL(root);
    this.base = new URL(options.version ? `${root}${options.version}/` : root);
    this.#token = options.token;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#ownDispatcher = options.dispatcher === undefined;
    this.#dispatcher = options.dispatcher ?? new Agent({ connect: { timeout: this.#timeoutMs } });
    this.#onRequest = options.onRequest ?? (() => {});
    this.#userAgent = options.userAgent ?? 'miniapp';
    this.throttle = new Throttle({
      ...(options.backoffMs === undefined ? {} : { backoffMs: options.backoffMs }),
      ...(options.maxRetries === undefined ? {} : { maxRetries: options.maxRetries }),
      ...(options.sleep === undefined ? {} : { sleep: options.sleep }),
      ...(options.onWarn === undefined ? {} : { onWarn: options.onWarn }),
    });
  }

  /** `{base}/{version}/{path}?{query}`, without the token. */
  url(path: string, query: Query = {}): URL {
    const url = new URL(path.replace(/^\/+/, ''), this.base);
    for (const [name, value] of Object.entries(query)) if (value !== undefined) url.searchParams.set(name, String(value));
    return url;
  }

  get<T>(path: string, query: Query = {}): Promise<T> {
    return this.fetch<T>(this.url(path, query));
  }

  /**
   * A URL the API handed out (`paging.next`): it must stay under graph-url,
   * so that the token never goes to another host. Its own access_token is
   * replaced by ours.
   */
  followUrl(link: string): URL {
    let url: URL;
    try {
      url = new URL(link);
    } catch {
      throw new UpstreamError(`the graph API sent a paging link that is not a URL: ${redact(link, this.#token).slice(0, 200)}`);
    }
    if (url.origin !== this.root.origin || !url.pathname.startsWith(this.root.pathname)) {
      throw new UpstreamError(`the graph API sent a paging link outside graph-url (${redactUrl(url)}); not following it with the token`);
    }
    url.searchParams.delete('access_token');
    return url;
  }

  /** Every item of a list, following paging.next until it is absent. */
  async list<T>(path: string, query: Query = {}): Promise<T[]> {
    const items: T[] = [];
    let url: URL | undefined = this.url(path, query);
    while (url) {
      const page: ListPage<T> = await this.fetch<ListPage<T>>(url);
      items.push(...(Array.isArray(page.data) ? page.data : []));
      url = page.paging?.next ? this.followUrl(page.paging.next) : undefined;
    }
    return items;
  }

  /** One GET with retries on throttling; returns the parsed JSON or throws a typed error. */
  async fetch<T>(target: URL): Promise<T> {
    const what = redactUrl(target);
    for (let attempt = 0; ; attempt++) {
      await this.throttle.beforeRequest();
      const withToken = new URL(target);
      withToken.searchParams.set('access_token', this.#token);
      const started = performance.now();
      let status: number | undefined;
      let text: string;
      let usage: UsageReading;
      this.calls++;
      try {
        const response = await request(withToken, {
          method: 'GET',
          dispatcher: this.#dispatcher,
          signal: AbortSignal.timeout(this.#timeoutMs),
          headersTimeout: this.#timeoutMs,
          bodyTimeout: this.#timeoutMs,
          headers: { accept: 'application/json', 'user-agent': this.#userAgent },
        });
        status = response.statusCode;
        usage = parseUsage(response.headers);
        text = await response.body.text();
      } catch (error) {
        this.#onRequest({ url: what, status, ms: performance.now() - started, attempt });
        // The shared classification (time-out, network, TLS), with the token kept out of the message.
        const failure = transportError(error, {
          service: 'the graph API',
          url: this.base.origin,
          timeoutMs: this.#timeoutMs,
          clientCertificate: false,
        });
        throw new UpstreamError(`${redact(failure.message, this.#token)} (GET ${what})`, {
          code: failure.code,
          hint: `${failure.hint ? `${failure.hint}; ` : ''}check graph-url (\`miniapp config get graph-url\`) and your network`,
        });
      }
      this.#onRequest({ url: what, status, ms: performance.now() - started, attempt });
      this.throttle.observe(usage);

      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        throw new UpstreamError(`the graph API answered HTTP ${status} with a body that is not JSON (GET ${what})`, {
          hint: 'check graph-url: it should be the API root, such as https://graph.facebook.com',
        });
      }
      const graph = graphErrorOf(body);
      if (!graph && status < 400) return body as T;
      if (graph ? isThrottleCode(graph.code) : status === 429) {
        if (attempt >= this.throttle.maxRetries) {
          const reason = graph ? `code ${graph.code}: ${redact(graph.message, this.#token)}` : `HTTP ${status}`;
          throw new RateLimitError(
            this.throttle.maxRetries === 0
              ? `the graph API rate limit is exceeded, and --max-retries is 0 (${reason})`
              : `the graph API rate limit is still exceeded after ${this.throttle.maxRetries} ${this.throttle.maxRetries === 1 ? 'retry' : 'retries'} (${reason})`,
            {
              hint:
                usage.regainMinutes !== undefined && usage.regainMinutes > 0
                  ? `the API expects access again in about ${usage.regainMinutes} min; try then, or raise --max-retries`
                  : 'wait for the hourly limit to reset (200 calls an hour for a developer app), or raise --max-retries',
            },
          );
        }
        await this.throttle.waitToRetry(attempt, usage, graph?.code);
        continue;
      }
      if (!graph) throw new UpstreamError(`the graph API answered HTTP ${status} without an error body (GET ${what})`);
      throw mapGraphError(graph, { status, what, metrics: metricsOf(target), token: this.#token });
    }
  }

  #closing: Promise<void> | undefined;

  /** Closes the connections once the calls in flight end; `abort`: at once, failing those calls (a job interrupted). */
  close(options: { abort?: boolean } = {}): Promise<void> {
    if (!this.#ownDispatcher) return Promise.resolve();
    this.#closing ??= options.abort ? this.#dispatcher.destroy() : this.#dispatcher.close();
    return this.#closing;
  }
}
