/** `miniapp users watch`: changes as they happen, resumed after the last one printed when the stream breaks. */
import type { Command } from 'commander';
import type { CommandContext } from '../../context.js';
import { connectionOf, reconnectNotice, type ConnectionFlags } from '../../connect/grpc-connection.js';
import { ConfigError, UsageError } from '../../../errors.js';
import { parseId, parseList, parseWholeNumber } from '../../flags.js';
import { isoOf, userJson, type UserJson } from '../../views/grpc-user-view.js';
import type { UserEvent } from '../../../users/client.js';
import { EVENT_TYPES, type EventTypeName } from '../../../users/user-record.js';
import { printable } from '../../render/printable.js';
import { textWidths } from '../../render/cells.js';

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

/**
 * The events on a terminal, one line each, fitted to its width. Where it has
 * room (120 columns) the time is whole; narrower, it is the time of day
 * (UTC) under a line for each new day. The e-mail is never cut, since people
 * copy it: when it does not fit on the event's line it goes whole on the
 * next, under the username.
 */
class WatchScreen {
  readonly #cc: CommandContext;
  readonly #wide: boolean;
  readonly #paint: Record<EventTypeName, (text: string) => string>;
  #day: string | undefined;

  constructor(cc: CommandContext) {
    this.#cc = cc;
    this.#wide = (cc.io.stdout.columns || 80) >= 120;
    const c = cc.out.color;
    this.#paint = { CREATED: c.green, UPDATED: c.yellow, DELETED: c.red };
  }

  #columns(seq: string, time: string, event: string, id: string, username: string): string {
    return this.#wide
      ? `${seq.padStart(8)}  ${time.padEnd(24)}  ${event}  ${id.padStart(6)}  ${username.padEnd(20)}`
      : `${seq.padStart(6)}  ${time.padEnd(8)}  ${event}  ${id.padStart(6)}  ${username.padEnd(12)}`;
  }

  header(): string {
    return `${this.#columns('seq', 'time', 'event'.padEnd(7), 'id', 'username')}  email`;
  }

  lines(json: EventJson): string[] {
    const c = this.#cc.out.color;
    const u = json.user;
    const lines: string[] = [];
    const timestamp = json.timestamp ?? '';
    let time = timestamp;
    if (!this.#wide) {
      const day = timestamp.slice(0, 10);
      if (day && day !== this.#day) lines.push(c.dim(`── ${day} (UTC) ──`));
      if (day) this.#day = day;
      time = timestamp.slice(11, 19);
    }
    const username = printable(u?.username ?? '');
    const head = this.#columns(String(json.sequence ?? ''), time, this.#paint[json.type](json.type.padEnd(7)), String(u?.id ?? ''), username);
    const tail = `${printable(u?.email ?? '')}${u && !u.is_active ? c.dim(' (inactive)') : ''}${u?.roles.length ? c.dim(` [${u.roles.map(printable).join(',')}]`) : ''}`;
    const width = (this.#cc.io.stdout.columns || 80) - 1;
    const { textWidth } = textWidths();
    if (!tail || textWidth(`${head}  ${tail}`) <= width) {
      lines.push(`${head}  ${tail}`.trimEnd());
      return lines;
    }
    // Under the username where the e-mail fits there, else at the left edge; a soft wrap beyond that keeps it whole.
    const under = textWidth(head) - textWidth(username.padEnd(this.#wide ? 20 : 12));
    lines.push(head.trimEnd(), `${' '.repeat(under + textWidth(tail) <= width ? under : 2)}${tail}`);
    return lines;
  }
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
  const screen = human ? new WatchScreen(cc) : undefined;
  let seen = 0;
  const onEvent = (event: UserEvent) => {
    if (count !== undefined && seen >= count) return;
    seen++;
    const json = eventJson(event);
    if (cc.out.json) {
      cc.out.line(JSON.stringify(json));
    } else if (screen) {
      for (const line of screen.lines(json)) cc.out.line(line);
    } else {
      const u = json.user;
      cc.out.line(
        // The sequence last: scripts that cut the older columns keep working.
        [
          json.timestamp ?? '',
          json.type,
          u?.id ?? '',
          u?.username ?? '',
          u?.email ?? '',
          u?.full_name ?? '',
          u?.is_active ?? '',
          u?.roles.join(',') ?? '',
          u?.created_at ?? '',
          json.sequence ?? '',
        ]
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
      // Connected, the watch runs until stopped: warnings are written as they come from now on, --json or not.
      cc.out.releaseWarnings();
      if (reconnected) {
        cc.out.info(
          resumedAfter === undefined
            ? `reconnected to ${settings.address}; this server does not number its changes, so those made while disconnected are not replayed`
            : `reconnected to ${settings.address}; resuming after change ${resumedAfter}`,
        );
      } else if (human) {
        cc.out.info(cc.out.errColor.dim(`watching ${settings.address}${resumedAfter === undefined ? '' : ` from change ${resumedAfter + 1}`}; Ctrl-C stops`));
        cc.out.line(c.bold(screen!.header()));
      }
    },
    onRetry: (retry) => cc.out.warn(reconnectNotice('watch', retry)),
  });
}
