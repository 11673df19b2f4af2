/** `miniapp users delete`. */
import type { Command } from 'commander';
import type { CommandContext } from '../../context.js';
import type { ConnectionFlags } from '../../connect/grpc-connection.js';
import { parseId } from '../../flags.js';
import { withClient } from './shared.js';

export async function runDelete(cc: CommandContext, command: Command): Promise<void> {
  const id = parseId(command.processedArgs[0] as string);
  await withClient(cc, command.opts<ConnectionFlags>(), (client) => client.deleteUser(id));
  if (cc.out.json) cc.out.printJson({ id: Number(id), deleted: true });
  else cc.out.success(`deleted user ${id}`);
}
