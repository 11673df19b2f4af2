/**
 * `miniapp db copy`: everything `serve` kept in its embedded SQLite (and
 * beside it in the data dir: uploaded images, the admin token) into a
 * PostgreSQL, for users who outgrow one machine. The copy itself, what it
 * refuses and how it verifies, is store/copy.ts; this reads the data dir,
 * shows progress and renders the report.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { CommandContext } from '../context.js';
import { ConfigError, MiniappError } from '../../errors.js';
import type { SourceImage } from '../../store/copy.js';
import type { SqliteSql } from '../../store/sql.js';

function sourceOf(from: string): { file: string; dataDir: string } {
  if (from.startsWith('sqlite:')) {
    const file = from.slice('sqlite:'.length);
    return { file, dataDir: dirname(file) };
  }
  return { file: join(from, 'miniapp.db'), dataDir: from };
}

/** A copy refused to keep two deployments' data apart (exit 1, `--json` code COPY_REFUSED). */
class CopyRefusedError extends MiniappError {
  override readonly code = 'COPY_REFUSED';
}

/** A copy refused because serve runs on the data dir (exit 1, `--json` code SERVE_RUNNING). */
class ServeRunningError extends MiniappError {
  override readonly code = 'SERVE_RUNNING';
}

export async function copyToPostgres(cc: CommandContext, flags: { from: string; to: string; merge?: boolean; whileRunning?: boolean }): Promise<void> {
  const [{ openStore, redactUrl }, { settingSpec }, { copyStore, CopyRefused, CopyNotVerified, COPIED_TABLES }] = await Promise.all([
    import('../../store/store.js'),
    import('../../config/keys.js'),
    import('../../store/copy.js'),
  ]);
  const url = settingSpec('database-url').validate(flags.to);
  const { file, dataDir } = sourceOf(flags.from);
  if (!existsSync(file) || !statSync(file).isFile()) {
    throw new ConfigError(`no SQLite database at ${file}`, { hint: '--from takes the data dir of `miniapp serve` (holding miniapp.db) or sqlite:FILE' });
  }
  if (basename(file) !== 'miniapp.db') throw new ConfigError(`--from sqlite:FILE must name a miniapp.db written by \`miniapp serve\`; got ${file}`);
  // A serve still running on the data dir (its serve.json names a live pid) goes on writing: what it writes after the
  // copy's snapshot would be missing from PostgreSQL, which a move to PostgreSQL would lose.
  const running = (await import('../connect/serve-runtime.js')).readServeRuntime(dataDir);
  if (running && !flags.whileRunning) {
    throw new ServeRunningError(
      `miniapp serve (pid ${running.pid}, ${running.url}) is running on ${dataDir}: what it writes after the copy would not be in ${redactUrl(url)}; nothing was copied`,
      {
        hint: 'stop it first (Ctrl-C, or SIGTERM to drain), then copy; or pass --while-running to copy what it holds now (one snapshot: what it writes after is not copied)',
      },
    );
  }
  if (running) cc.out.warn(`miniapp serve (pid ${running.pid}) is running on ${dataDir}: copying what it holds now; what it writes after is not copied`);
  const source = await openStore({ kind: 'sqlite', dataDir: dirname(file), readonly: true });
  const images = await readImages(dataDir);
  const adminToken = readAdminToken(dataDir);
  const target = await openStore({ kind: 'postgres', url, poolSize: 2 }).catch(async (error: unknown) => {
    await source.close();
    throw error;
  });
  // Every read of the source in one read transaction: one snapshot of it, whatever a running serve writes meanwhile.
  const snapshot = (source.sql as SqliteSql).db;
  snapshot.exec('BEGIN');
  try {
    const counts = await Promise.all(COPIED_TABLES.map(async (t) => Number((await source.sql.one<{ n: number }>(`SELECT count(*) AS n FROM ${t.table}`))!.n)));
    const total = counts.reduce((sum, n) => sum + n, 0) + images.length;
    const progress = cc.out.progress({ unit: 'rows', total, label: `${flags.merge ? 'merging into' : 'copying to'} ${target.description}` });
    let done = 0;
    let report;
    try {
      report = await copyStore({
        source: source.sql,
        target: target.sql,
        images,
        adminToken,
        merge: Boolean(flags.merge),
        now: cc.now(),
        onRows: (n) => {
          done += n;
          progress.update({ done });
        },
      });
    } catch (error) {
      progress.finish();
      if (error instanceof CopyRefused) {
        const lines = error.findings.map((f) => {
          const rows = (n: number) => `${n} row${n === 1 ? '' : 's'}`;
          const counts = [f.foreign ? `${rows(f.foreign)} not in ${file}` : '', f.conflicts ? `${rows(f.conflicts)} in conflict` : '']
            .filter(Boolean)
            .join(', ');
          return `${f.table}: ${counts}${f.examples.length ? ` (${f.examples.join('; ')})` : ''}`;
        });
        throw new CopyRefusedError(`${error.message}, so nothing was written to ${target.description}:\n  ${lines.join('\n  ')}`, {
          hint: flags.merge
            ? 'these rows hold a username, e-mail, SKU or key that the target gives to another row; rename or remove them on one side first'
            : 'copy into an empty database (or the one an earlier copy of this data dir filled, unchanged since), or pass --merge to add this data beside what is there',
        });
      }
      if (error instanceof CopyNotVerified)
        throw new MiniappError(`${error.message}`, { hint: 'nothing was written; this is a bug in miniapp if the source is unchanged: report it' });
      throw error;
    }
    progress.finish();
    const mergeColumns = report.merge
      ? [
          { header: 'renumbered', value: (r: (typeof report.tables)[number]) => r.renumbered },
          { header: 'left out', value: (r: (typeof report.tables)[number]) => r.skipped },
        ]
      : [];
    cc.out.table(
      report.tables,
      [
        { header: 'table', value: (r) => r.table },
        { header: 'in SQLite', value: (r) => r.source },
        { header: 'copied', value: (r) => r.copied },
        { header: 'already there', value: (r) => r.alreadyThere },
        ...mergeColumns,
        { header: 'verified', value: (r) => (r.verified ? 'yes' : 'NO') },
      ],
      { from: file, to: target.description, merge: report.merge, tables: report.tables, adminToken: report.adminToken },
    );
    if (!cc.out.json) {
      const copied = report.tables.reduce((sum, r) => sum + r.copied, 0);
      const renumbered = report.tables.reduce((sum, r) => sum + r.renumbered, 0);
      const leftOut = report.tables.reduce((sum, r) => sum + r.skipped, 0);
      if (report.merge) {
        cc.out.success(
          `merged ${copied} rows into ${target.description} (${renumbered} under new ids, their references moved with them); every row of ${file} ` +
            `is there and checked${leftOut ? `; the ${leftOut} admin token${leftOut === 1 ? '' : 's'} of the data dir did not come along: the target's admin token stays the admin` : ''}`,
        );
      } else {
        cc.out.success(
          `${copied === 0 ? 'nothing new to copy' : `copied ${copied} rows`}; every row of ${file} is in ${target.description}, checked column by column` +
            `${report.adminToken === 'copied' ? ', with the admin token' : ''}`,
        );
      }
    }
  } finally {
    if (snapshot.inTransaction) snapshot.exec('COMMIT');
    await source.close();
    await target.close();
  }
}

async function readImages(dataDir: string): Promise<SourceImage[]> {
  const directory = join(dataDir, 'uploads');
  if (!existsSync(directory)) return [];
  const { recogniseImage } = await import('../../blog/uploads.js');
  const images: SourceImage[] = [];
  for (const name of readdirSync(directory).filter((entry) => /^[0-9a-f]{64}\.(png|jpg|webp)$/.test(entry))) {
    const bytes = readFileSync(join(directory, name));
    const kind = recogniseImage(bytes);
    if (kind) images.push({ name, mime: kind.mime, width: kind.width, height: kind.height, bytes });
  }
  return images;
}

function readAdminToken(dataDir: string): string | undefined {
  const file = join(dataDir, 'admin-token');
  if (!existsSync(file)) return undefined;
  return readFileSync(file, 'utf8').trim() || undefined;
}
