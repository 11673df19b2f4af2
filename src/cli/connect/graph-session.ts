/**
 * A graph API client for one `insights` command: its settings, its flags
 * (--timeout, --max-retries), its --debug request lines, and the activity
 * on stderr that shows what it does and counts down a throttled wait.
 */
import type { Command } from 'commander';
import type { CommandContext } from '../context.js';
import { Activity } from '../render/activity.js';
import { ConfigError, UsageError } from '../../errors.js';
import type { GraphClient } from '../../insights/client.js';
import type { DiscoveryHint, DiscoveryShape, GraphShapeSetting } from '../../insights/accounts.js';

interface GraphFlags {
  maxRetries: number;
  timeout: string;
}

export interface GraphSession {
  client: GraphClient;
  activity: Activity;
  close(): Promise<void>;
  /** Stops at once (Ctrl-C): the activity cleared, a wait ended, the calls in flight failed. */
  abort(): Promise<void>;
}

async function openSession(cc: CommandContext, command: Command, words: string): Promise<GraphSession> {
  const options = command.opts<GraphFlags>();
  const { parseDuration } = await import('../../duration.js');
  const timeoutMs = parseDuration(options.timeout, '--timeout');
  if (timeoutMs <= 0) throw new UsageError('--timeout must be more than 0');
  const baseUrl = (await cc.settings.get('graph-url')).value!;
  const version = (await cc.settings.get('graph-version')).value!;
  const token = await cc.settings.require('graph-token');
  const backoffText = cc.env.MINIAPP_GRAPH_BACKOFF_MS?.trim();
  let backoffMs: number | undefined;
  if (backoffText) {
    backoffMs = Number(backoffText);
    if (!/^\d+$/.test(backoffText)) throw new ConfigError(`MINIAPP_GRAPH_BACKOFF_MS must be a whole number of milliseconds; got "${backoffText}"`);
  }
  const [{ GraphClient }, { describeWait }] = await Promise.all([import('../../insights/client.js'), import('../../insights/throttle.js')]);
  const activity = await Activity.start(cc.out, words);
  const client = new GraphClient({
    baseUrl,
    version,
    token,
    timeoutMs,
    maxRetries: options.maxRetries,
    ...(backoffMs === undefined ? {} : { backoffMs }),
    // A back-off is worth a line wherever the output goes; pacing only shows on a terminal.
    sleep: (ms, why) => activity.wait(ms, describeWait(why), { announce: why.reason === 'throttled' }),
    onWarn: (message) => activity.warn(message),
    ...(cc.debug
      ? {
          onRequest: (log) =>
            activity.log(
              cc.out.errColor.dim(`GET ${log.url} -> ${log.status ?? 'no answer'} in ${Math.round(log.ms)}ms${log.attempt ? ` (retry ${log.attempt})` : ''}`),
            ),
        }
      : {}),
    userAgent: `miniapp/${cc.version}`,
  });
  return {
    client,
    activity,
    close: async () => {
      activity.stop();
      await client.close();
    },
    abort: async () => {
      activity.stop();
      await client.close({ abort: true });
    },
  };
}

/** Runs `work` with a session, and closes it (activity and connections) whatever happens. */
export async function withGraphSession<T>(cc: CommandContext, command: Command, words: string, work: (session: GraphSession) => Promise<T>): Promise<T> {
  const session = await openSession(cc, command, words);
  try {
    return await work(session);
  } finally {
    await session.close();
  }
}

/** Where the profile keeps the discovery shape that answered, and at which graph-url. */
const DISCOVERY_SECTION = 'graphDiscovery';
type Remembered = { url?: string; shape?: DiscoveryShape };

/** The graph-shape setting and the shape remembered for this graph-url. */
export async function discoveryHint(cc: CommandContext, session: GraphSession): Promise<DiscoveryHint> {
  const setting = (await cc.settings.get('graph-shape')).value as GraphShapeSetting | undefined;
  const remembered = cc.settings.file().getSection<Remembered>(cc.profile, DISCOVERY_SECTION);
  return { setting, remembered: remembered?.url === session.client.root.href ? remembered.shape : undefined };
}

/** Keeps the shape that answered, when it is not what the next run would try first anyway; a read-only config dir only costs the calls. */
export async function rememberShape(cc: CommandContext, session: GraphSession, hint: DiscoveryHint, shape: DiscoveryShape | undefined): Promise<void> {
  if (shape === undefined || hint.remembered === shape) return;
  const { discoveryOrder } = await import('../../insights/accounts.js');
  if (hint.remembered === undefined && discoveryOrder(session.client, hint)[0] === shape) return;
  try {
    (await cc.settings.store()).setSection(cc.profile, DISCOVERY_SECTION, { url: session.client.root.href, shape });
  } catch {
    // Not worth failing the command for.
  }
}

/** The business account to read: --account, the graph-account setting, or the only one the token reaches (named on a terminal). */
export async function accountOf(cc: CommandContext, session: GraphSession, flag: string | undefined): Promise<string> {
  const { resolveAccount } = await import('../../insights/accounts.js');
  const setting = flag ? undefined : (await cc.settings.get('graph-account')).value;
  const hint = flag || setting ? {} : await discoveryHint(cc, session);
  const account = await resolveAccount(session.client, { flag, setting }, hint);
  await rememberShape(cc, session, hint, account.shape);
  if (account.source === 'lookup' && cc.io.stderr.isTTY) {
    // Short enough for one line of an 80-column terminal with a usual account name (the charts below fill the rest).
    session.activity.log(cc.out.errColor.dim(`account ${account.id}${account.name ? ` (${account.name})` : ''}: the only one this token reaches`));
  }
  return account.id;
}
