import type { Command } from 'commander';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import { UsageError } from '../../errors.js';
import { parseDuration } from '../../duration.js';
import { parseUserKey, wholeNumber } from '../flags.js';
import { isKnownUnlinkReason, unlinkMeaning } from '../../login/unlink-reasons.js';

export function registerCallbacks(program: Command, bind: Bind): void {
  const callbacks = program.command('callbacks').description('The unlink callbacks that `miniapp serve` has recorded, in its database.');
  callbacks
    .command('list')
    .description(
      'list recorded unlink callbacks, oldest first, with what each referrer means (UNLINK, WITHDRAWAL_TERMS, WITHDRAWAL_PLATFORM and WITHDRAWAL_TOSS are known)',
    )
    .option('--since <when>', 'only those received since a date (2026-11-01, an ISO time) or a duration ago (2h, 7d)')
    .option('--user-key <n>', 'only those of this userKey')
    .option('--limit <n>', 'only the N most recent (still oldest first)', wholeNumber('--limit'))
    .option('--data-dir <dir>', 'the data dir of `miniapp serve` (default: MINIAPP_DATA_DIR, else ~/.local/share/miniapp)')
    .option('--database <url>', 'the PostgreSQL of `miniapp serve --database` (default: MINIAPP_DATABASE_URL, else database-url)')
    .addHelpText('after', '\nExamples:\n  miniapp callbacks list --limit 20\n  miniapp callbacks list --since 7d --user-key 1001 --json')
    .action(bind(runList));
}

function sinceOf(text: string, now: Date): Date {
  if (/^\d+(\.\d+)?(ms|s|m|h|d|w)/.test(text.trim())) return new Date(now.getTime() - parseDuration(text, '--since'));
  const date = new Date(text);
  if (Number.isNaN(date.getTime())) throw new UsageError(`--since must be a date such as 2026-11-01 or a duration such as 7d; got "${text}"`);
  return date;
}

async function runList(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<{ since?: string; userKey?: string; limit?: number; dataDir?: string; database?: string }>();
  const since = flags.since === undefined ? undefined : sinceOf(flags.since, cc.now());
  const userKey = flags.userKey === undefined ? undefined : parseUserKey(flags.userKey);
  const [{ openServeStore }, { UnlinkEventStore }] = await Promise.all([import('../connect/serve-store.js'), import('../../store/unlink-events.js')]);
  const opened = await openServeStore(cc, flags, 'read');
  if (!opened.store) {
    cc.out.info(`no database at ${opened.where} yet: \`miniapp serve\` has recorded nothing there`);
    cc.out.table([], []);
    return;
  }
  try {
    const store = new UnlinkEventStore(opened.store.sql);
    const events = await store.list({ since, userKey, limit: flags.limit });
    // WITHDRAWAL_TOSS (the vendor's documentation) is as known as the spec's three; anything else is shown as unknown.
    const rows = events.map((event) => ({ ...event, known: isKnownUnlinkReason(event.referrer), meaning: unlinkMeaning(event.referrer) }));
    cc.out.table(rows, [
      { header: 'received', value: (e) => e.receivedAt },
      { header: 'userKey', value: (e) => e.userKey },
      { header: 'referrer', value: (e) => e.referrer ?? '' },
      { header: 'method', value: (e) => e.method },
      { header: 'source', value: (e) => e.source ?? '' },
      { header: 'meaning', value: (e) => e.meaning, shrink: 1 },
    ]);
    if (cc.out.human && flags.limit !== undefined && events.length === flags.limit) {
      const all = await store.count({ since, userKey });
      if (all > events.length) cc.out.info(cc.out.errColor.dim(`the ${events.length} most recent of ${all}; a larger --limit shows more`));
    }
  } finally {
    await opened.store.close();
  }
}
