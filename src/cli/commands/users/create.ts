/** `miniapp users create`: the password from the flag, a pipe or the terminal. */
import type { Command } from 'commander';
import type { CommandContext } from '../../context.js';
import type { ConnectionFlags } from '../../connect/grpc-connection.js';
import { MiniappError } from '../../../errors.js';
import { printUser } from '../../views/grpc-user-view.js';
import { withClient } from './shared.js';

export async function runCreate(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags & { username: string; email: string; password?: string; fullName: string }>();
  const { secretOf } = await import('../../terminal/secret-flag.js');
  const password = await secretOf(cc, flags.password, {
    flag: '--password',
    what: 'password',
    pipeExample: 'printf %s "$PW" | miniapp users create ... --password -',
  });
  const response = await withClient(
    cc,
    flags,
    (client) => client.createUser({ username: flags.username, email: flags.email, password, full_name: flags.fullName }),
    false,
  );
  if (!response.user) throw new MiniappError('the server answered CreateUser without a user');
  printUser(cc.out, response.user);
  if (!cc.out.json && response.message) cc.out.success(response.message);
}
