/** `miniapp users watch`: changes as they happen, resumed after the last one printed when the stream breaks. */
import type { Command } from 'commander';
import type { CommandContext } from '../../context.js';
import { connectionOf, reconnectNotice, type ConnectionFlags } from '../../connect/grpc-connection.js';
import { ConfigError, UsageError } from '../../../errors.js';
import { parseId, parseList, parseWholeNumber } from '../../flags.js';
import { isoOf, userJson, type UserJson } from '../../views/grpc-user-view.js';
import type { UserEvent } from '../../../users/client.js';
import { EVENT_TYPES, type EventTypeName } from '../../../users/user-record.js';


function typesOf(text: string): EventTypeName[] {
  const types = parseList(text).map((type) => type.toUpperCase());
  const unknown = types.filter((type) => !(EVENT_TYPES as readonly string[]).includes(type));
  if (types.length === 0 || unknown.length > 0) {
    throw new UsageError(`--types takes a comma-separated list of created, updated, deleted; got "${text}"`);
  }
  return [...new Set(types)] as EventTypeName[];
}

interface EventJson {
  /** The change's number in the server's log (null from a server that does not number changes). */
  sequence: number | null;
  type: EventTypeName;
  user: UserJson | null;
  timestamp: string | null;
}

function eventJson(event: UserEvent): EventJson {
  const sequence = Number(event.sequence);
  return { sequence: sequence > 0 ? sequence : null, type: event.type, user: event.user ? userJson(event.user) : null, timestamp: isoOf(event.timestamp) };
}

function reconnectBaseOf(cc: CommandContext): number | undefined {
  const text = cc.env.MINIAPP_GRPC_RECONNECT_MS?.trim();
  if (!text) return undefined;
  if (!/^\d+$/.test(text) || Number(text) < 1) throw new ConfigError(`MINIAPP_GRPC_RECONNECT_MS must be a positive number of milliseconds; got "${text}"`);
  return Number(text);
}

export async function runWatch(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags & { userId?: string; types?: string; count?: string; resumeAfter?: string }>();
  const request = {
    user_id: flags.userId === undefined ? '0' : parseId(flags.userId, '--user-id'),
    types: flags.types === undefined ? [] : typesOf(flags.types),
    ...(flags.resumeAfter === undefined ? {} : { resume_after: String(parseWholeNumber(flags.resumeAfter, '--resume-after', 0)) }),
  };
  const count = flags.count === undefined ? undefined : parseWholeNumber(flags.count, '--count', 1);
  const baseDelayMs = reconnectBaseOf(cc);
  // Flags and settings are resolved once; each (re)connection is a fresh client built from them.
  const settings = await connectionOf(cc, flags);
  const { watchUserChanges, connectUserService, DEFAULT_DEADLINE_MS } = await import('../../../users/client.js');
  await (await import('../../connect/grpc-logging.js')).quietGrpcLogs(cc.env);

  const controller = new AbortController();
  void cc.waitForShutdown().then((signal) => {
    if (controller.signal.aborted) return;
    cc.out.info(`${signal}: stopping the watch`);
    controller.abort();
  });

  const human = cc.out.human;
  const c = cc.out.color;
  const paint: Record<EventTypeName, (text: string) => string> = { CREATED: c.green, UPDATED: c.yellow, DELETED: c.red };
  let seen = 0;
  const onEvent = (event: UserEvent) => {
    if (count !== undefined && seen >= count) return;
    seen++;
    const json = eventJson(event);
    if (cc.out.json) {
      cc.out.line(JSON.stringify(json));
    } else if (human) {
      const u = json.user;
      cc.out.line(
        `${String(json.sequence ?? '').padStart(8)}  ${(json.timestamp ?? '').padEnd(24)}  ${paint[json.type](json.type.padEnd(7))}  ${String(u?.id ?? '').padStart(6)}  ` +
          `${(u?.username ?? '').padEnd(20)}  ${u?.email ?? ''}${u && !u.is_active ? c.dim(' (inactive)') : ''}${u?.roles.length ? c.dim(` [${u.roles.join(',')}]`) : ''}`,
      );
    } else {
      const u = json.user;
      cc.out.line(
        // The sequence last: scripts that cut the older columns keep working.
        [json.timestamp ?? '', json.type, u?.id ?? '', u?.username ?? '', u?.email ?? '', u?.full_name ?? '', u?.is_active ?? '', u?.roles.join(',') ?? '', u?.created_at ?? '', json.sequence ?? '']
          .map((cell) => String(cell).replace(/[\t\r\n]+/g, ' '))
          .join('\t'),
      );
    }
    if (count !== undefined && seen >= count) controller.abort();
  };

  await watchUserChanges({
    connect: () => connectUserService(settings),
    request,
    signal: controller.signal,
    onEvent,
    baseDelayMs,
    connectTimeoutMs: settings.deadlineMs ?? DEFAULT_DEADLINE_MS,
    onConnected: ({ reconnected, resumedAfter }) => {
      if (reconnected) {
        cc.out.info(
          resumedAfter === undefined
            ? `reconnected to ${settings.address}; this server does not number its changes, so those made while disconnected are not replayed`
            : `reconnected to ${settings.address}; resuming after change ${resumedAfter}`,
        );
      } else if (human) {
        cc.out.info(cc.out.errColor.dim(`watching ${settings.address}${resumedAfter === undefined ? '' : ` from change ${resumedAfter + 1}`}; Ctrl-C stops`));
        cc.out.line(c.bold(`${'seq'.padStart(8)}  ${'time'.padEnd(24)}  ${'event'.padEnd(7)}  ${'id'.padStart(6)}  ${'username'.padEnd(20)}  email`));
      }
    },
    onRetry: (retry) => cc.out.warn(reconnectNotice('watch', retry)),
  });
}
