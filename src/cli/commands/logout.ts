import type { Command } from 'commander';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import { AuthError, UsageError } from '../../errors.js';
import { parseUserKey } from '../flags.js';
import { partnerClient, timeoutOption, tokenStore } from '../connect/profile.js';

export function registerLogout(program: Command, bind: Bind): void {
  program
    .command('logout')
    .description(
      'Remove the login connection with remove-by-access-token, or with remove-by-user-key for --user-key, ' +
        'using the stored access token (or MINIAPP_ACCESS_TOKEN) as the Bearer token; then clear the tokens ' +
        'stored in the profile. An expired access token is refreshed first; tokens the API no longer takes are ' +
        'cleared all the same. --local only forgets the stored tokens, without calling the API.',
    )
    .option('--user-key <n>', 'remove the connection of this userKey (remove-by-user-key)')
    .option('--local', 'forget the tokens stored in the profile without calling the partner API')
    .addOption(timeoutOption())
    .addHelpText(
      'after',
      "\nExamples:\n  miniapp logout\n  miniapp logout --user-key 1001\n  miniapp logout --local      # forget this profile's tokens, offline",
    )
    .action(bind(runLogout));
}

async function runLogout(cc: CommandContext, command: Command): Promise<void> {
  const options = command.opts<{ userKey?: string; timeout: string; local?: boolean }>();
  const userKey = options.userKey === undefined ? undefined : parseUserKey(options.userKey);
  if (options.local && userKey !== undefined)
    throw new UsageError('--local forgets the tokens of this profile and calls nothing; it does not go with --user-key');
  const store = await tokenStore(cc);
  const stored = store.load();
  if (options.local) {
    await store.clear();
    if (cc.out.json) cc.out.printJson({ success: true, local: true, cleared: stored !== undefined });
    else
      cc.out.success(
        stored ? `forgot the tokens stored in profile "${cc.profile}" (the partner API was not called)` : `no tokens were stored in profile "${cc.profile}"`,
      );
    return;
  }
  const fromEnv = cc.env.MINIAPP_ACCESS_TOKEN?.trim() || undefined;
  let accessToken = fromEnv ?? stored?.accessToken;
  const [{ notLoggedIn, refreshStored, tokenState }, client] = await Promise.all([import('../../login/session.js'), partnerClient(cc, options)]);
  if (!accessToken) {
    await client.close();
    // remove-by-user-key takes a Bearer token: without one it is refused upstream, so it is not sent.
    if (userKey !== undefined) {
      throw new AuthError(
        `logout --user-key needs an access token as its Bearer token, and none is stored in profile "${cc.profile}" (nor set in MINIAPP_ACCESS_TOKEN); nothing was sent`,
        {
          code: 'NOT_LOGGED_IN',
          hint: 'exchange a code first (`miniapp token exchange --code CODE`), or set MINIAPP_ACCESS_TOKEN',
        },
      );
    }
    throw notLoggedIn(cc.profile);
  }
  try {
    const state = !fromEnv && stored ? tokenState(stored, cc.now()) : undefined;
    if (state?.accessExpired && !state.refreshExpired) {
      // An access token past its expiry cannot remove anything: a fresh one can.
      try {
        accessToken = (await refreshStored(client, store, cc.now())).accessToken;
      } catch (error) {
        if (!(error instanceof AuthError)) throw error;
      }
    }
    try {
      if (userKey !== undefined) await client.removeByUserKey(userKey, accessToken);
      else await client.removeByAccessToken(accessToken);
    } catch (error) {
      if (!(error instanceof AuthError) || fromEnv || userKey !== undefined || !stored) throw error;
      // The stored tokens no longer work (expired, revoked): they are useless, so they are forgotten all the same.
      await store.clear();
      throw new AuthError(`${error.message}; the tokens stored in profile "${cc.profile}" were cleared anyway`, {
        code: error.code,
        // Every way to remove it needs a token that works, and the stored ones are gone: logging in comes first.
        hint:
          'the partner API did not take the stored token, so the login connection is still there; to remove it, log in again ' +
          '(`miniapp token exchange --code CODE`), then run `miniapp logout` (or `miniapp logout --user-key N`, which sends that new token too)',
        cause: error,
      });
    }
  } finally {
    await client.close();
  }
  const had = store.load() !== undefined;
  await store.clear();
  if (cc.out.json) cc.out.printJson({ success: true, ...(userKey === undefined ? {} : { userKey }) });
  else {
    cc.out.success(userKey === undefined ? 'removed the login connection' : `removed the login connection of userKey ${userKey}`);
    if (had) cc.out.info(`cleared the tokens stored in profile "${cc.profile}"`);
  }
}
