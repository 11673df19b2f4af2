/** `miniapp users update`: the update_mask lists exactly the flags given. */
import type { Command } from 'commander';
import type { CommandContext } from '../../context.js';
import type { ConnectionFlags } from '../../connect/grpc-connection.js';
import { UsageError } from '../../../errors.js';
import { parseBoolean, parseId, parseList } from '../../flags.js';
import { printUser } from '../../views/grpc-user-view.js';
import type { UpdatePath } from '../../../users/client.js';
import type { UserMessage } from '../../../users/proto.js';
import { withClient } from './shared.js';

export async function runUpdate(cc: CommandContext, command: Command): Promise<void> {
  const id = parseId(command.processedArgs[0] as string);
  const flags = command.opts<ConnectionFlags & { username?: string; email?: string; fullName?: string; active?: string; roles?: string }>();
  const user: Partial<UserMessage> = {};
  const paths: UpdatePath[] = [];
  if (flags.username !== undefined) {
    user.username = flags.username;
    paths.push('username');
  }
  if (flags.email !== undefined) {
    user.email = flags.email;
    paths.push('email');
  }
  if (flags.fullName !== undefined) {
    user.full_name = flags.fullName;
    paths.push('full_name');
  }
  if (flags.active !== undefined) {
    user.is_active = parseBoolean(flags.active, '--active');
    paths.push('is_active');
  }
  if (flags.roles !== undefined) {
    user.roles = parseList(flags.roles);
    paths.push('roles');
  }
  if (paths.length === 0) {
    throw new UsageError('nothing to update: give at least one of --username, --email, --full-name, --active, --roles');
  }
  const updated = await withClient(cc, flags, (client) => client.updateUser(id, user, paths));
  printUser(cc.out, updated);
  if (!cc.out.json) cc.out.success(`updated ${paths.join(', ')} of user ${id}`);
}
