import { Option, type Command } from '../commander.js';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import { ConfigError, PortInUseError, UsageError } from '../../errors.js';
import { partnerTls, timeoutMs } from '../connect/profile.js';
import { parsePort, parseWholeNumber } from '../flags.js';
import { parseDuration } from '../../duration.js';
import { checkMetricsPrefix, DEFAULT_METRICS_PREFIX } from '../../server/metric-prefix.js';
import { DEFAULT_LOGIN_LIMITS, describeLoginLimits } from '../../auth/login-limits.js';
import { DEFAULT_SIGNUP_LIMITS, describeSignupLimits } from '../../auth/signup-limits.js';
import { describeTracing, resolveTracing } from '../../telemetry/config.js';
import { DEFAULT_REQUEST_RATES, describeRequestRates } from '../../auth/request-rates.js';
import { DEFAULT_DRAIN_MS, MAX_DRAIN_MS } from '../../server/drain.js';
import { redactUrl } from '../../url-redaction.js';
import { addHostPageOptions, hostPageFlagsGiven, hostPageOptions, type HostPageFlags } from '../connect/host-page.js';

interface ServeFlags extends HostPageFlags {
  host: string;
  port: string;
  upstream?: string;
  corsOrigin?: string;
  dataDir?: string;
  store: string;
  database?: string;
  databasePool: string;
  databaseTimeout: string;
  callbackAuth?: string;
  operatorToken?: string;
  metricsToken?: string;
  logLevel: string;
  logFormat?: string;
  sandboxPort?: string;
  timeout: string;
  grpc: boolean;
  grpcHost: string;
  grpcPort: string;
  grpcTlsCert?: string;
  grpcTlsKey?: string;
  passwordHashCost: string;
  loginAttempts: string;
  signupLimit: string;
  otlpEndpoint?: string;
  rateLimit: string;
  rateBurst?: string;
  docs: boolean;
  saveProfile?: boolean;
  webhookUrl: string[];
  webhookSecret?: string;
  publicUrl?: string;
  metricsPrefix: string;
  drain: string;
  requestTimeout: string;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function registerServe(program: Command, bind: Bind): void {
  const serve = program
    .command('serve')
    .description(
      'Start the servers. Over HTTP: the relay (/api/auth/*, /health, /health/ready), the blog API (/api/v1, /api/v2, ' +
        '/api) with its docs, and /metrics. Over gRPC: the user service (user.v1), the commerce services (inventory.v1, ' +
        'order.v1, payment.v1) and the monitoring service (monitoring.v1), with health and reflection. Webhooks go out ' +
        'to --webhook-url. Everything is kept in SQLite in the data dir, or in the PostgreSQL of --database, which any ' +
        "number of instances may share. The upstream partner API is --upstream, else the profile's base-url, else a " +
        'sandbox started in the same process, with the host page at /host/ (your mini-app in a phone frame, appLogin() and the consent screen). On SIGTERM it drains: not ready at once (/health/ready 503, gRPC health ' +
        'NOT_SERVING) but still answering for --drain, so load balancers move away; then it stops accepting, finishes ' +
        'the calls in flight, ends streams with UNAVAILABLE (clients reconnect and resume elsewhere) and releases its ' +
        "webhook deliveries to the other instances. Ctrl-C (SIGINT), or a second signal, skips the drain's wait. " +
        'Limits against abuse are on by default (--login-attempts, --rate-limit, --signup-limit); OpenTelemetry traces are off until ' +
        '--otlp-endpoint or OTEL_EXPORTER_OTLP_ENDPOINT names a collector.',
    )
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--port <port>', 'HTTP port (0 picks a free one)', '3000')
    .option('--upstream <url>', "partner API base URL (default: the profile's base-url, else an embedded sandbox)")
    .option('--cors-origin <origin>', 'the one browser origin allowed to call the relay and the blog API, with credentials')
    .option(
      '--public-url <url>',
      'where clients reach this server (e.g. https://blog.example.com behind a proxy): links in answers are built under it; default: relative links',
    )
    .option('--data-dir <dir>', 'where the database lives (default: MINIAPP_DATA_DIR, else ~/.local/share/miniapp)')
    .option('--store <kind>', 'sqlite (in the data dir) or memory, when there is no --database', 'sqlite')
    .option(
      '--database <url>',
      'a PostgreSQL shared by any number of serve instances: postgres://USER:PASSWORD@HOST:PORT/DB[?sslmode=verify-full&sslrootcert=ca.pem] (default: MINIAPP_DATABASE_URL, else database-url; none: SQLite in the data dir)',
    )
    .option('--database-pool <n>', 'connections to PostgreSQL of this instance', '10')
    .option('--database-timeout <duration>', 'how long a call waits for PostgreSQL before it fails (503 / UNAVAILABLE)', '5s')
    .option('--callback-auth <id:password>', 'Basic-Auth credentials the unlink callback must carry')
    .option(
      '--operator-token <token>',
      "operator credential (or MINIAPP_OPERATOR_TOKEN), at least 16 characters: sent as X-Operator-Token, /api/auth/logout-by-user-key removes any user's connection (without it, a token removes only its own user's)",
    )
    .option('--log-level <level>', `log level: ${LOG_LEVELS.join(', ')}`, 'info')
    .addOption(
      new Option('--log-format <format>', 'pretty (one line per request) or json (default: pretty on a terminal, json otherwise)').choices(['pretty', 'json']),
    )
    .option('--sandbox-port <port>', 'port of the embedded sandbox, when no upstream is configured (default: a free one)')
    .option('--timeout <duration>', 'time-out of each call to the partner API', '10s')
    .option('--grpc-host <host>', 'address of the gRPC services', '127.0.0.1')
    .option('--grpc-port <port>', 'port of the gRPC services (0 picks a free one)', '50051')
    .option('--grpc-tls-cert <file>', 'serve gRPC over TLS with this certificate (PEM file or text)')
    .option('--grpc-tls-key <file>', 'and this private key')
    .option('--no-grpc', 'do not start the gRPC services')
    .option(
      '--save-profile',
      "store this serve's gRPC address and admin token (and TLS) in the profile even when it has some already (default: only when it has none)",
    )
    .option('--no-docs', "do not publish the blog API's docs pages and OpenAPI descriptions")
    .option(
      '--webhook-url <url>',
      'send post.created, order.paid, order.refunded, order.cancelled and payment.refunded to this URL (repeatable)',
      (value: string, all: string[]) => [...all, value],
      [] as string[],
    )
    .option(
      '--webhook-secret <secret>',
      'HMAC-SHA256 key of X-Webhook-Signature and webhook-signature (or MINIAPP_WEBHOOK_SECRET; whsec_<base64> is read as Standard Webhooks read it)',
    )
    .option(
      '--drain <duration>',
      "on SIGTERM, how long to keep answering while not ready before stopping (0 to 10m; 0 stops at once); keep it above your load balancer's health-check interval times its failure threshold",
      `${DEFAULT_DRAIN_MS / 1000}s`,
    )
    .option(
      '--request-timeout <duration>',
      'how long a whole HTTP request, headers and body, may take to arrive (1s to 10m); past it the answer is 408 and the connection is closed',
      '30s',
    )
    .option(
      '--metrics-token <token>',
      'Bearer token GET /metrics requires (or MINIAPP_METRICS_TOKEN), at least 16 characters; without one /metrics (payment totals among it) is open to whoever reaches the HTTP port',
    )
    .option(
      '--metrics-prefix <prefix>',
      'name prefix of every /metrics series; "" for the bare names of the spec and go-grpc-prometheus',
      DEFAULT_METRICS_PREFIX,
    )
    .addOption(new Option('--password-hash-cost <log2N>', 'scrypt cost of new password hashes, as log2 of N (10 to 20)').default('14'))
    .option(
      '--login-attempts <n>',
      "wrong passwords allowed per account and address at the blog's login (and 10 times as many, at least 50, per address; the same per address for codes and refresh tokens the partner API refuses at the relay) before the back-off: locked for 1 s, doubling to 15 min, answered 429; 0 turns the limits off",
      String(DEFAULT_LOGIN_LIMITS.perAccount),
    )
    .option(
      '--signup-limit <n>',
      'sign-ups (accounts made without the admin token, through POST /users or CreateUser) allowed per client address (an IPv6 /64) in an hour from its first, counted in the store by every instance together (N or N/hour); over it: 429 TOO_MANY_SIGNUPS or RESOURCE_EXHAUSTED; 0 turns the limit off',
      String(DEFAULT_SIGNUP_LIMITS.perAddress),
    )
    .option(
      '--otlp-endpoint <url>',
      'send OpenTelemetry traces over OTLP to this collector (e.g. http://127.0.0.1:4318); the standard OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, ...) work too; default: off',
    )
    .option(
      '--rate-limit <n>',
      'requests per second allowed per access token (per client address without one) on the blog API, the relay and the gRPC services, counted by each instance; over it: 429 or RESOURCE_EXHAUSTED; 0 turns the limit off',
      String(DEFAULT_REQUEST_RATES.perSecond),
    )
    .option('--rate-burst <n>', 'requests a token or address may send at once after a quiet spell (default: twice --rate-limit)')
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp serve\n  miniapp serve --cors-origin http://127.0.0.1:5173 --app-url http://127.0.0.1:5173/\n' +
        '  miniapp serve --port 8080 --cors-origin https://app.example.com --callback-auth partner:s3cret\n  miniapp serve --database postgres://miniapp:secret@db.internal:5432/miniapp --webhook-url https://hooks.example.com/miniapp',
    );
  addHostPageOptions(serve).action(bind(runServe));
}

/**
 * Writes this serve's gRPC address, admin token and TLS into the profile
 * when the profile has no grpc-addr nor grpc-token of its own, or when
 * --save-profile asks; returns whether it wrote them. With TLS, grpc-tls is
 * set, and a self-signed --grpc-tls-cert becomes grpc-ca (the clients'
 * trust in it); without, both are removed so that the profile does not
 * speak TLS to a plaintext port.
 */
async function saveToProfile(cc: CommandContext, grpc: { address: string; tls: boolean }, adminToken: string, flags: ServeFlags): Promise<boolean> {
  const file = cc.settings.file();
  const [addr, token] = [file.getSetting(cc.profile, 'grpc-addr'), file.getSetting(cc.profile, 'grpc-token')];
  if (addr === grpc.address && token === adminToken && (file.getSetting(cc.profile, 'grpc-tls') === 'true') === grpc.tls) return true;
  if ((addr !== undefined || token !== undefined) && !flags.saveProfile) return false;
  const store = await cc.settings.store();
  store.setSetting(cc.profile, 'grpc-token', adminToken);
  store.setSetting(cc.profile, 'grpc-addr', grpc.address);
  if (grpc.tls) {
    store.setSetting(cc.profile, 'grpc-tls', 'true');
    const cert = flags.grpcTlsCert;
    if (cert && (await selfSigned(cert))) {
      const { settingSpec } = await import('../../config/keys.js');
      store.setSetting(cc.profile, 'grpc-ca', settingSpec('grpc-ca').validate(cert));
    }
  } else {
    store.unsetSetting(cc.profile, 'grpc-tls');
    store.unsetSetting(cc.profile, 'grpc-ca');
  }
  return true;
}

/** Whether a certificate (PEM file or text) is its own issuer, so that clients trust it by having it as their CA. */
async function selfSigned(cert: string): Promise<boolean> {
  const [{ X509Certificate }, { readPem }] = await Promise.all([import('node:crypto'), import('../../login/pem.js')]);
  try {
    const x509 = new X509Certificate(readPem(cert, '--grpc-tls-cert'));
    return x509.checkIssued(x509) && x509.verify(x509.publicKey);
  } catch {
    return false;
  }
}

function formatDrain(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

/** `--drain`: a duration such as 5s or 500ms, or 0; at most 10 minutes. */
/** `--request-timeout`: a duration from 1 s to 10 minutes. */
function parseRequestTimeout(text: string): number {
  const ms = parseDuration(text, '--request-timeout');
  if (!(ms >= 1_000 && ms <= 10 * 60_000)) throw new UsageError(`--request-timeout must be from 1s to 10m; got "${text}"`);
  return ms;
}

function parseDrain(text: string): number {
  const ms = text.trim() === '0' ? 0 : parseDuration(text, '--drain');
  if (ms > MAX_DRAIN_MS) throw new UsageError(`--drain must be from 0 to 10m; got "${text}"`);
  return Math.round(ms);
}

/** An absolute http(s) URL without query or fragment, without its trailing slash. */
function checkPublicUrl(text: string): string {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.search || url.hash || url.username || url.password) {
    throw new UsageError(`--public-url must be an absolute http or https URL without query, such as https://blog.example.com; got "${text}"`);
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}

/** --rate-limit and --rate-burst as serve's request rates; false when the limit is 0. */
function parseRequestRates(rate: string, burst: string | undefined): { perSecond: number; burst: number } | false {
  if (!/^\d{1,7}$/.test(rate) || Number(rate) > 1_000_000) {
    throw new UsageError(`--rate-limit must be a whole number of requests per second from 0 (no limit) to 1000000; got "${rate}"`);
  }
  if (burst !== undefined && (!/^\d{1,7}$/.test(burst) || Number(burst) < 1 || Number(burst) > 2_000_000)) {
    throw new UsageError(`--rate-burst must be a whole number of requests from 1 to 2000000; got "${burst}"`);
  }
  const perSecond = Number(rate);
  if (perSecond === 0) {
    if (burst !== undefined) throw new UsageError('--rate-burst needs a --rate-limit above 0');
    return false;
  }
  return { perSecond, burst: burst === undefined ? 2 * perSecond : Number(burst) };
}

/** A token serve checks (operator, metrics): at least 16 printable characters without spaces, trimmed; never echoed. */
function secretToken(value: string | undefined, what: string): string | undefined {
  const token = value?.trim() || undefined;
  if (token !== undefined && (token.length < 16 || !/^[\x21-\x7e]+$/.test(token))) {
    throw new UsageError(`${what} must be at least 16 printable characters without spaces; it has ${token.length}`, {
      hint: 'make one with `openssl rand -hex 32`',
    });
  }
  return token;
}

async function runServe(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ServeFlags>();
  const port = parsePort(flags.port);
  if (flags.store !== 'sqlite' && flags.store !== 'memory') throw new UsageError(`--store must be sqlite or memory; got "${flags.store}"`);
  const databasePool = parseWholeNumber(flags.databasePool, '--database-pool', 1);
  const databaseTimeout = parseDuration(flags.databaseTimeout, '--database-timeout');
  if (databaseTimeout < 100) throw new UsageError('--database-timeout must be at least 100ms');
  if (!LOG_LEVELS.includes(flags.logLevel)) throw new UsageError(`--log-level must be one of ${LOG_LEVELS.join(', ')}`);
  if (flags.callbackAuth !== undefined && !/^[^:]+:.+$/.test(flags.callbackAuth)) throw new UsageError('--callback-auth must be id:password');
  const operatorToken = secretToken(flags.operatorToken ?? cc.env.MINIAPP_OPERATOR_TOKEN, 'the operator token (--operator-token or MINIAPP_OPERATOR_TOKEN)');
  const metricsToken = secretToken(flags.metricsToken ?? cc.env.MINIAPP_METRICS_TOKEN, 'the metrics token (--metrics-token or MINIAPP_METRICS_TOKEN)');
  try {
    checkMetricsPrefix(flags.metricsPrefix);
  } catch (error) {
    throw new UsageError(`--metrics-prefix: ${(error as Error).message}`);
  }
  if (flags.corsOrigin !== undefined) {
    let origin: URL | undefined;
    try {
      origin = new URL(flags.corsOrigin);
    } catch {
      origin = undefined;
    }
    if (!origin || origin.origin !== flags.corsOrigin.replace(/\/$/, '')) {
      throw new UsageError(`--cors-origin must be an origin such as https://app.example.com; got "${flags.corsOrigin}"`);
    }
  }
  const publicUrl = flags.publicUrl === undefined ? undefined : checkPublicUrl(flags.publicUrl);
  const drainMs = parseDrain(flags.drain);
  const requestTimeoutMs = parseRequestTimeout(flags.requestTimeout);
  const [{ startServe }, { dataDir }, { readPem }, { settingSpec }, { quietGrpcLogs }] = await Promise.all([
    import('../../server/serve.js'),
    import('../../config/paths.js'),
    import('../../login/pem.js'),
    import('../../config/keys.js'),
    import('../connect/grpc-logging.js'),
  ]);
  await quietGrpcLogs(cc.env);

  const baseUrl = flags.upstream !== undefined ? settingSpec('base-url').validate(flags.upstream) : (await cc.settings.get('base-url')).value;
  let upstream;
  if (baseUrl) upstream = { baseUrl, pathPrefix: (await cc.settings.get('path-prefix')).value!, tls: await partnerTls(cc) };
  const hostPage = hostPageOptions(flags);
  if (upstream && hostPageFlagsGiven(flags)) {
    throw new UsageError(
      `--app-url, --required-term and --optional-term shape the host page over the embedded sandbox; with the partner API at ${redactUrl(baseUrl!)} there is none`,
      {
        hint: flags.upstream !== undefined ? 'leave out --upstream to use the sandbox' : 'unset base-url (`miniapp config unset base-url`) to use the sandbox',
      },
    );
  }
  const directory = flags.dataDir ?? dataDir(cc.env, cc.homedir);
  const databaseUrl = flags.database !== undefined ? settingSpec('database-url').validate(flags.database) : (await cc.settings.get('database-url')).value;
  if (databaseUrl && flags.store === 'memory')
    throw new UsageError('--store memory and a database URL (--database, MINIAPP_DATABASE_URL or database-url) exclude each other');
  const grpcPort = parsePort(flags.grpcPort, '--grpc-port');
  const sandboxPort = flags.sandboxPort === undefined ? undefined : parsePort(flags.sandboxPort, '--sandbox-port');
  const pretty = (flags.logFormat ?? (cc.io.stderr.isTTY ? 'pretty' : 'json')) === 'pretty';
  const { gatedSink, prettyLogSink } = await import('../render/log-format.js');
  // The banner first, then the log (Fastify logs "Server listening" while starting).
  const logSink = gatedSink(pretty ? prettyLogSink(cc.io.stderr, cc.out.errColor) : cc.io.stderr);
  const hashCost = /^\d+$/.test(flags.passwordHashCost) ? Number(flags.passwordHashCost) : NaN;
  if (!(hashCost >= 10 && hashCost <= 20)) throw new UsageError(`--password-hash-cost must be a whole number from 10 to 20; got "${flags.passwordHashCost}"`);
  if (Boolean(flags.grpcTlsCert) !== Boolean(flags.grpcTlsKey)) throw new UsageError('--grpc-tls-cert and --grpc-tls-key go together');
  if (!/^\d{1,6}$/.test(flags.loginAttempts))
    throw new UsageError(`--login-attempts must be a whole number from 0 (the limits off) to 999999; got "${flags.loginAttempts}"`);
  const attempts = Number(flags.loginAttempts);
  const loginLimits =
    attempts === 0 ? false : { ...DEFAULT_LOGIN_LIMITS, perAccount: attempts, perAddress: Math.max(DEFAULT_LOGIN_LIMITS.perAddress, 10 * attempts) };
  const signupLimit = /^(\d{1,6})(?:\/hour)?$/.exec(flags.signupLimit)?.[1];
  if (signupLimit === undefined)
    throw new UsageError(
      `--signup-limit must be a whole number of sign-ups per address per hour (N or N/hour) from 0 (no limit) to 999999; got "${flags.signupLimit}"`,
    );
  const signupLimits = Number(signupLimit) === 0 ? false : { ...DEFAULT_SIGNUP_LIMITS, perAddress: Number(signupLimit) };
  const tracing = resolveTracing(cc.env, { otlpEndpoint: flags.otlpEndpoint });
  const requestRates = parseRequestRates(flags.rateLimit, flags.rateBurst);
  const { checkWebhookUrl } = await import('../../webhooks/delivery.js');
  const webhookUrls = flags.webhookUrl.map((url) => {
    try {
      return checkWebhookUrl(url);
    } catch (error) {
      throw new UsageError(`--webhook-url: ${(error as Error).message}`);
    }
  });
  const webhookSecret = flags.webhookSecret ?? (cc.env.MINIAPP_WEBHOOK_SECRET?.trim() || undefined);
  if (webhookUrls.length > 0 && !webhookSecret) {
    throw new ConfigError('--webhook-url needs a secret to sign the deliveries', { hint: 'pass --webhook-secret or set MINIAPP_WEBHOOK_SECRET' });
  }
  const grpcTls =
    flags.grpcTlsCert && flags.grpcTlsKey
      ? { cert: readPem(flags.grpcTlsCert, '--grpc-tls-cert'), key: readPem(flags.grpcTlsKey, '--grpc-tls-key') }
      : undefined;
  let running;
  try {
    running = await startServe({
      host: flags.host,
      port,
      store: databaseUrl
        ? { kind: 'postgres', url: databaseUrl, poolSize: databasePool, timeoutMs: databaseTimeout }
        : flags.store === 'memory'
          ? { kind: 'memory' }
          : { kind: 'sqlite', dataDir: directory },
      upstream,
      hostPage,
      timeoutMs: timeoutMs(flags.timeout),
      decrypt: { key: (await cc.settings.get('decrypt-key')).value, aad: (await cc.settings.get('decrypt-aad')).value },
      corsOrigin: flags.corsOrigin?.replace(/\/$/, ''),
      callbackAuth: flags.callbackAuth,
      operatorToken,
      logger: flags.logLevel === 'silent' ? false : { level: flags.logLevel, stream: logSink },
      sandboxPort,
      version: cc.version,
      now: cc.now,
      grpc: flags.grpc ? { host: flags.grpcHost, port: grpcPort, tls: grpcTls } : false,
      hashCost,
      requestTimeoutMs,
      loginLimits,
      signupLimits,
      requestRates,
      docs: flags.docs,
      webhooks: webhookSecret ? { urls: webhookUrls, secret: webhookSecret } : undefined,
      publicUrl,
      metricsPrefix: flags.metricsPrefix,
      metricsToken,
      tracing,
      spanLines: (line) => cc.io.stderr.write(line),
    });
  } catch (error) {
    logSink.open();
    const code = (error as NodeJS.ErrnoException).code;
    const message = (error as Error).message ?? '';
    const taken = (error as { port?: number }).port;
    // Who holds it, when it is the serve of this data dir (its serve.json names a live pid).
    const holder = async (address: string) => {
      const other = (await import('../connect/serve-runtime.js')).readServeRuntime(directory);
      return other && (other.url.endsWith(`:${address.split(':').pop()}`) || other.grpc === address)
        ? ` by miniapp serve (pid ${other.pid}, data dir ${directory})`
        : '';
    };
    if (code === 'EADDRINUSE' && sandboxPort !== undefined && taken === sandboxPort) {
      throw new PortInUseError(`port ${sandboxPort} for the embedded sandbox is already in use`, {
        hint: 'stop what listens there, or pick another with --sandbox-port (0 picks a free one)',
      });
    }
    // grpc-js says "No address added out of total 1 resolved errors: [listen EADDRINUSE: address already in use HOST:PORT]".
    if (flags.grpc && /No address added out of total|bind/i.test(message)) {
      const cause = /\[(.*)\]\s*$/.exec(message)?.[1] ?? message;
      if (/EADDRINUSE/.test(cause)) {
        throw new PortInUseError(`gRPC port ${grpcPort} on ${flags.grpcHost} is already in use${await holder(`${flags.grpcHost}:${grpcPort}`)}`, {
          hint: 'stop what listens there, or pick another with --grpc-port (0 picks a free one); --no-grpc serves HTTP alone',
        });
      }
      throw new ConfigError(`cannot listen for gRPC on ${flags.grpcHost}:${grpcPort}: ${cause}`, {
        hint: 'pick another with --grpc-port or --grpc-host, or --no-grpc',
      });
    }
    if (code === 'EADDRINUSE') {
      throw new PortInUseError(`port ${port} on ${flags.host} is already in use${await holder(`${flags.host}:${port}`)}`, {
        hint: 'stop what listens there, or pick another with --port (0 picks a free one)',
      });
    }
    if (code === 'EADDRNOTAVAIL') throw new UsageError(`cannot bind to --host ${flags.host}`);
    throw error;
  }

  // Local `miniapp users` calls just work: a profile without a gRPC connection learns this one. One that has one keeps
  // it unless --save-profile says otherwise: a second, throwaway serve must not take over the profile.
  const profileSaved = running.adminToken && running.grpc ? await saveToProfile(cc, running.grpc, running.adminToken, flags) : false;
  // The token is shown only to a person at a terminal; logs (journald, containers, CI) and --json get the 0600 file
  // that holds it. A store without a token file of its own gets a copy in the data dir for as long as serve runs.
  const runtime = await import('../connect/serve-runtime.js');
  let tokenCopy: { path: string; forget: () => void } | undefined;
  if (running.adminTokenFile === undefined) {
    const { ensureDataDir } = await import('../../store/data-dir.js');
    tokenCopy = runtime.writeAdminTokenCopy(ensureDataDir(directory), running.adminToken, process.pid);
  }
  const adminTokenFile = running.adminTokenFile ?? tokenCopy!.path;
  const showToken = !cc.out.json && Boolean(cc.io.stdout.isTTY) && Boolean(cc.io.stderr.isTTY);
  const info = {
    url: running.url,
    metrics: `${running.url}/metrics`,
    grpc: running.grpc ? { address: running.grpc.address, tls: running.grpc.tls } : null,
    adminTokenFile,
    profile: { name: cc.profile, saved: profileSaved },
    health: `${running.url}/health`,
    blog: { v1: `${running.url}/api/v1`, v2: `${running.url}/api/v2`, latest: `${running.url}/api` },
    relay: `${running.url}/api/auth`,
    upstream: redactUrl(running.upstreamUrl),
    database: running.database,
    corsOrigin: flags.corsOrigin ?? null,
    publicUrl: publicUrl ?? null,
    sandbox: running.sandbox ?? null,
    hostPage: running.hostPage ?? null,
    tracing: running.tracing ?? null,
  };
  // Listening for Ctrl-C before saying "listening": whoever reads that line may stop us at once, gracefully.
  const shutdown = cc.waitForShutdown();
  if (cc.out.json) {
    cc.out.line(JSON.stringify(info));
  } else {
    const c = cc.out.color;
    const relay = info.relay;
    const lines = [
      `miniapp serve listening on ${c.bold(running.url)}`,
      ...(running.hostPage
        ? [`  host page ${c.bold(running.hostPage)}   your mini-app in a phone frame: appLogin(), the consent screen, the sandbox's users and log`]
        : []),
      `  relay     POST ${relay}/token   POST ${relay}/refresh   GET ${relay}/me`,
      `            POST ${relay}/logout   POST ${relay}/logout-by-user-key${operatorToken ? ' (any userKey with X-Operator-Token)' : ''}`,
      `            GET|POST ${relay}/unlink-callback${flags.callbackAuth ? ' (Basic auth required)' : ''}`,
      `  blog      ${running.url}/api/v1, ${running.url}/api/v2, ${running.url}/api (latest: v2)`,
      ...(flags.docs ? [`  docs      ${running.url}/api/v2/docs   OpenAPI ${running.url}/api/v2/openapi.json (and per mount)`] : []),
      ...(webhookUrls.length
        ? [
            `  webhooks  post.created, order.paid, order.refunded, order.cancelled, payment.refunded -> ${webhookUrls.map(redactUrl).join(', ')} (signed; \`miniapp webhooks list\`)`,
          ]
        : []),
      `  health    GET ${info.health}`,
      `  metrics   GET ${info.metrics}${metricsToken ? ' (Bearer token of --metrics-token)' : ' (open to whoever reaches this port: --metrics-token, or keep the port private)'}`,
      ...(running.grpc
        ? [
            `  gRPC      ${running.grpc.address}${running.grpc.tls ? ' (TLS)' : ''}: user.v1.UserService, monitoring.v1.MonitoringService, inventory.v1.InventoryService, payment.v1.PaymentService, order.v1.OrderService, grpc.health.v1, reflection`,
            `  admin     token ${showToken ? running.adminToken : `in ${adminTokenFile}`} ${
              profileSaved
                ? `(stored as grpc-token in profile "${cc.profile}", with grpc-addr${running.grpc.tls ? ' and grpc-tls' : ''})`
                : `(not stored: profile "${cc.profile}" has a gRPC connection of its own; --save-profile stores this one)`
            }`,
          ]
        : []),
      `  upstream  ${info.upstream}${running.sandbox ? ' (embedded sandbox)' : ''}`,
      `  data      ${databaseUrl ? `PostgreSQL ${running.database} (pool ${databasePool}; readiness GET ${running.url}/health/ready)` : (running.databaseFile ?? 'in memory (--store memory): nothing is kept after exit')}`,
      `  CORS      ${flags.corsOrigin ?? 'no browser origin allowed (--cors-origin ORIGIN)'}`,
      `  links     ${publicUrl ? `absolute under ${publicUrl}` : 'relative (set --public-url for absolute ones)'}`,
      `  limits    logins: ${describeLoginLimits(loginLimits)}${loginLimits ? ' (--login-attempts)' : ''}`,
      `            relay codes and refresh tokens refused: ${loginLimits ? `${loginLimits.perAddress} per address, then the same back-off` : 'off'}`,
      `            requests: ${describeRequestRates(requestRates)}${requestRates ? ' (--rate-limit, --rate-burst)' : ''}`,
      `            sign-ups: ${describeSignupLimits(signupLimits)}${signupLimits ? ' (--signup-limit)' : ''}`,
      `  traces    ${describeTracing(tracing)}`,
    ];
    if (running.sandbox) {
      const sb = running.sandbox;
      lines.push(
        '',
        c.yellow.bold('No upstream is configured: the relay talks to a sandbox started in this process.'),
        `  sandbox     ${sb.url}`,
        `  decrypt key ${sb.key}${sb.generated ? ' (generated for this run)' : ' (from the profile)'}`,
        `  decrypt AAD ${sb.aad}`,
        `  log in      open ${running.hostPage} and press Log in (a mini-app of yours: --app-url URL and --cors-origin ORIGIN)`,
        `  get a code  miniapp sandbox login --user-key 1001 --url ${sb.url}`,
        `  then        curl -X POST ${relay}/token -H 'content-type: application/json' -d '{"authorizationCode":"CODE","referrer":"sandbox"}'`,
        `  unlink      miniapp sandbox unlink --user-key 1001 --url ${sb.url}   (lands in \`miniapp callbacks list\`)`,
        `  Point at the real partner API with --upstream URL or \`miniapp config set base-url URL\`.`,
      );
    }
    lines.push('Stop with Ctrl-C.');
    cc.out.line(lines.join('\n'));
  }
  for (const warning of running.warnings) cc.out.warn(warning);
  logSink.open();
  const forget =
    running.databaseFile !== undefined
      ? runtime.writeServeRuntime(directory, {
          pid: process.pid,
          url: running.url,
          grpc: running.grpc?.address ?? null,
          sandbox: running.sandbox?.url ?? null,
        })
      : () => undefined;
  const signal = await shutdown;
  forget();
  tokenCopy?.forget();
  // SIGTERM is a process manager or an orchestrator (rolling restarts): drain. Ctrl-C is a person who wants it to stop
  // now, and a closed stdout has nobody to drain for: no wait (still finishing what is in flight).
  const wait = signal === 'SIGTERM' ? drainMs : 0;
  // A second signal skips the rest of the drain's wait and ends every connection and call at once (listened for at
  // once: unheard, it would kill the process). It was heard only during the wait, and only cut that short: the close
  // after it still waited for every request in flight, such as a body that never finished.
  const second = cc.waitForShutdown();
  const skip = wait > 0 ? second : undefined;
  void second.then(() => {
    if (wait === 0) cc.out.info('second signal: stopping at once');
    running.hurry();
  });
  const { drainAndClose } = await import('../../server/drain.js');
  await drainAndClose(running, {
    drainMs: wait,
    skip,
    onStep: (step) => {
      if (step.step === 'draining') {
        cc.out.info(
          `${signal}: draining for ${formatDrain(step.ms)}: not ready (/health/ready 503, gRPC NOT_SERVING), still answering; a second signal stops at once`,
        );
      } else if (step.step === 'drain-skipped') {
        cc.out.info('second signal: drain cut short, stopping at once');
      } else if (step.step === 'stopping') {
        cc.out.info(wait > 0 ? 'drained: no new calls; finishing calls in flight, then stopping' : `${signal}: finishing requests in flight, then stopping`);
      } else {
        cc.out.info('stopped');
      }
    },
  });
}
