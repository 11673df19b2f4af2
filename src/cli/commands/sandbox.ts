import type { Command } from 'commander';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import { ConfigError, MiniappError, PortInUseError, UsageError } from '../../errors.js';
import { resolvePartnerPrefix } from '../../login/partner-prefix.js';
import { UNLINK_REASON_NAMES, isKnownUnlinkReason } from '../../login/unlink-reasons.js';
import { parseDuration } from '../../duration.js';
import { parsePort, parseUserKey } from '../flags.js';
import { partnerTls } from '../connect/profile.js';
import { addHostPageOptions, hostPageOptions, type HostPageFlags } from '../connect/host-page.js';

const DEFAULT_SANDBOX_URL = 'http://127.0.0.1:4010';

interface ServeOptions extends HostPageFlags {
  host: string;
  port: string;
  key?: string;
  aad?: string;
  prefix?: string;
  mtls?: boolean;
  cert?: string;
  keyFile?: string;
  ca?: string;
  callbackUrl?: string;
  callbackMethod: string;
  callbackAuth?: string;
  delay?: string;
  errorShape: string;
  vendorShapes?: boolean;
  media: string;
  graphLimit: string;
  graphWindow: string;
}

export function registerSandbox(program: Command, bind: Bind): void {
  const sandbox = program
    .command('sandbox')
    .description(
      "Serve the five partner-API endpoints (with the response envelope, the spec's code and token lifetimes, and " +
        'personal fields encrypted with the key and AAD), the graph API under /graph, and the host page at /host/ ' +
        '(a mini-app in a phone frame: appLogin() and the consent screen), for development and tests without the real ' +
        "services. Key and AAD default to the profile's, else they are generated and printed.",
    )
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--port <port>', 'port to listen on (0 picks a free one)', '4010')
    .option('--key <key>', 'AES-256 key for the personal fields (64 hex or 44 Base64 characters)')
    .option('--aad <aad>', 'AAD for the personal fields: text:VALUE, hex:HEX, or bare (hex when it is hex digits of even length, else text)')
    .option('--prefix <path>', "path prefix of the partner endpoints: spec, production or a path (default: the profile's path-prefix)")
    .option('--mtls', 'require a client certificate signed by --ca (HTTPS)')
    .option('--cert <file>', 'server certificate (PEM file or text), with --mtls')
    .option('--key-file <file>', 'server private key (PEM file or text), with --mtls')
    .option('--ca <file>', 'CA that client certificates must chain to, with --mtls')
    .option('--callback-url <url>', 'where `sandbox unlink` sends the removal callback')
    .option('--callback-method <method>', 'POST (JSON body) or GET (query)', 'POST')
    .option('--callback-auth <id:password>', 'Basic-Auth credentials sent with the callback')
    .option('--delay <duration>', 'answer every partner call this much later (fault injection), e.g. 15s')
    .option('--error-shape <shape>', 'failure bodies: envelope (the spec), bare ({"error":"invalid_grant"}) or top-level ({"errorCode":...})', 'envelope')
    .option(
      '--vendor-shapes',
      'answer as the vendor\'s documentation writes it rather than the spec: scopes comma-separated (token and login-me answers) and invalid_grant as a bare {"error":"invalid_grant"} (--error-shape bare)',
    )
    .option('--media <n>', 'media items of the first graph business account', '250')
    .option('--graph-limit <calls>', 'graph calls allowed per token per window', '200')
    .option('--graph-window <duration>', 'the graph rate-limit window', '1h');
  addHostPageOptions(sandbox)
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp sandbox --port 4010\n  miniapp sandbox login --user-key 1001\n  miniapp sandbox advance 2h\n' +
        '  miniapp sandbox unlink --user-key 1001 --reason WITHDRAWAL_TERMS\n  miniapp sandbox unlink --user-key 1001 --reason WITHDRAWAL_TOSS',
    )
    .action(bind(runServe));

  const url = '--url <url>';
  const urlHelp = `a running sandbox (default: the profile's base-url, else the sandbox of a running \`miniapp serve\`, else ${DEFAULT_SANDBOX_URL})`;
  sandbox
    .command('login')
    .description('play appLogin(): print an authorizationCode and referrer for a user (first-timers agree to the required terms)')
    .requiredOption('--user-key <n>', 'the user')
    .option(url, urlHelp)
    .action(bind(runLogin));

  sandbox
    .command('unlink')
    .description("remove a user's login connection as the user would, and send the removal callback")
    .requiredOption('--user-key <n>', 'the user')
    .option(
      '--reason <reason>',
      `why, as the callback's referrer: ${UNLINK_REASON_NAMES.join(', ')} (the vendor's name for WITHDRAWAL_PLATFORM); others are sent as given`,
      'UNLINK',
    )
    .option(url, urlHelp)
    .action(bind(runUnlink));

  sandbox
    .command('advance')
    .description('move the sandbox clock forward, so expiry can be tried in seconds (e.g. 2h, 15d)')
    .argument('<duration>', 'how far: 90s, 15m, 2h, 15d')
    .option(url, urlHelp)
    .action(bind(runAdvance));
}

function prefixFlag(text: string): string {
  try {
    return resolvePartnerPrefix(text, '--prefix');
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(error.message, { hint: error.hint });
    throw error;
  }
}

function positive(text: string, flag: string): number {
  const value = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!(value >= 1)) throw new UsageError(`${flag} must be a positive whole number; got "${text}"`);
  return value;
}

async function runServe(cc: CommandContext, command: Command): Promise<void> {
  const options = command.opts<ServeOptions>();
  const port = parsePort(options.port);
  const [{ buildSandbox }, { parseAad, parseKey }, { randomBytes }, { readPem }, { ERROR_SHAPES }] = await Promise.all([
    import('../../sandbox/server.js'),
    import('../../login/key-material.js'),
    import('node:crypto'),
    import('../../login/pem.js'),
    import('../../sandbox/partner/routes.js'),
  ]);
  if (!(ERROR_SHAPES as readonly string[]).includes(options.errorShape)) {
    throw new UsageError(`--error-shape must be one of ${ERROR_SHAPES.join(', ')}; got "${options.errorShape}"`);
  }
  if (options.vendorShapes && command.getOptionValueSource('errorShape') === 'cli' && options.errorShape !== 'bare') {
    throw new UsageError(`--vendor-shapes answers failures bare; it does not go with --error-shape ${options.errorShape}`);
  }
  const errorShape = options.vendorShapes ? 'bare' : options.errorShape;
  const method = options.callbackMethod.toUpperCase();
  if (method !== 'POST' && method !== 'GET') throw new UsageError(`--callback-method must be POST or GET; got "${options.callbackMethod}"`);
  if (options.callbackAuth !== undefined && !options.callbackAuth.includes(':')) {
    throw new UsageError('--callback-auth must be id:password');
  }
  if (options.callbackUrl !== undefined) {
    try {
      new URL(options.callbackUrl);
    } catch {
      throw new UsageError(`--callback-url must be an absolute URL; got "${options.callbackUrl}"`);
    }
  }

  // Key and AAD: flags, then the environment and profile, else fresh ones.
  const keyText = options.key ?? (await cc.settings.get('decrypt-key')).value;
  const aadText = options.aad ?? (await cc.settings.get('decrypt-aad')).value;
  const generated = !keyText || !aadText;
  const key = keyText ? parseKey(keyText).bytes : randomBytes(32);
  const aad = aadText ? parseAad(aadText).bytes : randomBytes(16);

  let tls;
  if (options.mtls) {
    const missing = ['cert', 'keyFile', 'ca'].filter((name) => !options[name as 'cert' | 'keyFile' | 'ca']);
    if (missing.length)
      throw new UsageError(`--mtls needs --cert, --key-file and --ca; missing ${missing.map((m) => (m === 'keyFile' ? '--key-file' : `--${m}`)).join(', ')}`);
    tls = { cert: readPem(options.cert!, '--cert'), key: readPem(options.keyFile!, '--key-file'), ca: readPem(options.ca!, '--ca') };
  } else if (options.cert || options.keyFile || options.ca) {
    throw new UsageError('--cert, --key-file and --ca go with --mtls');
  }

  const prefix = options.prefix === undefined ? (await cc.settings.get('path-prefix')).value : prefixFlag(options.prefix);
  const { appUrl, terms } = hostPageOptions(options);
  const sandbox = await buildSandbox({
    terms,
    // The login window answers pages of the app URL's origin (and the sandbox's own, the demo).
    host: { appUrl, appOrigins: appUrl ? [new URL(appUrl).origin] : [] },
    key,
    aad,
    prefix,
    tls,
    delayMs: options.delay ? parseDuration(options.delay, '--delay') : 0,
    errorShape: errorShape as 'envelope',
    scopeSeparator: options.vendorShapes ? ',' : ' ',
    callback: options.callbackUrl ? { url: options.callbackUrl, method, basicAuth: options.callbackAuth } : undefined,
    graph: {
      media: positive(options.media, '--media'),
      rateLimit: { calls: positive(options.graphLimit, '--graph-limit'), windowMs: parseDuration(options.graphWindow, '--graph-window') },
    },
  });
  try {
    await sandbox.app.listen({ host: options.host, port });
  } catch (error) {
    await sandbox.app.close();
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE')
      throw new PortInUseError(`port ${port} on ${options.host} is already in use`, {
        hint: 'stop what listens there, or pick another with --port (0 picks a free one)',
      });
    if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') throw new UsageError(`cannot bind to --host ${options.host}: ${code}`);
    throw error;
  }
  const address = sandbox.app.server.address();
  const actualPort = typeof address === 'object' && address ? address.port : port;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  const url = `${tls ? 'https' : 'http'}://${host}:${actualPort}`;
  const info = {
    url,
    partnerUrl: `${url}${prefix}`,
    graphUrl: `${url}/graph`,
    facebookGraphUrl: `${url}/facebook`,
    instagramGraphUrl: `${url}/instagram`,
    graphToken: 'sandbox-graph-token',
    hostPage: `${url}/host/`,
    key: key.toString('hex'),
    aad: aad.toString('hex'),
    generatedKey: generated,
    vendorShapes: Boolean(options.vendorShapes),
  };
  // Listening for Ctrl-C before saying "listening": whoever reads that line may stop us at once, gracefully.
  const shutdown = cc.waitForShutdown();
  if (cc.out.json) {
    cc.out.line(JSON.stringify(info));
  } else {
    const c = cc.out.color;
    // The lines configure the profile this sandbox was started for.
    const profileFlag = cc.profile === 'default' ? '' : ` --profile ${cc.profile}`;
    const lines = [
      `miniapp sandbox listening on ${c.bold(url)}`,
      `  host page    ${info.hostPage} (a mini-app in a phone frame: appLogin(), the consent screen, users, log)`,
      `  partner API  ${info.partnerUrl}${tls ? ' (mutual TLS)' : ''}`,
      `  graph API    ${info.graphUrl} (token: ${info.graphToken})`,
      `               ${info.facebookGraphUrl} as graph.facebook.com, ${info.instagramGraphUrl} as graph.instagram.com`,
      ...(options.vendorShapes ? ['  shapes       as the vendor documents them: scopes comma-separated, {"error":"invalid_grant"}'] : []),
      '',
      generated ? c.yellow('Generated a decryption key and AAD for this run; to use them:') : 'To point miniapp at it:',
      `  miniapp${profileFlag} config set base-url ${url}`,
      ...(generated ? [`  miniapp${profileFlag} config set decrypt-key ${info.key}`, `  miniapp${profileFlag} config set decrypt-aad ${info.aad}`] : []),
      `Get a code:  miniapp${profileFlag} sandbox login --user-key 1001 --url ${url}`,
      'Stop with Ctrl-C.',
    ];
    cc.out.line(lines.join('\n'));
  }
  const signal = await shutdown;
  cc.out.info(`${signal}: stopping the sandbox`);
  await sandbox.app.close();
}

/** The embedded sandbox of a `miniapp serve` running on this machine's data dir, if any. */
async function runningServeSandbox(cc: CommandContext): Promise<string | undefined> {
  const [{ readServeRuntime }, { dataDir }] = await Promise.all([import('../connect/serve-runtime.js'), import('../../config/paths.js')]);
  return readServeRuntime(dataDir(cc.env, cc.homedir))?.sandbox ?? undefined;
}

async function adminCall(cc: CommandContext, command: Command, path: string, body: unknown): Promise<Record<string, unknown>> {
  const explicit = command.opts<{ url?: string }>().url;
  const base = (explicit ?? (await cc.settings.get('base-url')).value ?? (await runningServeSandbox(cc)) ?? DEFAULT_SANDBOX_URL).replace(/\/+$/, '');
  try {
    new URL(base);
  } catch {
    throw new UsageError(`--url must be an absolute URL; got "${base}"`);
  }
  const [{ request }, { partnerAgent }, { transportError, explainTlsFailure }, { readFailure }] = await Promise.all([
    import('undici'),
    import('../../login/partner-client.js'),
    import('../../transport-error.js'),
    import('../../login/envelope.js'),
  ]);
  const tls = await partnerTls(cc);
  const agent = await partnerAgent(tls, 10_000);
  try {
    const response = await request(`${base}/__sandbox${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      dispatcher: agent,
    });
    const text = await response.body.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const failure = readFailure(response.statusCode, parsed);
    if (failure || typeof parsed !== 'object' || parsed === null) {
      if (response.statusCode === 404 && !failure?.reason) {
        throw new MiniappError(`${base} is not a miniapp sandbox (no ${path} admin route)`, { hint: 'pass the URL that `miniapp sandbox` printed with --url' });
      }
      throw new MiniappError(`the sandbox refused ${path.slice(1)}: ${failure?.errorCode ?? response.statusCode}: ${failure?.reason ?? text.slice(0, 200)}`);
    }
    return parsed as Record<string, unknown>;
  } catch (error) {
    if (error instanceof MiniappError) throw error;
    // A TLS 1.3 server that refuses the client only closes the socket: find out why, as doctor does.
    const explained = await explainTlsFailure(error, `${base}/__sandbox${path}`, tls, 10_000);
    throw transportError(explained ?? error, { service: 'the sandbox', url: base, timeoutMs: 10_000, clientCertificate: Boolean(tls.cert) });
  } finally {
    await agent.close();
  }
}

async function runLogin(cc: CommandContext, command: Command): Promise<void> {
  const userKey = parseUserKey(command.opts<{ userKey: string }>().userKey);
  const result = await adminCall(cc, command, '/login', { userKey });
  cc.out.record(
    [
      ['authorizationCode', result.authorizationCode],
      ['referrer', result.referrer],
      ['expiresAt', result.expiresAt],
    ],
    result,
  );
  if (cc.out.human) cc.out.info(cc.out.errColor.dim(`next: miniapp token exchange --code ${String(result.authorizationCode)} --referrer sandbox`));
}

async function runUnlink(cc: CommandContext, command: Command): Promise<void> {
  const options = command.opts<{ userKey: string; reason: string }>();
  if (!isKnownUnlinkReason(options.reason)) {
    cc.out.warn(`${options.reason} is not a reason the partner API is known to send (${UNLINK_REASON_NAMES.join(', ')}); sending it as given`);
  }
  const result = await adminCall(cc, command, '/unlink', { userKey: parseUserKey(options.userKey), reason: options.reason });
  const callback = result.callback as { url: string; status?: number; error?: string } | null;
  if (cc.out.json) {
    cc.out.printJson(result);
  } else {
    cc.out.success(`removed the login connection of userKey ${String(result.userKey)} (${String(result.reason)})`);
    if (!callback) cc.out.info('no callback URL is configured (start the sandbox with --callback-url)');
    else if (callback.error) cc.out.warn(`the callback to ${callback.url} failed: ${callback.error}`);
    else cc.out.info(`callback ${callback.url} answered HTTP ${callback.status}`);
  }
  if (callback && (callback.error || (callback.status ?? 0) >= 300)) {
    throw new MiniappError(`the removal callback to ${callback.url} did not succeed (${callback.error ?? `HTTP ${callback.status}`})`);
  }
}

async function runAdvance(cc: CommandContext, command: Command): Promise<void> {
  const [duration] = command.processedArgs as [string];
  const ms = parseDuration(duration);
  const result = await adminCall(cc, command, '/advance', { ms });
  if (cc.out.json) cc.out.printJson(result);
  else cc.out.line(`sandbox clock is now ${String(result.now)}`);
}
