/**
 * serve's database for a webhook test, on either backend: a SQLite data dir
 * on disk (so that several handles, the CLI among them, share it) or a fresh
 * PostgreSQL database on the run's server. `open()` gives one more handle,
 * as a new process would have.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, type Store, type StoreLocation } from '../../src/store/store.js';
import { createTestDatabase, type Backend } from '../helpers/postgres.js';

export interface WebhookTestDatabase {
  location: StoreLocation;
  /** What the `webhooks` commands take to reach it. */
  cliFlags: string[];
  /** Or the environment variable that does the same. */
  cliEnv: Record<string, string>;
  open(): Promise<Store>;
  /**
   * The store of another instance running beside `first`: its own pool on
   * PostgreSQL. On SQLite the instances are one process, so `first` itself:
   * two better-sqlite3 connections in one thread wait on each other's
   * transactions for the busy time-out, which no process of serve does.
   */
  instance(first: Store): Promise<Store>;
  /** Closes the handles `open` gave that are still open, and removes the database. */
  dispose(): Promise<void>;
}

export async function webhookDatabase(backend: Backend): Promise<WebhookTestDatabase> {
  const handles = new Set<Store>();
  const open = async () => {
    const store = await openStore(location);
    // Closing twice (the test, then dispose) closes once.
    const handle: Store = {
      ...store,
      close: async () => {
        if (handles.delete(handle)) await store.close();
      },
    };
    handles.add(handle);
    return handle;
  };
  const closeAll = async () => {
    for (const handle of [...handles]) await handle.close();
  };
  let location: StoreLocation;
  if (backend === 'sqlite') {
    const dataDir = mkdtempSync(join(tmpdir(), 'miniapp-webhooks-'));
    location = { kind: 'sqlite', dataDir };
    return {
      location,
      cliFlags: ['--data-dir', dataDir],
      cliEnv: { MINIAPP_DATA_DIR: dataDir },
      open,
      instance: async (first) => first,
      dispose: async () => {
        await closeAll();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  }
  const database = await createTestDatabase({ migrated: true });
  location = { kind: 'postgres', url: database.url, poolSize: 5 };
  return {
    location,
    cliFlags: ['--database', database.url],
    cliEnv: { MINIAPP_DATABASE_URL: database.url },
    open,
    instance: () => open(),
    dispose: async () => {
      await closeAll();
      await database.drop();
    },
  };
}
