import type { Command } from 'commander';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import { parseUserKey } from '../flags.js';
import { partnerClient, timeoutOption, tokenStore } from '../connect/profile.js';

export function registerLogout(program: Command, bind: Bind): void {
  program
    .command('logout')
    .description(
      'Remove the login connection with remove-by-access-token, or with remove-by-user-key for --user-key, ' +
        'using the stored access token (or MINIAPP_ACCESS_TOKEN) as the Bearer token; then clear the tokens ' +
        'stored in the profile.',
    )
    .option('--user-key <n>', 'remove the connection of this userKey (remove-by-user-key)')
    .addOption(timeoutOption())
    .addHelpText('after', '\nExamples:\n  miniapp logout\n  miniapp logout --user-key 1001')
    .action(bind(runLogout));
}

async function runLogout(cc: CommandContext, command: Command): Promise<void> {
  const options = command.opts<{ userKey?: string; timeout: string }>();
  const userKey = options.userKey === undefined ? undefined : parseUserKey(options.userKey);
  const [client, store] = await Promise.all([partnerClient(cc, options), tokenStore(cc)]);
  const accessToken = cc.env.MINIAPP_ACCESS_TOKEN?.trim() || store.load()?.accessToken;
  try {
    if (userKey !== undefined) {
      await client.removeByUserKey(userKey, accessToken);
    } else {
      if (!accessToken) {
        const { notLoggedIn } = await import('../../login/session.js');
        throw notLoggedIn(cc.profile);
      }
      await client.removeByAccessToken(accessToken);
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
