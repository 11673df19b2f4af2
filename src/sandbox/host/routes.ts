/**
 * The host page (under /host/): the host app played in a desktop browser
 * over the partner sandbox. It shows the developer's mini-app in a
 * phone-sized frame and answers its appLogin() (web/host/app-login.js)
 * with the consent screen for a first-time user and a code for a returning
 * one, and has a panel to pick or create the user, see the terms agreed
 * to, remove the connection (the removal callback), force appLogin()
 * failures and follow the sandbox's journal. A mini-app outside the host
 * page gets the same login in a window of its own (/host/login).
 *
 * Registered by `miniapp serve` only when its upstream is the embedded
 * sandbox, and by `miniapp sandbox`: never in front of a real partner API.
 * The API under /host/api/ answers this server's own pages only.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { HttpError, toHttpError } from '../../http/errors.js';
import { SECURITY_HEADERS } from '../../http/security-headers.js';
import { redactUrl } from '../../url-redaction.js';
import { isKnownUnlinkReason, UNLINK_REASON_NAMES } from '../../login/unlink-reasons.js';
import { PartnerFailure, type PartnerState } from '../partner/state.js';
import type { CallbackTarget } from '../partner/callback.js';
import { removeConnection } from '../partner/removal.js';
import { checkAppUrl } from './app-url.js';
import { DEMO_PAGE_CSP, hostPageCsp, LOGIN_PAGE_CSP, loadAssets, SCRIPT_AND_STYLE_FILES } from './assets.js';

/** Where the host page lives, on serve and on the sandbox alike. */
export const HOST_PREFIX = '/host';

export interface HostPageOptions {
  state: PartnerState;
  /** Where removal callbacks go (a holder: serve names its relay after it listens). */
  callback: { current: CallbackTarget | undefined };
  /** The mini-app the phone frame shows unless the page's ?app= says otherwise; none: the built-in demo. */
  appUrl?: string | undefined;
  /** Origins besides this server's own whose pages may log in through the login window (serve's --cors-origin, the app URL's). */
  appOrigins?: readonly string[] | undefined;
}

/** What the panel can make the next appLogin() calls do instead of logging in. */
const FORCED_FAILURES = {
  cancel: { code: 'USER_CANCELLED', message: 'the user cancelled the login' },
  network: { code: 'NETWORK_ERROR', message: 'a network error interrupted the login' },
  'no-host': { code: 'NOT_IN_HOST_APP', message: 'appLogin() is not running inside the host app' },
} as const;
type Failure = keyof typeof FORCED_FAILURES | 'none';

function input(request: FastifyRequest): Record<string, unknown> {
  const value = request.body;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new HttpError(400, 'INVALID_BODY', 'the body must be a JSON object (content-type: application/json)');
  }
  return value as Record<string, unknown>;
}

function userKeyOf(value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new HttpError(400, 'INVALID_FIELD', 'userKey must be a non-negative integer');
  }
  return value;
}

/** The page's own origin, as a browser writes it in Origin. */
function ownOrigin(request: FastifyRequest): string {
  return `${request.protocol}://${request.host}`;
}

/** The API serves this server's pages only: a page elsewhere must not create users, take codes or send callbacks. */
function refuseOtherSites(request: FastifyRequest): void {
  const site = request.headers['sec-fetch-site'];
  const origin = request.headers.origin;
  if ((site !== undefined && site !== 'same-origin' && site !== 'none') || (origin !== undefined && origin !== ownOrigin(request))) {
    throw new HttpError(403, 'CROSS_ORIGIN_REFUSED', `the host page's API answers the pages of ${ownOrigin(request)} only`);
  }
}

/** The origin the phone frame may load: that of ?app= (or the configured app URL), 'self' for the demo, 'none' for a URL that is not one. */
function frameOrigin(request: FastifyRequest, appUrl: string | undefined): string {
  const given = (request.query as Record<string, unknown>).app;
  const url = typeof given === 'string' && given !== '' ? given : appUrl;
  if (url === undefined) return "'self'";
  try {
    return checkAppUrl(url, 'app').origin;
  } catch {
    return "'none'";
  }
}

export async function hostRoutes(app: FastifyInstance, options: HostPageOptions): Promise<void> {
  const { state } = options;
  const assets = loadAssets();
  let selected: number | undefined;
  let failure: Failure = 'none';

  app.setErrorHandler((error: unknown, request, reply: FastifyReply) => {
    const mapped = toHttpError(error instanceof PartnerFailure ? new HttpError(error.status, error.errorCode, error.reason) : error);
    request.log[mapped.log]({ status: mapped.status, code: mapped.body.code }, error instanceof Error ? error.message : String(error));
    void reply.status(mapped.status).headers(mapped.headers).send(mapped.body);
  });
  // The sandbox has no security headers of its own; serve's are set already, and these are the same.
  app.addHook('onRequest', async (_request, reply) => {
    void reply.headers(SECURITY_HEADERS);
  });

  const page = (reply: FastifyReply, name: string, csp: string, headers: Record<string, string> = {}) => {
    const asset = assets.get(name)!;
    return reply.headers({ 'content-type': asset.type, 'cache-control': 'no-cache', 'content-security-policy': csp, ...headers }).send(asset.body);
  };

  // /host without its slash: the page's relative links need /host/.
  app.get('/', { prefixTrailingSlash: 'no-slash' }, async (request, reply) => {
    const query = request.url.indexOf('?');
    return reply.redirect(`${HOST_PREFIX}/${query < 0 ? '' : request.url.slice(query)}`, 302);
  });
  app.get('/', { prefixTrailingSlash: 'slash' }, async (request, reply) => page(reply, 'index.html', hostPageCsp(frameOrigin(request, options.appUrl))));
  // Opened by a mini-app that is not inside the host page: it must keep its opener to answer it.
  app.get('/login', async (_request, reply) => page(reply, 'login.html', LOGIN_PAGE_CSP, { 'cross-origin-opener-policy': 'unsafe-none' }));
  app.get('/demo', async (_request, reply) => page(reply, 'demo.html', DEMO_PAGE_CSP, { 'x-frame-options': 'SAMEORIGIN' }));

  app.get<{ Params: { file: string } }>('/:file', async (request, reply) => {
    const name = request.params.file;
    const asset = (SCRIPT_AND_STYLE_FILES as readonly string[]).includes(name) ? assets.get(name) : undefined;
    if (!asset) throw new HttpError(404, 'NOT_FOUND', `the host page has no file ${name}`);
    void reply.headers({ 'content-type': asset.type, 'cache-control': 'no-cache' });
    if (name === 'app-login.js') {
      // Imported by a mini-app on another origin (its dev server): a module script is fetched with CORS.
      void reply
        .headers({ 'access-control-allow-origin': '*', 'cross-origin-resource-policy': 'cross-origin' })
        .removeHeader('access-control-allow-credentials');
    }
    return reply.send(asset.body);
  });

  app.register(
    async (api) => {
      api.addHook('onRequest', async (request, reply) => {
        refuseOtherSites(request);
        void reply.header('cache-control', 'no-store');
      });

      const describeUser = (userKey: number) => {
        const user = state.user(userKey)!;
        return { userKey, name: user.name, connected: state.isConnected(userKey), agreedTerms: user.agreedTerms };
      };
      const known = (userKey: number) => {
        if (!state.user(userKey)) throw new HttpError(404, 'USER_NOT_FOUND', `no sandbox user ${userKey}: create one with POST /host/api/users`);
        return userKey;
      };

      api.get('/state', async (request) => {
        const after = (request.query as Record<string, unknown>).after ?? '0';
        if (typeof after !== 'string' || !/^\d{1,15}$/.test(after))
          throw new HttpError(400, 'INVALID_QUERY', 'after must be the sequence number of the last event seen (0 for all)');
        const target = options.callback.current;
        return {
          users: state.users().map((user) => describeUser(user.userKey)),
          selected: selected ?? null,
          terms: state.terms,
          failure,
          callback: target ? { url: redactUrl(target.url), method: target.method } : null,
          appUrl: options.appUrl ?? null,
          events: state.journal.since(Number(after)),
          last: state.journal.last,
        };
      });

      api.post('/users', async (request, reply) => {
        const body = input(request);
        const user = state.createUser(body.userKey === undefined ? undefined : userKeyOf(body.userKey));
        selected = user.userKey;
        return reply.code(201).send(describeUser(user.userKey));
      });

      api.post('/select', async (request) => {
        selected = known(userKeyOf(input(request).userKey));
        return describeUser(selected);
      });

      api.post('/failure', async (request) => {
        const given = input(request).failure;
        if (given !== 'none' && !(typeof given === 'string' && Object.hasOwn(FORCED_FAILURES, given))) {
          throw new HttpError(400, 'INVALID_FIELD', `failure must be one of none, ${Object.keys(FORCED_FAILURES).join(', ')}`);
        }
        failure = given as Failure;
        return { failure };
      });

      /** Who asks for a code, and where it goes: the frame of the host page, or a login window opened by a page at `origin`. */
      const caller = (request: FastifyRequest, body: Record<string, unknown>) => {
        const via = body.via;
        if (via !== 'frame' && via !== 'popup') throw new HttpError(400, 'INVALID_FIELD', 'via must be frame (the host page) or popup (the login window)');
        const origin = body.origin;
        if (typeof origin !== 'string' || !origin) throw new HttpError(400, 'MISSING_FIELD', 'origin is required: the origin of the mini-app the code goes to');
        const allowed = [ownOrigin(request), ...(options.appOrigins ?? [])];
        if (via === 'popup' && !allowed.includes(origin)) {
          throw new HttpError(
            403,
            'ORIGIN_NOT_ALLOWED',
            `a page at ${origin} may not log in through this host: allowed are ${allowed.join(', ')} (start serve with --cors-origin ${origin}, or --app-url)`,
          );
        }
        return `appLogin() from ${origin} (${via === 'frame' ? 'in the host page' : 'login window'})`;
      };

      api.post('/login', async (request) => {
        const body = input(request);
        const who = caller(request, body);
        if (failure !== 'none') {
          const forced = FORCED_FAILURES[failure];
          state.journal.add('app-login-failed', selected ?? null, `${who} rejected with ${forced.code}, as the panel asks`, false);
          return { outcome: 'rejected', ...forced };
        }
        let userKey: number;
        if (body.userKey !== undefined) userKey = known(userKeyOf(body.userKey));
        else userKey = selected ?? state.createUser().userKey;
        selected ??= userKey;
        if (state.needsConsent(userKey) && body.agreedTerms === undefined) {
          return { outcome: 'consent', user: describeUser(userKey), terms: state.terms };
        }
        const issued = state.login(userKey, body.agreedTerms);
        return { outcome: 'code', userKey, authorizationCode: issued.authorizationCode, referrer: 'SANDBOX', consented: issued.consented ?? null };
      });

      api.post('/cancel', async (request) => {
        const body = input(request);
        const who = caller(request, body);
        const userKey = body.userKey === undefined ? null : userKeyOf(body.userKey);
        state.journal.add('app-login-failed', userKey, `${who} cancelled on the consent screen (USER_CANCELLED)`, false);
        return { outcome: 'rejected', code: 'USER_CANCELLED', message: 'the user cancelled the login on the consent screen' };
      });

      api.post('/remove', async (request) => {
        const body = input(request);
        const userKey = known(userKeyOf(body.userKey));
        const reason = body.reason;
        if (!isKnownUnlinkReason(typeof reason === 'string' ? reason : undefined)) {
          throw new HttpError(400, 'INVALID_FIELD', `reason must be one of ${UNLINK_REASON_NAMES.join(', ')}`);
        }
        if (!state.isConnected(userKey)) {
          throw new HttpError(409, 'NO_CONNECTION', `user ${userKey} has no login connection to remove: log in first`);
        }
        const removal = await removeConnection(state, options.callback.current, userKey, reason as string);
        return { ...removal, callback: removal.callback && { ...removal.callback, url: redactUrl(removal.callback.url) } };
      });
    },
    { prefix: '/api' },
  );
}
