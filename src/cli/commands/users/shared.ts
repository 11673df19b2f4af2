/**
 * What the `miniapp users` commands share: a client of the user service on
 * the command's connection flags, closed after its work.
 */
import type { CommandContext } from '../../context.js';
import { connectionOf, readLightFirst, type ConnectionFlags } from '../../connect/grpc-connection.js';
import type { ConnectOptions, UserServiceClient } from '../../../users/client.js';
import type { LightAnswer } from '../../../grpc/client/light-call.js';

/** Users a page of `users list` shows on a terminal, as `gh issue list` shows 30 issues. */
export const DEFAULT_PAGE_SIZE = 30;

export async function connect(cc: CommandContext, flags: ConnectionFlags, options: { needToken?: boolean } = {}): Promise<UserServiceClient> {
  return connectOn(cc, await connectionOf(cc, flags, options));
}

async function connectOn(cc: CommandContext, connection: ConnectOptions): Promise<UserServiceClient> {
  const [{ connectUserService }, { quietGrpcLogs }] = await Promise.all([import('../../../users/client.js'), import('../../connect/grpc-logging.js')]);
  await quietGrpcLogs(cc.env);
  return connectUserService(connection);
}

async function using<T>(client: UserServiceClient, run: (client: UserServiceClient) => Promise<T>): Promise<T> {
  try {
    return await run(client);
  } finally {
    client.close();
  }
}

export async function withClient<T>(cc: CommandContext, flags: ConnectionFlags, run: (client: UserServiceClient) => Promise<T>, needToken = true): Promise<T> {
  return using(await connect(cc, flags, { needToken }), run);
}

/**
 * A call that changes nothing, on the light path (node:http2, no grpc-js), its answer made what the command shows by
 * `fromAnswer`; else through the grpc-js client (`grpcJs`), within what is left of the deadline (readLightFirst).
 */
export async function lightRead<T, R>(
  cc: CommandContext,
  flags: ConnectionFlags,
  read: { path: string; request: object },
  fromAnswer: (answer: LightAnswer<T>) => R,
  grpcJs: (client: UserServiceClient) => Promise<R>,
): Promise<R> {
  return readLightFirst(
    cc,
    flags,
    {},
    async (connection) => {
      const { lightCall } = await import('../../../grpc/client/light-call.js');
      const answer = await lightCall<T>(connection, read.path, read.request);
      return answer && fromAnswer(answer);
    },
    async (connection) => using(await connectOn(cc, connection), grpcJs),
  );
}
