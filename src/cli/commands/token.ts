import type { Command } from 'commander';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import { UsageError } from '../../errors.js';
import { normalizeReferrer } from '../../login/referrer.js';
import { partnerClient, timeoutOption, tokenStore } from '../connect/profile.js';
import { maskSecret } from '../render/output.js';
import { formatDuration } from '../../duration.js';
import type { StoredTokens } from '../../login/session.js';

/** The `token` command itself; its subcommands are added by the functions below. */
function tokenGroup(program: Command): Command {
  return program.command('token').description('Exchange an authorization code for tokens, refresh them, and show what the profile holds.');
}

export function registerToken(program: Command, bind: Bind): void {
  const token = tokenGroup(program);
  registerExchangeAndRefresh(token, bind);
  registerShow(token, bind);
}

/** `token show` alone: what the quick path (src/cli/quick.ts) serves of this group. */
export function registerTokenShow(program: Command, bind: Bind): void {
  registerShow(tokenGroup(program), bind);
}

function registerExchangeAndRefresh(token: Command, bind: Bind): void {
  token
    .command('exchange')
    .description('exchange an authorization code from appLogin() for tokens, and store them in the profile')
    .requiredOption('--code <code>', 'the authorizationCode from appLogin()')
    .option('--referrer <referrer>', 'DEFAULT (production host app) or sandbox, any casing', 'DEFAULT')
    .addOption(timeoutOption())
    .addHelpText('after', '\nExample:\n  miniapp token exchange --code "$CODE" --referrer sandbox')
    .action(bind(runExchange));

  token
    .command('refresh')
    .description('get a new token pair with the stored (or the given) refresh token, and store it')
    .option('--refresh-token <token>', 'refresh with this token instead of the stored one')
    .addOption(timeoutOption())
    .action(bind(runRefresh));
}

function registerShow(token: Command, bind: Bind): void {
  token
    .command('show')
    .description('show the stored tokens, the time left on each, and the scopes (tokens masked)')
    .option('--reveal', 'print the tokens in full')
    .action(bind(runShow));
}

async function runExchange(cc: CommandContext, command: Command): Promise<void> {
  const options = command.opts<{ code: string; referrer: string; timeout: string }>();
  if (!options.code.trim()) throw new UsageError('--code must not be empty');
  const referrer = normalizeReferrer(options.referrer);
  const [client, store] = await Promise.all([partnerClient(cc, options), tokenStore(cc)]);
  const { storedFrom } = await import('../../login/session.js');
  try {
    const data = await client.generateToken(options.code.trim(), referrer);
    await store.save(storedFrom(data, cc.now(), referrer));
    if (cc.out.json) cc.out.printJson(data);
    else printStored(cc, store.load()!, false);
    if (!cc.out.json) cc.out.success(`stored the tokens in profile "${cc.profile}"`);
  } finally {
    await client.close();
  }
}

async function runRefresh(cc: CommandContext, command: Command): Promise<void> {
  const options = command.opts<{ refreshToken?: string; timeout: string }>();
  const [client, store] = await Promise.all([partnerClient(cc, options), tokenStore(cc)]);
  const { refreshStored, notLoggedIn } = await import('../../login/session.js');
  if (!options.refreshToken && !store.load()?.refreshToken) throw notLoggedIn(cc.profile);
  try {
    const next = await refreshStored(client, store, cc.now(), options.refreshToken);
    if (cc.out.json) {
      cc.out.printJson({
        tokenType: next.tokenType,
        accessToken: next.accessToken,
        refreshToken: next.refreshToken,
        expiresIn: Math.round((Date.parse(next.accessTokenExpiresAt) - cc.now().getTime()) / 1000),
        scope: next.scope,
      });
    } else {
      printStored(cc, next, false);
      cc.out.success(`stored the new tokens in profile "${cc.profile}"`);
    }
  } finally {
    await client.close();
  }
}

async function runShow(cc: CommandContext, command: Command): Promise<void> {
  const reveal = Boolean(command.opts<{ reveal?: boolean }>().reveal);
  const store = await tokenStore(cc);
  const stored = store.load();
  if (!stored) {
    const { notLoggedIn } = await import('../../login/session.js');
    throw notLoggedIn(cc.profile);
  }
  if (cc.out.json) {
    const { tokenState } = await import('../../login/session.js');
    const state = tokenState(stored, cc.now());
    cc.out.printJson({
      ...stored,
      accessTokenExpired: state.accessExpired,
      refreshTokenExpired: state.refreshExpired,
      scopes: state.scopes,
    });
    return;
  }
  printStored(cc, stored, reveal);
}

function left(ms: number): string {
  return ms > 0 ? `${formatDuration(ms)} left` : `expired ${formatDuration(-ms)} ago`;
}

function printStored(cc: CommandContext, stored: StoredTokens, reveal: boolean): void {
  const now = cc.now().getTime();
  const show = (token: string) => (reveal ? token : maskSecret(token));
  const accessLeft = Date.parse(stored.accessTokenExpiresAt) - now;
  const refreshLeft = Date.parse(stored.refreshTokenExpiresAt) - now;
  cc.out.record(
    [
      ['tokenType', stored.tokenType],
      ['accessToken', show(stored.accessToken)],
      ['accessTokenExpiresAt', `${stored.accessTokenExpiresAt} (${left(accessLeft)})`],
      ['refreshToken', show(stored.refreshToken)],
      ['refreshTokenExpiresAt', `${stored.refreshTokenExpiresAt} (${left(refreshLeft)})`],
      ['scope', stored.scope],
      ['referrer', stored.referrer ?? ''],
    ],
    stored,
  );
  if (accessLeft <= 0 && refreshLeft > 0)
    cc.out.info(cc.out.errColor.dim('the access token has expired: `miniapp token refresh` (or `miniapp me`, which refreshes by itself)'));
  if (refreshLeft <= 0) cc.out.info(cc.out.errColor.dim('the refresh token has expired: log in again (appLogin(), then `miniapp token exchange --code CODE`)'));
}
