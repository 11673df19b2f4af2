import type { Command } from 'commander';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import { decryptMaterial, partnerClient, timeoutOption, tokenStore } from '../connect/profile.js';
import { printUserInfo } from '../views/user-view.js';

export function registerMe(program: Command, bind: Bind): void {
  program
    .command('me')
    .description(
      'Call login-me with the stored access token (or MINIAPP_ACCESS_TOKEN) and decrypt the personal fields ' +
        "with the profile's key and AAD. An expired access token is refreshed once with the stored refresh token, " +
        'and the new pair is stored.',
    )
    .option('--raw', 'print the encrypted payload as the API sent it, as JSON (what `miniapp decrypt` reads)')
    .addOption(timeoutOption())
    .addHelpText('after', '\nExamples:\n  miniapp me\n  miniapp me --json | jq -r .name\n  miniapp me --raw > response.json && miniapp decrypt response.json')
    .action(bind(runMe));
}

async function runMe(cc: CommandContext, command: Command): Promise<void> {
  const options = command.opts<{ raw?: boolean; timeout: string }>();
  // Check the key before spending a call on login-me.
  const material = options.raw ? undefined : await decryptMaterial(cc);
  const override = cc.env.MINIAPP_ACCESS_TOKEN?.trim() || undefined;
  const [client, store] = await Promise.all([partnerClient(cc, options), tokenStore(cc)]);
  const { fetchUserInfo } = await import('../../login/session.js');
  let result;
  try {
    result = await fetchUserInfo({ client, store, now: cc.now, profile: cc.profile, accessTokenOverride: override });
  } finally {
    await client.close();
  }
  if (result.refreshed) cc.out.info('the access token had expired: refreshed it and stored the new pair');
  if (!material) {
    // Raw is data for another program (decrypt, a bug report): JSON whatever the terminal.
    cc.out.printJson(result.info);
    return;
  }
  const { decryptUserInfo, decryptionError } = await import('../../login/user-info.js');
  const outcome = decryptUserInfo(result.info, material.key.bytes, material.aad.bytes);
  if (outcome.failed.length > 0) throw decryptionError(outcome, result.info, material, { showAad: true });
  printUserInfo(cc.out, outcome.user);
}
