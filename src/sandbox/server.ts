/**
 * The sandbox: offline emulators of the partner API (and, mounted under
 * /graph, the graph API) in one Fastify server, and with `host` the host
 * page (/host/: appLogin() in a browser). `buildSandbox` returns the app
 * unstarted, so tests can `inject()` or listen on port 0.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { compilersFactory } from '../http/schema-compilers.js';
import { DEFAULT_PARTNER_PREFIX } from '../login/partner-prefix.js';
import { SandboxClock } from './clock.js';
import { PartnerState } from './partner/state.js';
import { partnerRoutes, type ErrorShape, type ScopeSeparator } from './partner/routes.js';
import { graphShapes } from './graph/routes.js';
import type { CallbackTarget } from './partner/callback.js';
import type { Term } from './partner/terms.js';
import { HOST_PREFIX, hostRoutes } from './host/routes.js';

interface SandboxTls {
  cert: string;
  key: string;
  /** CA that client certificates must chain to; with it, a client certificate is required. */
  ca: string;
}

/** Options of the graph-API emulator mounted under /graph. */
export interface GraphSandboxOptions {
  /** Media items of the first business account (default 250). */
  media?: number;
  /** Calls allowed per token per window (default 200 an hour, as the real API). */
  rateLimit?: { calls: number; windowMs: number };
}

export interface SandboxOptions {
  key: Buffer;
  aad: Buffer;
  prefix?: string;
  clock?: SandboxClock;
  delayMs?: number;
  errorShape?: ErrorShape;
  /** Scopes joined by spaces (the spec, the default) or commas (the vendor's documentation). */
  scopeSeparator?: ScopeSeparator;
  callback?: CallbackTarget | undefined;
  tls?: SandboxTls | undefined;
  logger?: boolean;
  graph?: GraphSandboxOptions;
  /** The consent screen's terms (default DEFAULT_TERMS of partner/terms.ts). */
  terms?: readonly Term[] | undefined;
  /** Serve the host page at /host/ (`miniapp sandbox`; serve serves it on its own port instead): the app URL it shows, and the origins its login window answers. */
  host?: { appUrl?: string | undefined; appOrigins?: readonly string[] | undefined } | undefined;
}

interface SandboxStats {
  partnerCalls: number;
  graphCalls: number;
}

export interface Sandbox {
  app: FastifyInstance;
  /** Points unlink callbacks somewhere else (or nowhere). */
  setCallback(target: CallbackTarget | undefined): void;
  /** Where unlink callbacks go now (what setCallback set). */
  callback: { current: CallbackTarget | undefined };
  state: PartnerState;
  clock: SandboxClock;
  stats: SandboxStats;
}

export async function buildSandbox(options: SandboxOptions): Promise<Sandbox> {
  const clock = options.clock ?? new SandboxClock();
  const state = new PartnerState(clock, { terms: options.terms });
  const stats: SandboxStats = { partnerCalls: 0, graphCalls: 0 };
  const callback = { current: options.callback };
  const app = Fastify({
    logger: options.logger ?? false,
    schemaController: { compilersFactory },
    ...(options.tls ? { https: { cert: options.tls.cert, key: options.tls.key, ca: options.tls.ca, requestCert: true, rejectUnauthorized: true } } : {}),
  }) as unknown as FastifyInstance;

  await app.register(partnerRoutes, {
    state,
    clock,
    key: options.key,
    aad: options.aad,
    partnerPrefix: options.prefix ?? DEFAULT_PARTNER_PREFIX,
    delayMs: options.delayMs ?? 0,
    errorShape: options.errorShape ?? 'envelope',
    callback,
    stats,
    mutualTls: Boolean(options.tls),
    scopeSeparator: options.scopeSeparator ?? ' ',
  });

  await graphShapes(app, { stats, clock, ...options.graph });

  app.get('/__sandbox/stats', async () => ({
    ...stats,
    now: new Date(clock.now()).toISOString(),
    offsetMs: clock.offsetMs,
    connectedUsers: state.connectedUsers,
  }));

  if (options.host) await app.register(hostRoutes, { ...options.host, state, callback, prefix: HOST_PREFIX });

  return {
    app,
    state,
    clock,
    stats,
    callback,
    setCallback: (target) => {
      callback.current = target;
    },
  };
}
