/**
 * What the `miniapp users` commands share: a client of the user service on
 * the command's connection flags, closed after its work.
 */
import type { CommandContext } from '../../context.js';
import { connectionOf, type ConnectionFlags } from '../../connect/grpc-connection.js';
import type { UserServiceClient } from '../../../users/client.js';
import type { LightAnswer } from '../../../grpc/client/light-call.js';

/** Users a page of `users list` shows on a terminal, as `gh issue list` shows 30 issues. */
export const DEFAULT_PAGE_SIZE = 30;

export async function connect(cc: CommandContext, flags: ConnectionFlags, options: { needToken?: boolean } = {}): Promise<UserServiceClient> {
  const connection = await connectionOf(cc, flags, options);
  const [{ connectUserService }, { quietGrpcLogs }] = await Promise.all([import('../../../users/client.js'), import('../../connect/grpc-logging.js')]);
  await quietGrpcLogs(cc.env);
  return connectUserService(connection);
}

export async function withClient<T>(cc: CommandContext, flags: ConnectionFlags, run: (client: UserServiceClient) => Promise<T>, needToken = true): Promise<T> {
  const client = await connect(cc, flags, { needToken });
  try {
    return await run(client);
  } finally {
    client.close();
  }
}

/**
 * A call that changes nothing, on the light path (grpc/client/light-call.ts:
 * node:http2, no grpc-js): its answer, or the server's status as the same
 * typed error; undefined when the grpc-js client must make it (TLS, tracing,
 * or the call did not reach an answering server, which it then words).
 */
export async function lightRead<T>(cc: CommandContext, flags: ConnectionFlags, path: string, request: object): Promise<LightAnswer<T> | undefined> {
  const connection = await connectionOf(cc, flags);
  const { lightCall } = await import('../../../grpc/client/light-call.js');
  return lightCall<T>(connection, path, request);
}
