import type { Command } from 'commander';
import type { Bind } from '../main.js';
import type { CommandContext } from '../context.js';
import { MiniappError, UsageError } from '../../errors.js';

const STATES = ['pending', 'delivered', 'failed'] as const;

export function registerWebhooks(program: Command, bind: Bind): void {
  const webhooks = program
    .command('webhooks')
    .description('the post.created webhook deliveries of `miniapp serve`, and signature checks for receivers');
  webhooks
    .command('list')
    .description(
      'list webhook deliveries, oldest first: state (pending, delivered, failed), attempts, when the next one is due, ' +
        'and the last status or error. --json prints each delivery in full, with its body and every attempt.',
    )
    .option('--state <state>', `only deliveries in this state: ${STATES.join(', ')}`)
    .option('--data-dir <dir>', 'the data dir of `miniapp serve` (default: MINIAPP_DATA_DIR, else ~/.local/share/miniapp)')
    .addHelpText('after', '\nExamples:\n  miniapp webhooks list\n  miniapp webhooks list --state failed --json')
    .action(bind(runList));
  webhooks
    .command('verify')
    .description(
      'Check an X-Webhook-Signature against the body a receiver got, byte for byte (FILE, or stdin). ' +
        'Exits 0 when it matches, 1 when it does not. The secret comes from --secret, else MINIAPP_WEBHOOK_SECRET ' +
        '(prefer the environment: flags end up in shell history).',
    )
    .argument('[file]', 'file holding the raw request body; "-" or nothing reads stdin')
    .option('--secret <secret>', 'the shared secret (env MINIAPP_WEBHOOK_SECRET)')
    .option('--signature <sig>', 'the X-Webhook-Signature header value: sha256=<64 hex>')
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp webhooks verify --signature "sha256=5d41..." body.json\n' +
        '  MINIAPP_WEBHOOK_SECRET=s3cret miniapp webhooks verify --signature "$SIG" - < body.json',
    )
    .action(bind(runVerify));
}

async function runList(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<{ state?: string; dataDir?: string }>();
  if (flags.state !== undefined && !(STATES as readonly string[]).includes(flags.state)) {
    throw new UsageError(`--state must be one of ${STATES.join(', ')}; got "${flags.state}"`);
  }
  const [{ openDatabase, databasePath }, { WebhookOutbox }, { dataDir }, { existsSync }] = await Promise.all([
    import('../../store/database.js'),
    import('../../blog/webhooks.js'),
    import('../../config/paths.js'),
    import('node:fs'),
  ]);
  const directory = flags.dataDir ?? dataDir(cc.env, cc.homedir);
  if (!existsSync(databasePath(directory))) {
    cc.out.info(`no database at ${databasePath(directory)} yet: \`miniapp serve\` has sent no webhook with this data dir`);
    cc.out.table([], []);
    return;
  }
  const db = openDatabase({ dataDir: directory }, { readonly: true });
  try {
    const deliveries = new WebhookOutbox(db).list({ state: flags.state as (typeof STATES)[number] | undefined });
    cc.out.table(deliveries, [
      { header: 'id', value: (d) => d.id },
      { header: 'event', value: (d) => d.event },
      // On a narrow terminal the URL gives way first, then the last error; IDs, states and times stay whole longest.
      { header: 'url', value: (d) => d.url, shrink: 2 },
      { header: 'state', value: (d) => d.state },
      { header: 'attempts', value: (d) => d.attemptCount },
      { header: 'next attempt', value: (d) => d.nextAttemptAt ?? '' },
      { header: 'last result', value: (d) => lastResult(d.attempts.at(-1)), shrink: 1 },
      { header: 'created', value: (d) => d.createdAt },
    ]);
  } finally {
    db.close();
  }
}

function lastResult(attempt: { statusCode: number | null; error: string | null } | undefined): string {
  if (!attempt) return '';
  if (attempt.statusCode !== null) return `HTTP ${attempt.statusCode}`;
  return attempt.error ?? 'no answer';
}

async function runVerify(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<{ secret?: string; signature?: string }>();
  const [file] = command.processedArgs as [string | undefined];
  const secret = flags.secret ?? cc.env.MINIAPP_WEBHOOK_SECRET;
  if (!secret) {
    throw new UsageError('no webhook secret: pass --secret or set MINIAPP_WEBHOOK_SECRET', {
      hint: 'use the secret `miniapp serve` signs with (--webhook-secret or MINIAPP_WEBHOOK_SECRET)',
    });
  }
  if (flags.signature === undefined) {
    throw new UsageError('no signature: pass --signature with the X-Webhook-Signature header value');
  }
  const { parseSignature, verifySignature } = await import('../../blog/webhooks.js');
  if (!parseSignature(flags.signature)) {
    throw new UsageError('--signature must look like sha256=<64 hex digits>, the X-Webhook-Signature header value');
  }
  const { readInputBytes } = await import('../input.js');
  const body = await readInputBytes(file, cc.io.stdin, { what: 'webhook body' });
  if (!verifySignature(body, secret, flags.signature)) {
    throw new MiniappError('signature does not match', {
      hint:
        'check the secret, and that the body is the exact bytes received (not re-formatted or re-encoded JSON, ' +
        'no added newline)',
    });
  }
  if (cc.out.json) cc.out.printJson({ valid: true });
  else cc.out.line('signature valid');
}
