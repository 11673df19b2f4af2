/**
 * `miniapp serve` put together: the data dir's database, the upstream (a
 * real partner API, or a sandbox started in the same process when none is
 * configured), the partner client, and the HTTP server. Returns the running
 * parts and one `close` that drains requests, then closes the rest.
 */
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { randomBytes } from 'node:crypto';
import { ConfigError } from '../errors.js';
import { parseAad, parseKey } from '../login/key-material.js';
import { PartnerClient, type ClientTls } from '../login/partner-client.js';
import { databasePath } from '../store/database.js';
import { connectionBudget, DEFAULT_POOL_SIZE, openStore, serveApplicationName, type Store, type StoreLocation } from '../store/store.js';
import type { Sql } from '../store/sql.js';
import { Readiness } from './readiness.js';
import { UnlinkEventStore } from '../store/unlink-events.js';
import { buildSandbox, type Sandbox } from '../sandbox/server.js';
import { DEFAULT_PARTNER_PREFIX } from '../login/partner-prefix.js';
import { HOST_PREFIX } from '../sandbox/host/routes.js';
import type { Term } from '../sandbox/partner/terms.js';
import { buildServer, type LogSink } from './app.js';
import { createMetrics } from './metrics.js';
import { UserStore } from '../users/user-store.js';
import { UserChangeLog } from '../users/change-log.js';
import { UserChangeFeed } from '../users/change-feed.js';
import { StreamGrants } from '../auth/stream-grants.js';
import { ADMIN_TOKEN_FILE, TokenService } from '../auth/tokens.js';
import { join } from 'node:path';
import { CallAuth } from '../grpc/call-auth.js';
import type { StreamQuotaLimits } from '../grpc/stream-quota.js';
import { UserServiceImpl } from '../users/service.js';
import { ChatHub, type SharedChat } from '../grpc/chat-hub.js';
import { startGrpcServer, type RunningGrpcServer } from '../grpc/server.js';
import { LogHub } from '../monitoring/log-hub.js';
import { MonitoringServiceImpl, type ChatMessage as OperatorsChatMessage } from '../monitoring/service.js';
import type { ChatMessage as UserChatMessage } from '../users/proto.js';
import { DEFAULT_HASH_COST } from '../auth/passwords.js';
import { DEFAULT_LOGIN_LIMITS, LoginLimiter, type LoginLimits } from '../auth/login-limits.js';
import { DEFAULT_SIGNUP_LIMITS, SignupLimiter, SignUps, type SignupLimits } from '../auth/signup-limits.js';
import { DEFAULT_REQUEST_RATES, RequestRates, type RequestRateLimits } from '../auth/request-rates.js';
import { PostStore, type Post } from '../blog/posts.js';
import { VersionLease } from '../store/version-lease.js';
import { openImageStore } from '../blog/uploads.js';
import { UploadGate } from '../blog/upload-receiver.js';
import { Commerce } from '../commerce/commerce.js';
import type { PaymentProvider } from '../commerce/payment/provider.js';
import { POST_CREATED } from '../blog/posts.js';
import { WebhookDispatcher, type WebhookLog as ComponentLog } from '../webhooks/dispatcher.js';
import { WebhookOutbox } from '../webhooks/outbox.js';
import type { SendWebhook } from '../webhooks/sender.js';
import type { TracingConfig } from '../telemetry/config.js';
import { SPAN_KIND, type Telemetry } from '../telemetry/telemetry.js';
import { TracedSql } from '../store/traced-sql.js';

/** How long a stop waits for calls in flight, webhook attempts and the last spans (ServeOptions.shutdownDeadlineMs). */
const DEFAULT_SHUTDOWN_DEADLINE_MS = 5_000;

export interface ServeOptions {
  host: string;
  port: number;
  store: StoreLocation;
  /** Port of the embedded sandbox, when one is started (default 0: a free one). */
  sandboxPort?: number;
  /** Open WatchUserChanges streams per account and in all (default DEFAULT_WATCH_LIMITS of users/service.ts). */
  watchLimits?: StreamQuotaLimits | undefined;
  /** How long a watcher may read nothing while changes wait (default DEFAULT_MAX_STALL_MS of grpc/stream-outbox.ts). */
  watchStallMs?: number | undefined;
  /** The partner API; undefined starts an embedded sandbox, and serves the host page (/host/) over it. */
  upstream?: { baseUrl: string; pathPrefix: string; tls: ClientTls } | undefined;
  /** With the embedded sandbox: the mini-app the host page shows (default: its demo) and the consent screen's terms. */
  hostPage?: { appUrl?: string | undefined; terms?: readonly Term[] | undefined } | undefined;
  timeoutMs?: number;
  decrypt: { key?: string | undefined; aad?: string | undefined };
  corsOrigin?: string | undefined;
  callbackAuth?: string | undefined;
  /** The relay's operator token (X-Operator-Token): /logout-by-user-key for any userKey. */
  operatorToken?: string | undefined;
  logger: { level: string; stream: LogSink } | false;
  version: string;
  now: () => Date;
  /** The gRPC user service; false leaves it out. */
  grpc: { host: string; port: number; tls?: { cert: string; key: string } | undefined } | false;
  /** log2 of scrypt's N for password hashes (default 14). */
  hashCost?: number;
  /** Limits on wrong passwords at the blog's login (default DEFAULT_LOGIN_LIMITS); false: none. */
  loginLimits?: LoginLimits | false | undefined;
  /** Sign-ups per client address, counted in the store (default DEFAULT_SIGNUP_LIMITS); false: none (their own hashing lane stays). */
  signupLimits?: SignupLimits | false | undefined;
  /**
   * Request rates per token or address on the HTTP APIs and the gRPC services, one budget per token over both
   * (default DEFAULT_REQUEST_RATES); false: none. Counted in this instance's memory.
   */
  requestRates?: RequestRateLimits | false | undefined;
  /** How long a graceful shutdown waits for running calls (gRPC and HTTP: then their connections are closed). */
  shutdownDeadlineMs?: number;
  /** How long a whole HTTP request, headers and body, may take to arrive (server/app.ts's default when absent). */
  requestTimeoutMs?: number | undefined;
  /** Publish the blog API's docs pages and OpenAPI descriptions (default true). */
  docs?: boolean;
  /** Where `post.created` goes, signed with the secret. Pending deliveries to URLs not listed here are held (see `miniapp webhooks`). */
  webhooks?: { urls: string[]; secret: string } | undefined;
  /** Where clients reach serve; links in answers are built under it (else relative). */
  publicUrl?: string | undefined;
  /** How long an upload's body may send nothing before it is dropped (default 10 s). */
  uploadIdleTimeoutMs?: number | undefined;
  /** Test aid: the webhook dispatcher's sender. */
  webhookSend?: SendWebhook | undefined;
  /** The name prefix of every metric series (default `miniapp_`; empty for the bare names). */
  metricsPrefix?: string | undefined;
  /** The Bearer token GET /metrics requires; none leaves it open to whoever reaches the HTTP port. Never logged. */
  metricsToken?: string | undefined;
  /** The commerce services' payment provider, built over serve's store (default: the sandbox, its books in the store). */
  paymentProvider?: ((sql: Sql) => PaymentProvider) | undefined;
  /** How long an order's reservation holds (default 15 minutes). */
  reservationTtlMs?: number | undefined;
  /** How often expired reservations and stale payments are swept (default 30 s; 0: only at start). */
  commerceSweepMs?: number | undefined;
  /** OpenTelemetry traces: where they go (telemetry/config.ts, from OTEL_* and --otlp-endpoint); undefined: off, and nothing of tracing loaded. */
  tracing?: TracingConfig | undefined;
  /** Where OTEL_TRACES_EXPORTER=console writes its span lines (the CLI: standard error). */
  spanLines?: ((line: string) => void) | undefined;
}

interface EmbeddedSandbox {
  url: string;
  partnerUrl: string;
  key: string;
  aad: string;
  generated: boolean;
}

export interface RunningServe {
  app: FastifyInstance;
  url: string;
  upstreamUrl: string;
  databaseFile: string | undefined;
  /** Where the data is, for the banner: the SQLite file, "in memory", or the PostgreSQL URL without its password. */
  database: string;
  /** Whether the database answers (readiness). */
  readiness: Readiness;
  sandbox: EmbeddedSandbox | undefined;
  /** The host page's URL, when the upstream is the embedded sandbox. */
  hostPage: string | undefined;
  grpc: { address: string; port: number; tls: boolean } | undefined;
  /** The admin token of the user service and the blog API, kept in the data dir. */
  adminToken: string;
  /** The 0600 file that holds it, on SQLite; undefined on PostgreSQL and in memory. */
  adminTokenFile: string | undefined;
  users: UserServiceImpl;
  monitoring: MonitoringServiceImpl;
  /** serve's log lines, kept and streamed (monitoring.v1 StreamLogs). */
  logs: LogHub;
  webhooks: WebhookDispatcher | undefined;
  /** Inventory, payments and orders (their gRPC services are served with the user service). */
  commerce: Commerce;
  /** What an operator should know at start-up (e.g. pools that add up past PostgreSQL's connection limit); also logged. */
  warnings: string[];
  /** Where traces go, for the banner; undefined when tracing is off. */
  tracing: string | undefined;
  /**
   * Begins the drain before a stop: from now on /health/ready answers 503
   * and the gRPC health service NOT_SERVING (for '' and every service), so
   * that load balancers take this instance out, while every call is still
   * answered as before; HTTP answers carry `Connection: close`, so that
   * keep-alive clients reconnect elsewhere. `close` ends it.
   */
  drain(): void;
  /**
   * Stops: both servers stop accepting and the webhook dispatcher stops
   * claiming, at once; calls in flight finish (gRPC until the shutdown
   * deadline), streams that never end by themselves (watch, chats,
   * StreamMetrics, StreamLogs) end with UNAVAILABLE, so clients reconnect,
   * and webhook deliveries not sent by then are released for another
   * instance; then the rest closes.
   */
  close(): Promise<void>;
  /**
   * Cuts a `close` short (an operator's second signal): every HTTP
   * connection and gRPC call is ended now instead of at the deadline; the
   * rest closes as usual.
   */
  hurry(): void;
}

/** Runs `stop` the first time it is called; later calls share that run (a step of `close` that the cleanups repeat). */
function once(stop: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => (running ??= stop());
}

function urlOf(app: FastifyInstance, host: string, scheme = 'http'): string {
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  // A wildcard bind is reached through loopback from this machine.
  const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return `${scheme}://${shown}:${port}`;
}

export async function startServe(options: ServeOptions): Promise<RunningServe> {
  const cleanups: (() => Promise<void> | void)[] = [];
  const closeAll = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  };
  try {
    const warnings: string[] = [];
    const instance = randomBytes(4).toString('hex');
    // Parts that log before the HTTP app (and its logger) exist write through this, once it does.
    let appLog: FastifyBaseLogger | undefined;
    // Started first, so that it stops last: spans of the whole shutdown are sent.
    let telemetry: Telemetry | undefined;
    if (options.tracing) {
      const { startTelemetry } = await import('../telemetry/otel.js');
      telemetry = await startTelemetry({
        config: options.tracing,
        version: options.version,
        instance,
        warn: (message) => appLog?.warn({ component: 'tracing' }, message),
        info: (message) => appLog?.info({ component: 'tracing' }, message),
        console: options.spanLines,
        // A collector that stalls must not hold the stop longer than calls in flight may.
        exportTimeoutMs: options.shutdownDeadlineMs ?? DEFAULT_SHUTDOWN_DEADLINE_MS,
      });
      cleanups.push(() => telemetry!.shutdown());
    }
    // PostgreSQL's connection and migration are round trips: the embedded sandbox, which needs no database, is built
    // and listening meanwhile (SQLite opens before openStore returns: nothing overlaps there).
    const opening = openStore(
      options.store.kind === 'postgres'
        ? {
            ...options.store,
            applicationName: serveApplicationName(instance, options.store.poolSize ?? DEFAULT_POOL_SIZE),
            onSignalsState: (state, detail) => (state === 'lost' ? appLog?.warn({ component: 'store' }, detail) : appLog?.info({ component: 'store' }, detail)),
          }
        : options.store,
    );
    // Awaited below; a failure meanwhile (the sandbox's) must not leave the store's own failure unhandled.
    opening.catch(() => undefined);
    // Closed with the rest, once opened, whatever fails after this.
    cleanups.push(async () => {
      const store = await opening.catch(() => undefined);
      await store?.close(options.shutdownDeadlineMs);
    });
    let sandbox: Sandbox | undefined;
    let embedded: EmbeddedSandbox | undefined;
    let upstream = options.upstream;
    let keyText = options.decrypt.key;
    let aadText = options.decrypt.aad;
    if (!upstream) {
      const generated = !keyText || !aadText;
      const key = keyText ? parseKey(keyText).bytes : randomBytes(32);
      const aad = aadText ? parseAad(aadText).bytes : randomBytes(16);
      keyText = key.toString('hex');
      aadText = aad.toString('hex');
      sandbox = await buildSandbox({ key, aad, terms: options.hostPage?.terms });
      cleanups.push(() => sandbox!.app.close());
      await sandbox.app.listen({ host: '127.0.0.1', port: options.sandboxPort ?? 0 });
      const url = urlOf(sandbox.app, '127.0.0.1');
      embedded = { url, partnerUrl: `${url}${DEFAULT_PARTNER_PREFIX}`, key: keyText, aad: aadText, generated };
      upstream = { baseUrl: url, pathPrefix: DEFAULT_PARTNER_PREFIX, tls: {} };
    }
    const opened = await opening;
    // Every repository gets the store through this: with tracing on, each statement and transaction is a span.
    const store: Store = telemetry ? { ...opened, sql: new TracedSql(opened.sql, telemetry) } : opened;
    if (options.store.kind === 'postgres') {
      const budget = await connectionBudget(store.sql, { instance, poolSize: options.store.poolSize ?? DEFAULT_POOL_SIZE });
      if (budget.warning) warnings.push(budget.warning);
    }
    // The gRPC health service follows the database: NOT_SERVING while it cannot answer.
    let grpcHealth: ((serving: boolean) => void) | undefined;
    const readiness = new Readiness({ store, onChange: (ready) => grpcHealth?.(ready) });
    cleanups.push(() => readiness.stop());
    const events = new UnlinkEventStore(store.sql);

    if (!keyText || !aadText) {
      throw new ConfigError(`${keyText ? 'decrypt-aad' : 'decrypt-key'} is not set: /api/auth/me could not decrypt the personal fields`, {
        hint: 'set decrypt-key and decrypt-aad (`miniapp config set ...` or MINIAPP_DECRYPT_KEY / MINIAPP_DECRYPT_AAD)',
      });
    }
    const key = parseKey(keyText);
    const aad = parseAad(aadText);

    const outbox = new WebhookOutbox(store, options.now);
    let commerce: Commerce | undefined;
    const metrics = createMetrics({
      prefix: options.metricsPrefix,
      pendingWebhooks: () => outbox.pendingCount(),
      ordersByStatus: async () => (commerce ? commerce.orders.countByStatus() : {}),
      // The readiness answer's last check: a scrape does not query the database for it.
      ready: () => readiness.ready,
    });
    const client = new PartnerClient({ ...upstream, timeoutMs: options.timeoutMs, observe: metrics.observeUpstream });
    cleanups.push(() => client.close());

    const logs = new LogHub();
    // With tracing on, a line logged inside a traced call carries its trace_id and span_id.
    const traceFields = telemetry ? () => telemetry!.logFields() : () => undefined;
    const logAs = (component: string): ComponentLog => ({
      info: (fields, message) => appLog?.info({ component, ...traceFields(), ...fields }, message),
      warn: (fields, message) => appLog?.warn({ component, ...traceFields(), ...fields }, message),
      error: (fields, message) => appLog?.error({ component, ...traceFields(), ...fields }, message),
    });
    // One user store and one token module for the gRPC service and the blog API.
    const changeLog = new UserChangeLog(store.sql, store.signals, options.now);
    const userStore = new UserStore(store.sql, changeLog, options.now);
    // Request rates: a token has a bucket of its own once it authenticates (auth/request-rates.ts).
    const requestRateLimits = options.requestRates ?? DEFAULT_REQUEST_RATES;
    const requestRates = requestRateLimits ? new RequestRates(requestRateLimits, () => options.now().getTime()) : undefined;
    const tokens = new TokenService(
      store.sql,
      options.now,
      store.signals,
      requestRates && ((hashed, authenticated) => requestRates.vouch(hashed, authenticated)),
    );
    const adminToken = await tokens.ensureAdminToken(store.dataDir, (file, mode) =>
      warnings.push(`the admin token file ${file} was mode ${mode.toString(8).padStart(4, '0')}, readable by others: made it 0600`),
    );
    const grpcLog = logAs('grpc');
    const changes = new UserChangeFeed(changeLog, store.signals, { now: options.now, warn: (message, fields) => grpcLog.warn(fields, message) });
    // Chat rooms span the instances of a shared store; on SQLite or in memory there is one instance.
    const sharedChat = (channel: string): SharedChat | undefined =>
      store.kind === 'postgres'
        ? { sql: store.sql, signals: store.signals, channel, now: options.now, warn: (message, fields) => grpcLog.warn(fields, message) }
        : undefined;
    const userChat = new ChatHub<UserChatMessage>({ shared: sharedChat('user_chat') });
    const operatorsChat = new ChatHub<OperatorsChatMessage>({ shared: sharedChat('operators_chat') });
    // Long streams follow their tokens: a user deactivated, deleted or demoted, or a token revoked, on any instance.
    const grants = new StreamGrants({
      tokens,
      signals: store.signals,
      follow: (listener) => changes.follow((change) => listener(change.user.id)),
      now: options.now,
      warn: (message, fields) => grpcLog.warn(fields, message),
    });
    const auth = new CallAuth(tokens, grants);
    for (const part of [changes, grants, userChat, operatorsChat]) {
      await part.start();
      cleanups.push(() => part.stop());
    }
    const signupLimits = options.signupLimits ?? DEFAULT_SIGNUP_LIMITS;
    const users = new UserServiceImpl({
      users: userStore,
      auth,
      watchLimits: options.watchLimits,
      watchStallMs: options.watchStallMs,
      changes,
      chat: userChat,
      hashCost: options.hashCost ?? DEFAULT_HASH_COST,
      now: options.now,
      log: (message, fields) => grpcLog.error(fields ?? {}, message),
      rates: requestRates,
      signups: new SignUps(tokens, signupLimits ? new SignupLimiter(store.sql, signupLimits, options.now) : undefined),
    });
    let serviceName = 'miniapp';
    const monitoring = new MonitoringServiceImpl({
      chat: operatorsChat,
      auth,
      metrics: metrics.registry,
      logs,
      serviceName: () => serviceName,
      now: options.now,
    });
    const webhooks = options.webhooks;
    const dispatcher = webhooks
      ? new WebhookDispatcher({
          outbox,
          secret: webhooks.secret,
          // Deliveries to a URL no longer given are held for `webhooks resend|cancel`, not retried for ever.
          urls: webhooks.urls,
          now: options.now,
          version: options.version,
          send: options.webhookSend,
          log: logAs('webhooks'),
          observe: metrics.observeWebhook,
          telemetry,
        })
      : undefined;
    // order.paid, order.refunded, order.cancelled and payment.refunded go out as post.created does: written in the
    // transaction that makes them, the dispatcher woken once it commits.
    // `data` may be a function: it is then called only when there are URLs to send to.
    const publish = async (event: string, data: unknown, tx: Sql) => {
      if (!dispatcher || !webhooks || webhooks.urls.length === 0) return;
      const enqueue = async () => {
        const payload = typeof data === 'function' ? await (data as () => Promise<unknown>)() : data;
        // The outbox span's traceparent is kept with the deliveries: their attempts' spans link back to it.
        await dispatcher.outbox.enqueue(event, payload, webhooks.urls, tx, telemetry?.traceparent());
        tx.afterCommit(() => dispatcher.notify());
      };
      if (!telemetry) return enqueue();
      const attributes = {
        'messaging.system': 'webhook',
        'messaging.operation.type': 'create',
        'messaging.destination.name': event,
        'messaging.batch.message_count': webhooks.urls.length,
      };
      return telemetry.inSpan(`webhook enqueue ${event}`, { kind: SPAN_KIND.PRODUCER, requireParent: true, attributes }, enqueue);
    };
    commerce = new Commerce({
      sql: store.sql,
      now: options.now,
      authenticate: (metadata) => users.authenticate(metadata),
      provider: options.paymentProvider?.(store.sql),
      telemetry,
      // None without webhooks: the commerce steps then write nothing beside their own rows, and on PostgreSQL the
      // settlement of a payment is one statement (a webhook event needs the settlement's transaction).
      publish: dispatcher && webhooks && webhooks.urls.length > 0 ? publish : undefined,
      observe: metrics.observeCommerce,
      reservationTtlMs: options.reservationTtlMs,
      sweepMs: options.commerceSweepMs,
      log: (message, fields) => grpcLog.error(fields ?? {}, message),
      warn: (message, fields) => logAs('commerce').warn(fields ?? {}, message),
    });
    // Payments a stopped process left in progress are settled before any call is taken.
    await commerce.start();
    cleanups.push(() => commerce!.stop());
    let grpcServer: RunningGrpcServer | undefined;
    let stopGrpc: (() => Promise<void>) | undefined;
    if (options.grpc) {
      grpcServer = await startGrpcServer({
        ...options.grpc,
        services: [
          { name: 'user.v1.UserService', handlers: users.handlers() },
          { name: 'monitoring.v1.MonitoringService', handlers: monitoring.handlers() },
          { name: 'inventory.v1.InventoryService', handlers: commerce.inventoryService.handlers() },
          { name: 'payment.v1.PaymentService', handlers: commerce.paymentService.handlers() },
          { name: 'order.v1.OrderService', handlers: commerce.orderService.handlers() },
        ],
        metrics: metrics.grpc,
        log: grpcLog,
        telemetry,
        rates: requestRates,
        onShutdown: () => {
          users.endStreams();
          monitoring.endStreams();
        },
      });
      stopGrpc = once(() => grpcServer!.shutdown(options.shutdownDeadlineMs));
      cleanups.push(stopGrpc);
      grpcHealth = (serving) => grpcServer!.setServing(serving);
    }

    const images = openImageStore(store, options.now);
    cleanups.push(() => images.close());
    const loginLimits = options.loginLimits ?? DEFAULT_LOGIN_LIMITS;
    // The blog's logins and the relay's code exchanges and refreshes, each in a key space of its own.
    const loginLimiter = loginLimits ? new LoginLimiter(store.sql, loginLimits, options.now) : undefined;
    // PostgreSQL: the posts' version known without a round trip per list request, under a lease every writer honours.
    let postsLease: VersionLease | undefined;
    if (store.kind === 'postgres') {
      postsLease = await VersionLease.start(store.sql, store.signals, {
        counter: 'posts',
        onState: (state, detail) => (state === 'lost' ? appLog?.warn({ component: 'store' }, detail) : appLog?.info({ component: 'store' }, detail)),
      });
      cleanups.push(() => postsLease!.close());
    }
    const blog = {
      posts: new PostStore(store.sql, options.now, { lease: postsLease }),
      users,
      tokens,
      images,
      docs: options.docs ?? true,
      publicUrl: options.publicUrl,
      loginLimiter,
      // One cap on uploads in flight over every mount.
      uploadGate: new UploadGate(),
      uploadIdleTimeoutMs: options.uploadIdleTimeoutMs,
      // In the transaction that writes the post (tx): both commit or neither (see publish above).
      onPublished: (post: Post, tx: Sql) => publish(POST_CREATED, post, tx),
    };

    const app = await buildServer({
      logger: options.logger ? { level: options.logger.level, stream: logs.sink(options.logger.stream) } : false,
      corsOrigin: options.corsOrigin,
      relay: {
        client,
        key,
        aad,
        events,
        callbackAuth: options.callbackAuth,
        operatorToken: options.operatorToken,
        version: options.version,
        now: options.now,
        ready: async () => ({ ready: await readiness.check(), reason: readiness.reason }),
        grantLimiter: loginLimiter,
      },
      metrics,
      metricsToken: options.metricsToken,
      blog,
      telemetry,
      requestRates,
      draining: () => readiness.draining,
      requestTimeoutMs: options.requestTimeoutMs,
      sandboxHost: sandbox
        ? {
            state: sandbox.state,
            callback: sandbox.callback,
            appUrl: options.hostPage?.appUrl,
            // Pages that may log in through the login window: the one browser origin of the relay, the app URL's.
            appOrigins: [options.corsOrigin, options.hostPage?.appUrl && new URL(options.hostPage.appUrl).origin].filter((origin): origin is string =>
              Boolean(origin),
            ),
          }
        : undefined,
    });
    // Fastify's close waits for every request in flight, and a client that never finishes its body (or never reads
    // the answer) held it, and the process, for as long as it liked. At the deadline, or at `hurry`, every connection
    // is closed; the close then ends at once.
    const closeHttpConnections = () => app.server.closeAllConnections();
    const stopHttp = once(async () => {
      const deadline = setTimeout(closeHttpConnections, options.shutdownDeadlineMs ?? DEFAULT_SHUTDOWN_DEADLINE_MS);
      try {
        await app.close();
      } finally {
        clearTimeout(deadline);
      }
    });
    cleanups.push(stopHttp);
    appLog = app.log;
    for (const warning of warnings) appLog.warn({ component: 'store' }, warning);
    await app.listen({ host: options.host, port: options.port });
    readiness.start();
    const url = urlOf(app, options.host);
    serviceName = `miniapp ${url}`;
    let stopWebhooks: (() => Promise<void>) | undefined;
    if (dispatcher) {
      await dispatcher.start();
      // Registered after the database, so it stops first: the attempt in flight is recorded before the close.
      // The deadline of the gRPC calls in flight (5 s unless given) holds for a webhook attempt too; what is cut
      // short is released for another instance.
      stopWebhooks = once(() => dispatcher.stop({ deadlineMs: options.shutdownDeadlineMs ?? DEFAULT_SHUTDOWN_DEADLINE_MS }));
      cleanups.push(stopWebhooks);
    }
    sandbox?.setCallback({ url: `${url}/api/auth/unlink-callback`, method: 'POST', basicAuth: options.callbackAuth });

    return {
      app,
      url,
      upstreamUrl: client.partnerUrl,
      databaseFile: options.store.kind === 'sqlite' ? databasePath(options.store.dataDir) : undefined,
      database: store.description,
      readiness,
      sandbox: embedded,
      hostPage: sandbox ? `${url}${HOST_PREFIX}/` : undefined,
      grpc: grpcServer && options.grpc ? { address: grpcServer.address, port: grpcServer.port, tls: Boolean(options.grpc.tls) } : undefined,
      adminToken,
      adminTokenFile: options.store.kind === 'sqlite' && store.dataDir ? join(store.dataDir, ADMIN_TOKEN_FILE) : undefined,
      users,
      monitoring,
      logs,
      webhooks: dispatcher,
      commerce,
      warnings,
      tracing: telemetry?.description,
      drain: () => readiness.drain(),
      close: async () => {
        // Nothing new is taken anywhere while what is in flight finishes; then the parts below close in order.
        const stopped = await Promise.allSettled([stopHttp(), stopGrpc?.(), stopWebhooks?.()]);
        await closeAll();
        for (const result of stopped) if (result.status === 'rejected') throw result.reason;
      },
      hurry: () => {
        closeHttpConnections();
        grpcServer?.cancelAll();
      },
    };
  } catch (error) {
    await closeAll();
    throw error;
  }
}
