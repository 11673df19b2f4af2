/**
 * `miniapp webhooks ...`: the outbox of `miniapp serve` (list, resend,
 * cancel) and signature checks for receivers. The outbox commands work on
 * serve's database directly (the PostgreSQL of --database, else the SQLite
 * file of the data dir), running or not; see src/webhooks/ for why
 * that is safe.
 */
import { Option, type Command } from '../commander.js';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import { MiniappError, UsageError } from '../../errors.js';
import { wholeNumber } from '../flags.js';
import { formatDuration, relativeTime } from '../../duration.js';
import type { Column } from '../render/output.js';
import type { Delivery, DeliveryState, Outcome } from '../../webhooks/delivery.js';
import type { WebhookOutbox } from '../../webhooks/outbox.js';

const STATES = ['pending', 'delivered', 'failed', 'cancelled', 'held'] as const;
const RESENDABLE = ['delivered', 'failed', 'cancelled', 'held'] as const;
const DATA_DIR_HELP = 'the data dir of `miniapp serve` (default: MINIAPP_DATA_DIR, else ~/.local/share/miniapp)';
const DATABASE_HELP = 'the PostgreSQL of `miniapp serve --database` (default: MINIAPP_DATABASE_URL, else database-url)';

export function registerWebhooks(program: Command, bind: Bind): void {
  const webhooks = program
    .command('webhooks')
    .description(
      'The webhook deliveries of `miniapp serve` (post.created, order.paid, order.refunded, order.cancelled, payment.refunded): list, resend, cancel; and signature checks for receivers.',
    );
  webhooks
    .command('list')
    .summary('list webhook deliveries with their state, attempts and last result')
    .description(
      'list webhook deliveries, oldest first: state (pending, delivered, failed, cancelled, held), attempts, when the ' +
        'next one is due, and the last status or error. --json prints each delivery in full, with its body and every attempt.',
    )
    .option('--state <state>', `only deliveries in this state: ${STATES.join(', ')}`)
    .option('--url <url>', 'only deliveries to this URL')
    .option('--limit <n>', 'only the N most recent (still oldest first)', wholeNumber('--limit'))
    .option('--data-dir <dir>', DATA_DIR_HELP)
    .option('--database <url>', DATABASE_HELP)
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp webhooks list --limit 20\n  miniapp webhooks list --state held\n  miniapp webhooks list --state failed --json',
    )
    .action(bind(runList));
  webhooks
    .command('resend')
    .summary('queue deliveries again: same body, same X-Webhook-Delivery, fresh attempts')
    .description(
      'Queue deliveries again as new pending ones, due now, with a fresh set of attempts: the same body, signed the same ' +
        'way, and the same X-Webhook-Delivery id, so a receiver that de-duplicates on it never processes a body twice. ' +
        'Works on delivered, failed, cancelled and held deliveries (a held one resent is marked cancelled). Serve on ' +
        'PostgreSQL sends them at once (every instance is told); serve on SQLite at its next look, within 30 s. They are ' +
        'held when no running serve sends to the URL.',
    )
    .argument('[ids...]', 'delivery IDs (from `miniapp webhooks list`)')
    .option('--url <url>', 'instead of IDs: every failed or held delivery to this URL (or those in --state)')
    .addOption(new Option('--state <state>', 'with --url: only deliveries in this state').choices(RESENDABLE))
    .option('--to <url>', 'send them to this URL instead (the receiver moved)')
    .option('--wait', 'wait until serve has delivered them, or given up; exit 1 unless every one was delivered')
    .option('--data-dir <dir>', DATA_DIR_HELP)
    .option('--database <url>', DATABASE_HELP)
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp webhooks resend 42\n  miniapp webhooks resend --url https://old.example.com/hook --to https://new.example.com/hook --wait\n' +
        '  miniapp webhooks resend --url https://hooks.example.com/blog --state failed --json',
    )
    .action(bind(runResend));
  webhooks
    .command('cancel')
    .summary('stop further attempts at pending or held deliveries')
    .description('Cancel pending or held deliveries: serve makes no further attempt at them. Cancelling a cancelled one is not an error.')
    .argument('[ids...]', 'delivery IDs (from `miniapp webhooks list`)')
    .option('--url <url>', 'instead of IDs: every pending or held delivery to this URL')
    .option('--data-dir <dir>', DATA_DIR_HELP)
    .option('--database <url>', DATABASE_HELP)
    .addHelpText('after', '\nExamples:\n  miniapp webhooks cancel 42 43\n  miniapp webhooks cancel --url https://old.example.com/hook')
    .action(bind(runCancel));
  webhooks
    .command('verify')
    .summary("check a delivery's signatures (X-Webhook-Signature, webhook-signature) against the body a receiver got")
    .description(
      "Check the signatures of a delivery against the body a receiver got, byte for byte (FILE, or stdin): the spec's " +
        "X-Webhook-Signature (--signature), Standard Webhooks' webhook-signature (--webhook-signature with --webhook-id and " +
        '--webhook-timestamp), or both. Exits 0 when every one given matches, 1 when one does not. The secret comes from ' +
        '--secret, else MINIAPP_WEBHOOK_SECRET (prefer the environment: flags end up in shell history).',
    )
    .argument('[file]', 'file holding the raw request body; "-" or nothing reads stdin')
    .option('--secret <secret>', 'the shared secret (env MINIAPP_WEBHOOK_SECRET)')
    .option('--signature <sig>', 'the X-Webhook-Signature header value: sha256=<64 hex>')
    .option('--webhook-signature <sigs>', 'the webhook-signature header value: v1,<base64> (several, space-separated)')
    .option('--webhook-id <id>', "the webhook-id header value (the delivery's id, as X-Webhook-Delivery)")
    .option('--webhook-timestamp <seconds>', 'the webhook-timestamp header value (Unix seconds of the attempt)')
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp webhooks verify --signature "sha256=5d41..." body.json\n' +
        '  MINIAPP_WEBHOOK_SECRET=s3cret miniapp webhooks verify --signature "$SIG" - < body.json\n' +
        '  miniapp webhooks verify --webhook-id "$ID" --webhook-timestamp "$TS" --webhook-signature "$WSIG" body.json',
    )
    .action(bind(runVerify));
}

/* ----------------------------------------------------------------- outbox */

interface StoreFlags {
  dataDir?: string;
  database?: string;
}

/** serve's outbox, or undefined when serve has not created its SQLite database yet (with a note saying so). */
async function openOutbox(
  cc: CommandContext,
  flags: StoreFlags,
  mode: 'read' | 'write',
): Promise<{ outbox: WebhookOutbox; close(): Promise<void> } | undefined> {
  const [{ openServeStore }, { WebhookOutbox }] = await Promise.all([import('../connect/serve-store.js'), import('../../webhooks/outbox.js')]);
  // Writers open it as serve does (migrations; WAL and a busy time-out on SQLite), so both can write at once.
  const opened = await openServeStore(cc, flags, mode);
  if (!opened.store) {
    cc.out.info(`no database at ${opened.where} yet: \`miniapp serve\` has sent no webhook from it`);
    return undefined;
  }
  const { store } = opened;
  // The store's signals tell serve's dispatchers of a resend or a cancel (every instance, on PostgreSQL).
  return { outbox: new WebhookOutbox(store, cc.now), close: () => store.close() };
}

async function checkedUrl(flag: string, text: string): Promise<string> {
  const { checkWebhookUrl } = await import('../../webhooks/delivery.js');
  try {
    return checkWebhookUrl(text);
  } catch (error) {
    throw new UsageError(`${flag}: ${(error as Error).message}`);
  }
}

function idsOf(texts: readonly string[]): number[] {
  return texts.map((text) => wholeNumber('a delivery ID')(text));
}

/** IDs or --url, not both and not neither. */
function selection(command: string, ids: readonly string[], url: string | undefined): void {
  if (ids.length > 0 && url !== undefined) throw new UsageError(`give delivery IDs or --url, not both`);
  if (ids.length === 0 && url === undefined) {
    throw new UsageError(`${command} needs delivery IDs or --url URL`, { hint: 'find them with `miniapp webhooks list`' });
  }
}

function lastResult(attempt: { statusCode: number | null; error: string | null } | undefined): string {
  if (!attempt) return '';
  if (attempt.statusCode !== null) return `HTTP ${attempt.statusCode}`;
  return attempt.error ?? 'no answer';
}

/** The columns of `list`; on a terminal times are relative (`in 4m`, `3m ago`), as gh shows them, and narrower. */
function listColumns(cc: CommandContext): Column<Delivery>[] {
  const now = cc.now();
  const time = (at: string | null, due: boolean) => {
    if (at === null || !cc.out.human) return at ?? '';
    return due && Date.parse(at) <= now.getTime() ? 'due now' : relativeTime(at, now);
  };
  return [
    { header: 'id', value: (d) => d.id },
    { header: 'event', value: (d) => d.event },
    // On a narrow terminal the URL gives way first, then the last error, then the rest; the ID and the state last.
    { header: 'url', value: (d) => d.url, shrink: 2 },
    // A state cut to "deliver…" says nothing.
    { header: 'state', value: (d) => d.state, shrink: -1 },
    { header: 'attempts', value: (d) => d.attemptCount },
    { header: 'next attempt', value: (d) => time(d.nextAttemptAt, true) },
    { header: 'last result', value: (d) => lastResult(d.attempts.at(-1)), shrink: 1 },
    { header: 'created', value: (d) => time(d.createdAt, false) },
  ];
}

/** What cancel and resend print when piped: one line per delivery they touched. */
const SHORT_COLUMNS: readonly Column<Delivery>[] = [
  { header: 'id', value: (d) => d.id },
  { header: 'state', value: (d) => d.state },
  { header: 'url', value: (d) => d.url, shrink: 1 },
];

/* ---------------------------------------------------------------- actions */

async function runList(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<{ state?: string; url?: string; limit?: number } & StoreFlags>();
  if (flags.state !== undefined && !(STATES as readonly string[]).includes(flags.state)) {
    throw new UsageError(`--state must be one of ${STATES.join(', ')}; got "${flags.state}"`);
  }
  const url = flags.url === undefined ? undefined : await checkedUrl('--url', flags.url);
  const opened = await openOutbox(cc, flags, 'read');
  if (!opened) {
    cc.out.table([], []);
    return;
  }
  try {
    const filter = { state: flags.state as DeliveryState | undefined, url };
    const deliveries = await opened.outbox.list({ ...filter, limit: flags.limit });
    cc.out.table(deliveries, listColumns(cc));
    if (cc.out.human && flags.limit !== undefined && deliveries.length === flags.limit) {
      const all = await opened.outbox.count(filter);
      if (all > deliveries.length) cc.out.info(cc.out.errColor.dim(`the ${deliveries.length} most recent of ${all}; a larger --limit shows more`));
    }
  } finally {
    await opened.close();
  }
}

/** Prints what was done and fails, after the others, on what was refused. */
function report(cc: CommandContext, verb: 'cancelled' | 'queued', outcome: Outcome, asked: number, describe: (d: Delivery) => string): void {
  // A cancel's JSON always has already_cancelled (a resend has no such case): one shape, whatever was asked.
  const already = outcome.already === undefined ? {} : { [`already_${verb}`]: outcome.already };
  if (cc.out.json) cc.out.printJson({ [verb]: outcome.done, ...already, refused: outcome.refused });
  else {
    if (cc.out.isTTY) for (const delivery of outcome.done) cc.out.success(describe(delivery));
    else cc.out.table(outcome.done, SHORT_COLUMNS);
    for (const id of outcome.already ?? []) cc.out.info(`delivery ${id} was already ${verb}: nothing to do`);
  }
  const what = verb === 'cancelled' ? 'cancel' : 'resend';
  if (outcome.refused.length === 1 && asked === 1) {
    throw new MiniappError(`cannot ${what} delivery ${outcome.refused[0]!.id}: ${outcome.refused[0]!.reason}`, { hint: 'see it with `miniapp webhooks list`' });
  }
  if (outcome.refused.length > 0) {
    for (const { id, reason } of outcome.refused) cc.out.warn(`delivery ${id}: ${reason}`);
    throw new MiniappError(`could not ${what} ${outcome.refused.length} of ${asked} deliveries`);
  }
}

async function runCancel(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<{ url?: string } & StoreFlags>();
  const texts = command.processedArgs[0] as string[];
  selection('cancel', texts, flags.url);
  const ids = idsOf(texts);
  const url = flags.url === undefined ? undefined : await checkedUrl('--url', flags.url);
  const opened = await openOutbox(cc, flags, 'write');
  if (!opened) {
    if (url === undefined) throw new MiniappError(`no delivery ${ids[0]}: there is no outbox yet`);
    report(cc, 'cancelled', { done: [], refused: [], already: [] }, 0, () => '');
    return;
  }
  try {
    const outcome = url === undefined ? await opened.outbox.cancel(ids) : { done: await opened.outbox.cancelUrl(url), refused: [], already: [] };
    if (url !== undefined && outcome.done.length === 0 && !cc.out.json) cc.out.info(`nothing to cancel: no pending or held delivery to ${url}`);
    report(cc, 'cancelled', outcome, ids.length, (d) => `cancelled delivery ${d.id} (${d.event} to ${d.url})`);
  } finally {
    await opened.close();
  }
}

interface ResendFlags extends StoreFlags {
  url?: string;
  state?: (typeof RESENDABLE)[number];
  to?: string;
  wait?: boolean;
}

async function runResend(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ResendFlags>();
  const texts = command.processedArgs[0] as string[];
  selection('resend', texts, flags.url);
  if (flags.state !== undefined && flags.url === undefined) throw new UsageError('--state chooses among the deliveries to --url; give --url too');
  const url = flags.url === undefined ? undefined : await checkedUrl('--url', flags.url);
  const to = flags.to === undefined ? undefined : await checkedUrl('--to', flags.to);
  const opened = await openOutbox(cc, flags, 'write');
  if (!opened) throw new MiniappError('there is no outbox yet: nothing to resend');
  try {
    const { outbox } = opened;
    const ids =
      url === undefined
        ? idsOf(texts)
        : (await Promise.all((flags.state ? [flags.state] : (['failed', 'held'] as const)).map((state) => outbox.list({ state, url }))))
            .flat()
            .map((d) => d.id)
            .sort((a, b) => a - b);
    if (url !== undefined && ids.length === 0) {
      if (!cc.out.json) cc.out.info(`nothing to resend: no ${flags.state ?? 'failed or held'} delivery to ${url}`);
      report(cc, 'queued', { done: [], refused: [] }, 0, () => '');
      return;
    }
    // Loaded before the resend, so that the first look at the outbox sees what the resend left, before serve can act.
    const { waitForDeliveries } = flags.wait ? await import('../views/webhook-wait.js') : { waitForDeliveries: undefined };
    const outcome = await outbox.resend(ids, { to });
    if (!waitForDeliveries || outcome.done.length === 0) {
      report(cc, 'queued', outcome, ids.length, (d) => `queued delivery ${d.originalId} again as ${d.id} (${d.event} to ${d.url})`);
      return;
    }
    const finished = await waitForDeliveries(
      cc,
      outbox,
      outcome.done.map((d) => d.id),
    );
    report(
      cc,
      'queued',
      { done: finished.deliveries, refused: outcome.refused },
      ids.length,
      (d) =>
        `delivery ${d.id} (X-Webhook-Delivery ${d.key ?? d.originalId}) ${d.state}${d.attempts.length ? ` after ${d.attemptCount} attempt${d.attemptCount === 1 ? '' : 's'}, ${lastResult(d.attempts.at(-1))}` : ''}`,
    );
    const unfinished = finished.deliveries.filter((d) => d.state !== 'delivered');
    if (unfinished.length > 0) {
      throw new MiniappError(
        finished.interrupted
          ? `stopped waiting with ${unfinished.length} of ${finished.deliveries.length} not delivered; serve goes on with them`
          : `${unfinished.length} of ${finished.deliveries.length} resent deliveries were not delivered`,
        { hint: 'see them with `miniapp webhooks list`' },
      );
    }
  } finally {
    await opened.close();
  }
}

/** How far a webhook-timestamp may be from now for a Standard Webhooks receiver (its libraries' tolerance). */
const STANDARD_TOLERANCE_SECONDS = 5 * 60;

interface VerifyFlags {
  secret?: string;
  signature?: string;
  webhookSignature?: string;
  webhookId?: string;
  webhookTimestamp?: string;
}

async function runVerify(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<VerifyFlags>();
  const [file] = command.processedArgs as [string | undefined];
  const secret = flags.secret ?? cc.env.MINIAPP_WEBHOOK_SECRET;
  if (!secret) {
    throw new UsageError('no webhook secret: pass --secret or set MINIAPP_WEBHOOK_SECRET', {
      hint: 'use the secret `miniapp serve` signs with (--webhook-secret or MINIAPP_WEBHOOK_SECRET)',
    });
  }
  const standard = flags.webhookSignature !== undefined || flags.webhookId !== undefined || flags.webhookTimestamp !== undefined;
  if (flags.signature === undefined && !standard) {
    throw new UsageError(
      'no signature: pass --signature with the X-Webhook-Signature header value, or --webhook-signature with --webhook-id and --webhook-timestamp',
    );
  }
  const { parseSignature, parseStandardSignatures, standardKey, verifySignature, verifyStandard } = await import('../../webhooks/signature.js');
  if (flags.signature !== undefined && !parseSignature(flags.signature)) {
    throw new UsageError('--signature must look like sha256=<64 hex digits>, the X-Webhook-Signature header value');
  }
  if (standard) {
    const missing = (['--webhook-signature', '--webhook-id', '--webhook-timestamp'] as const).filter(
      (flag) =>
        ({ '--webhook-signature': flags.webhookSignature, '--webhook-id': flags.webhookId, '--webhook-timestamp': flags.webhookTimestamp })[flag] === undefined,
    );
    if (missing.length > 0)
      throw new UsageError(`a webhook-signature is checked with its id and timestamp: pass ${missing.join(' and ')} too (the headers as received)`);
    if (parseStandardSignatures(flags.webhookSignature!).length === 0) {
      throw new UsageError('--webhook-signature must hold v1,<base64 of 32 bytes> (several space-separated), the webhook-signature header value');
    }
    if (!/^\d{1,15}$/.test(flags.webhookTimestamp!.trim()))
      throw new UsageError('--webhook-timestamp must be whole seconds since 1970, the webhook-timestamp header value');
    if (flags.webhookId!.trim() === '') throw new UsageError('--webhook-id must not be empty: give the webhook-id header value');
    // A whsec_ secret that is not base64 cannot have signed anything: said as the configuration error it is.
    standardKey(secret);
  }
  const { readInputBytes } = await import('../terminal/input.js');
  const body = await readInputBytes(file, cc.io.stdin, { what: 'webhook body' });
  const checked: string[] = [];
  if (flags.signature !== undefined) {
    if (!verifySignature(body, secret, flags.signature)) {
      throw new MiniappError('signature does not match (X-Webhook-Signature)', {
        hint: 'check the secret, and that the body is the exact bytes received (not re-formatted or re-encoded JSON, no added newline)',
      });
    }
    checked.push('X-Webhook-Signature');
  }
  if (standard) {
    const timestamp = flags.webhookTimestamp!.trim();
    if (!verifyStandard(body, secret, flags.webhookId!, timestamp, flags.webhookSignature!)) {
      throw new MiniappError('webhook-signature does not match', {
        hint:
          'check the secret, that --webhook-id and --webhook-timestamp are the headers of the same request, and that the body ' + 'is the exact bytes received',
      });
    }
    checked.push('webhook-signature');
    const age = Math.round(cc.now().getTime() / 1000) - Number(timestamp);
    if (Math.abs(age) > STANDARD_TOLERANCE_SECONDS) {
      const at = new Date(Number(timestamp) * 1000).toISOString();
      cc.out.warn(
        `the webhook-timestamp (${at}) is ${formatDuration(Math.abs(age) * 1000)} ${age > 0 ? 'old' : 'ahead of this clock'}: a receiver with ` +
          "Standard Webhooks' 5-minute tolerance refuses it now (the signature itself is valid)",
      );
    }
  }
  if (cc.out.json) cc.out.printJson({ valid: true, checked });
  else cc.out.line(checked.length === 1 && checked[0] === 'X-Webhook-Signature' ? 'signature valid' : `valid: ${checked.join(', ')}`);
}
