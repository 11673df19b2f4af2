/**
 * The database of `miniapp serve`, for the commands that read or change what
 * serve keeps (callbacks, webhooks, db): the PostgreSQL of --database, else
 * MINIAPP_DATABASE_URL or the profile's database-url, else the SQLite file
 * of the data dir (--data-dir, MINIAPP_DATA_DIR, ~/.local/share/miniapp).
 */
import type { CommandContext } from '../context.js';
import type { Store } from '../../store/store.js';

export interface StoreFlags {
  dataDir?: string | undefined;
  database?: string | undefined;
  /** Create (and migrate) a SQLite store that does not exist yet. */
  create?: boolean | undefined;
  /** In `read` mode, open a PostgreSQL that nothing has migrated yet too (`db status`), instead of answering `store: undefined`. */
  anySchema?: boolean | undefined;
}

export type OpenedStore = { store: Store; where: string } | { store: undefined; where: string };

/**
 * Opens serve's store; for SQLite, only when serve has created it (a missing
 * file is `store: undefined`, with its path in `where`). `read` opens SQLite
 * read-only.
 */
export async function openServeStore(cc: CommandContext, flags: StoreFlags, mode: 'read' | 'write'): Promise<OpenedStore> {
  const [{ openStore }, { settingSpec }] = await Promise.all([import('../../store/store.js'), import('../../config/keys.js')]);
  const url = flags.database !== undefined ? settingSpec('database-url').validate(flags.database) : (await cc.settings.get('database-url')).value;
  if (url) {
    // Reading never migrates: a database without miniapp's schema is like a data dir serve has not created.
    const store = await openStore({ kind: 'postgres', url, poolSize: 2, readonly: mode === 'read' });
    if (mode === 'read' && !flags.anySchema) {
      const { hasPostgresSchema } = await import('../../store/store.js');
      if (!(await hasPostgresSchema(store.sql))) {
        await store.close();
        return { store: undefined, where: store.description };
      }
    }
    return { store, where: store.description };
  }
  const [{ dataDir }, { databasePath }, { existsSync }] = await Promise.all([
    import('../../config/paths.js'),
    import('../../store/database.js'),
    import('node:fs'),
  ]);
  const directory = flags.dataDir ?? dataDir(cc.env, cc.homedir);
  const file = databasePath(directory);
  if (!existsSync(file) && !flags.create) return { store: undefined, where: file };
  return { store: await openStore({ kind: 'sqlite', dataDir: directory, readonly: mode === 'read' }), where: file };
}
