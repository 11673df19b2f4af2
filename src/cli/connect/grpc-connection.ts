/**
 * The connection flags every gRPC client command shares (`miniapp users`,
 * `miniapp monitor`): --addr, --token, --deadline, --tls, --ca, resolved
 * against the environment and the profile.
 */
import type { Command } from 'commander';
import type { CommandContext } from '../context.js';
import { AuthError, ConfigError, UsageError } from '../../errors.js';
import { parseDuration } from '../../duration.js';
import type { ConnectOptions } from '../../users/client.js';
import { DEFAULT_DEADLINE_MS } from '../../grpc/client/errors.js';

export interface ConnectionFlags {
  addr?: string;
  token?: string;
  deadline: string;
  tls?: boolean;
  ca?: string;
}

export function withConnection(command: Command, deadlineHelp = 'time limit of each call; for watch, bulk-create, sync and chat, of connecting'): Command {
  return command
    .option('--addr <host:port>', 'gRPC address of `miniapp serve` (default: grpc-addr)')
    .option('--token <token>', 'bearer token (default: MINIAPP_GRPC_TOKEN, then grpc-token)')
    .option('--deadline <duration>', deadlineHelp, '10s')
    .option('--tls', 'connect with TLS (implied by --ca or the grpc-ca setting)')
    .option('--ca <file>', "CA that the server's certificate chains to: PEM file or text (default: grpc-ca)");
}

/** Address, token, TLS and deadline from the flags, the environment and the profile, checked. */
export async function connectionOf(
  cc: CommandContext,
  flags: ConnectionFlags,
  options: { needToken?: boolean; service?: string } = {},
): Promise<ConnectOptions> {
  let address: string;
  if (flags.addr !== undefined) {
    const { settingSpec } = await import('../../config/keys.js');
    try {
      address = settingSpec('grpc-addr').validate(flags.addr);
    } catch (error) {
      if (error instanceof ConfigError) throw new UsageError(`--addr must be HOST:PORT with a port from 1 to 65535; got "${flags.addr}"`);
      throw error;
    }
  } else {
    address = (await cc.settings.get('grpc-addr')).value ?? '127.0.0.1:50051';
  }
  // A --token given empty (a script's unset variable) must never fall through to the profile's token, often serve's admin one.
  if (flags.token !== undefined && flags.token.trim() === '') {
    throw new UsageError('--token is empty', { hint: "give the token, or leave --token out to use MINIAPP_GRPC_TOKEN or the profile's grpc-token" });
  }
  const token = flags.token?.trim() || (await cc.settings.get('grpc-token')).value;
  if (options.needToken !== false && !token) {
    throw new AuthError(`no token for ${options.service ?? 'the user service'}`, {
      hint: "pass --token, set MINIAPP_GRPC_TOKEN, or run `miniapp serve`, which stores its admin token as the profile's grpc-token",
      code: 'UNAUTHENTICATED',
    });
  }
  const ca = flags.ca ?? (await cc.settings.get('grpc-ca')).value;
  const deadlineMs = parseDuration(flags.deadline, '--deadline');
  if (deadlineMs <= 0) throw new UsageError('--deadline must be longer than 0');
  const tls = Boolean(flags.tls) || Boolean(ca) || (await cc.settings.get('grpc-tls')).value === 'true';
  return { address, token, tls, ca, deadlineMs, telemetry: cc.telemetry };
}

/** What a following command (users watch, monitor) says on stderr before each wait to reconnect; `lost` names what broke. */
export function reconnectNotice(lost: string, { attempt, delayMs, reason }: { attempt: number; delayMs: number; reason: string }): string {
  return attempt === 1
    ? `${lost} lost (${reason}); reconnecting in ${delayMs} ms (attempt ${attempt})`
    : `still not connected (${reason}); trying again in ${delayMs} ms (attempt ${attempt})`;
}

/**
 * A read (it changes nothing) on the light path first (`light`: node:http2, no grpc-js, grpc/client/light-call.ts),
 * else through grpc-js (`grpcJs`: TLS, tracing, or the light call never reached an answering server, which grpc-js
 * then words as users know it). grpc-js keeps to what is left of the one deadline: a light call that waited for a
 * silent server spent part of it, and the command ends within the --deadline its user gave, not twice it.
 */
export async function readLightFirst<T>(
  cc: CommandContext,
  flags: ConnectionFlags,
  options: { service?: string },
  light: (connection: ConnectOptions) => Promise<T | undefined>,
  grpcJs: (connection: ConnectOptions) => Promise<T>,
): Promise<T> {
  const connection = await connectionOf(cc, flags, options);
  const startedAt = Date.now();
  const answer = await light(connection);
  if (answer !== undefined) return answer;
  return grpcJs({ ...connection, endsBy: startedAt + (connection.deadlineMs ?? DEFAULT_DEADLINE_MS) });
}
