/** `miniapp users get`: GetUser on the light unary path, grpc-js when that cannot answer. */
import type { Command } from 'commander';
import type { CommandContext } from '../../context.js';
import { connectionOf, type ConnectionFlags } from '../../connect/grpc-connection.js';
import { parseId } from '../../flags.js';
import { printUser } from '../../views/grpc-user-view.js';
import type { UserMessage } from '../../../users/proto.js';
import { withClient } from './shared.js';

export async function runGet(cc: CommandContext, command: Command): Promise<void> {
  const id = parseId(command.processedArgs[0] as string);
  const flags = command.opts<ConnectionFlags>();
  const user = (await quickGetUser(cc, flags, id)) ?? (await withClient(cc, flags, (client) => client.getUser(id)));
  printUser(cc.out, user);
}

/**
 * GetUser without grpc-js, on a plain-text channel (see grpc/unary-call.ts):
 * the answer, or the server's status as the same typed error; undefined
 * when the call did not reach an answering server, for the grpc-js client
 * to try again and say why (GetUser changes nothing, so trying twice is safe).
 */
async function quickGetUser(cc: CommandContext, flags: ConnectionFlags, id: string): Promise<UserMessage | undefined> {
  const connection = await connectionOf(cc, flags);
  // TLS and traced calls go through grpc-js (its credentials, its interceptors).
  if (connection.tls || connection.telemetry) return undefined;
  const [{ unaryCall }, { decodeUser, encodeGetUserRequest }, { serviceCallError }] = await Promise.all([
    import('../../../grpc/client/unary-call.js'),
    import('../../../users/user-wire.js'),
    import('../../../grpc/client/errors.js'),
  ]);
  const outcome = await unaryCall({
    address: connection.address,
    path: '/user.v1.UserService/GetUser',
    message: encodeGetUserRequest(id),
    token: connection.token,
    deadlineMs: connection.deadlineMs ?? 10_000,
  });
  if (outcome.kind === 'answer') return decodeUser(outcome.message);
  if (outcome.kind === 'status') {
    throw serviceCallError(outcome.error, { address: connection.address, deadlineMs: connection.deadlineMs ?? 10_000, tls: false });
  }
  return undefined;
}
