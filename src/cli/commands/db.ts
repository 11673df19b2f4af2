/**
 * `miniapp db status | migrate | copy`: the database of `miniapp serve`,
 * for deploys that migrate before they roll out, and for moving the
 * embedded SQLite data to PostgreSQL.
 */
import type { Command } from 'commander';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import { MiniappError, UsageError } from '../../errors.js';

const WHERE_HELP = `
The database is --database URL, else MINIAPP_DATABASE_URL, else the
profile's database-url; without one, the SQLite file of the data dir
(--data-dir, else MINIAPP_DATA_DIR, else ~/.local/share/miniapp).`;

export function registerDb(program: Command, bind: Bind): void {
  const db = program
    .command('db')
    .description(
      'The database of `miniapp serve` (SQLite in the data dir, or the PostgreSQL of --database): its status and migrations, and copying the embedded SQLite data into a PostgreSQL.',
    )
    .addHelpText('after', WHERE_HELP);

  const where = (command: Command) =>
    command
      .option('--database <url>', 'a PostgreSQL URL (default: MINIAPP_DATABASE_URL, else database-url)')
      .option('--data-dir <dir>', 'the data dir of a SQLite store (default: MINIAPP_DATA_DIR, else ~/.local/share/miniapp)');

  where(db.command('status').description('which migrations this miniapp knows and which the database has'))
    .addHelpText('after', '\nExamples:\n  miniapp db status --database "$DATABASE_URL"\n  miniapp db status --json')
    .action(bind(runStatus));

  where(
    db
      .command('migrate')
      .description('apply the migrations the database lacks and exit (serve also does at start, under a lock; run this before rolling out a new version)'),
  )
    .addHelpText('after', '\nExamples:\n  miniapp db migrate --database "$DATABASE_URL"')
    .action(bind(runMigrate));

  db.command('copy')
    .description(
      'copy everything serve keeps in SQLite (users with their password hashes, tokens, the admin token, posts, images, ' +
        "unlink callbacks, webhook deliveries, the commerce services' data) into a PostgreSQL, keeping every id, in one " +
        'transaction: all of it or nothing. Shows progress, prints the counts per table, and reads every row back to ' +
        "check it column by column before committing. Into a database that holds anything else (another deployment's " +
        'rows, another admin token, or rows changed since an earlier copy) it refuses, writes nothing, says what it found ' +
        'and exits 1, unless --merge; running it again on the database it filled, unchanged since, completes what is missing.',
    )
    .requiredOption('--from <source>', 'a data dir, or sqlite:FILE')
    .requiredOption('--to <url>', 'the PostgreSQL URL (migrated first if it needs it)')
    .option(
      '--merge',
      "add this data beside another deployment's: rows whose id is taken get new ids and their references follow; refuses " +
        'rows whose username, e-mail, SKU or key the target gives to another row; the target keeps its admin token',
    )
    .option(
      '--while-running',
      'copy from the data dir of a serve that is running (its serve.json names a live process): what it holds now, as one ' +
        'consistent snapshot; without it the copy is refused, since what serve writes after would not be copied',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp db copy --from ~/.local/share/miniapp --to "postgres://miniapp:$PW@db.example.com/miniapp?sslmode=verify-full&sslrootcert=ca.pem"\n' +
        '  miniapp db copy --from ./old-data --to "$MINIAPP_DATABASE_URL" --merge',
    )
    .action(bind(runCopy));
}

async function runStatus(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<{ database?: string; dataDir?: string }>();
  const [{ openServeStore }, { migrationStatus }] = await Promise.all([import('../connect/serve-store.js'), import('../../store/store.js')]);
  const opened = await openServeStore(cc, { ...flags, anySchema: true }, 'read');
  if (!opened.store) throw new MiniappError(`no database at ${opened.where} yet: \`miniapp serve\` creates it on its first start`);
  try {
    const status = await migrationStatus(opened.store);
    const pending = status.filter((m) => !m.applied).length;
    cc.out.table(
      status,
      [
        { header: 'version', value: (m) => m.version },
        { header: 'applied', value: (m) => (m.applied ? 'yes' : 'no') },
        { header: 'description', value: (m) => m.description, shrink: 2 },
      ],
      { database: opened.where, migrations: status, pending },
    );
    if (!cc.out.json)
      cc.out.info(
        pending === 0 ? `${opened.where}: up to date` : `${opened.where}: ${pending} migration${pending === 1 ? '' : 's'} to apply (\`miniapp db migrate\`)`,
      );
  } finally {
    await opened.store.close();
  }
}

async function runMigrate(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<{ database?: string; dataDir?: string }>();
  const [{ openServeStore }, { migrationStatus }] = await Promise.all([import('../connect/serve-store.js'), import('../../store/store.js')]);
  // What the database had before, read without migrating (none: a SQLite file serve has not made yet).
  const before = await openServeStore(cc, { ...flags, anySchema: true }, 'read');
  let had: ReadonlySet<number> = new Set();
  if (before.store) {
    try {
      had = new Set((await migrationStatus(before.store)).filter((m) => m.applied).map((m) => m.version));
    } finally {
      await before.store.close();
    }
  }
  // Opening a store migrates it (under an advisory lock on PostgreSQL); SQLite creates its file if needed.
  const opened = await openServeStore(cc, { ...flags, create: true }, 'write');
  if (!opened.store) throw new UsageError(`cannot open ${opened.where}`);
  try {
    const status = await migrationStatus(opened.store);
    const schema = Math.max(0, ...status.filter((m) => m.applied).map((m) => m.version));
    // Applied between the two looks: by this command (or, at the same moment, by a serve starting on the same database).
    const applied = status.filter((m) => m.applied && !had.has(m.version)).map((m) => m.version);
    if (cc.out.json) {
      cc.out.printJson({ database: opened.where, schema, applied, migrations: status });
    } else if (applied.length === 0) {
      cc.out.success(`${opened.where} is at schema ${schema}, up to date: nothing to apply`);
    } else {
      const which = applied.length === 1 ? `migration ${applied[0]}` : `${applied.length} migrations (${versionList(applied)})`;
      cc.out.success(`${opened.where}: applied ${which}; now at schema ${schema}`);
    }
  } finally {
    await opened.store.close();
  }
}

/** 1-12, or 3, 5, 7-9: the versions in runs. */
function versionList(versions: readonly number[]): string {
  const runs: string[] = [];
  for (let i = 0; i < versions.length; ) {
    let j = i;
    while (j + 1 < versions.length && versions[j + 1] === versions[j]! + 1) j++;
    runs.push(j === i ? String(versions[i]) : `${versions[i]}-${versions[j]}`);
    i = j + 1;
  }
  return runs.join(', ');
}

async function runCopy(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<{ from: string; to: string; merge?: boolean; whileRunning?: boolean }>();
  const { copyToPostgres } = await import('../views/db-copy.js');
  await copyToPostgres(cc, flags);
}
