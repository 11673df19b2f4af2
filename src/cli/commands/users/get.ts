/** `miniapp users get`: GetUser on the light path, grpc-js when that cannot answer. */
import type { Command } from 'commander';
import type { CommandContext } from '../../context.js';
import type { ConnectionFlags } from '../../connect/grpc-connection.js';
import { parseId } from '../../flags.js';
import { printUser } from '../../views/grpc-user-view.js';
import type { UserMessage } from '../../../users/proto.js';
import { lightRead } from './shared.js';

export async function runGet(cc: CommandContext, command: Command): Promise<void> {
  const id = parseId(command.processedArgs[0] as string);
  const flags = command.opts<ConnectionFlags>();
  const request = { user_id: id };
  const user = await lightRead<UserMessage, UserMessage>(
    cc,
    flags,
    { path: '/user.v1.UserService/GetUser', request },
    (answer) => answer.messages[0]!,
    (client) => client.getUser(id),
  );
  printUser(cc.out, user);
}
