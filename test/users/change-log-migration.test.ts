/**
 * Changes logged before their user had a column of its own (SQLite 19,
 * PostgreSQL 16) get it from the record they carry when serve migrates, so
 * that a watch of one user resuming from before the upgrade still finds its
 * own changes, and only those.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { DATABASE_FILE, MIGRATIONS } from '../../src/store/database.js';
import { openStore, type StoreLocation } from '../../src/store/store.js';
import { UserChangeLog } from '../../src/users/change-log.js';
import { migrateUpTo } from '../helpers/pg-admin.js';
import { BACKENDS, useFileDatabase } from '../helpers/postgres.js';

describe.each(BACKENDS)('user changes logged before user_id, on %s', (backend) => {
  const files = useFileDatabase();
  let dataDir = '';
  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'miniapp-user-events-'));
  });
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

  it("name their user once migrated, and a watch of one user's changes finds them", async () => {
    const at = '2026-01-01T00:00:00.000Z';
    const change = (seq: number, id: number, name: string) =>
      `INSERT INTO user_events (seq, type, payload, at) VALUES (${seq}, 'UPDATED', '${JSON.stringify({ id, username: name, email: `${name}@example.com`, fullName: name, isActive: true, roles: [], createdAt: at })}', '${at}')`;
    const setup = [change(1, 7, 'ann'), change(2, 8, 'bob'), change(3, 7, 'ann'), "UPDATE counters SET value = 3 WHERE name = 'user_events'"];
    let location: StoreLocation;
    if (backend === 'postgres') {
      await migrateUpTo(files.admin, 15);
      for (const statement of setup) await files.admin.unsafe(statement);
      location = { kind: 'postgres', url: files.url, poolSize: 2 };
    } else {
      const db = new Database(join(dataDir, DATABASE_FILE));
      for (const m of MIGRATIONS.filter((m) => m.version <= 18)) {
        db.exec(m.sql);
        db.pragma(`user_version = ${m.version}`);
      }
      for (const statement of setup) db.exec(statement);
      db.close();
      location = { kind: 'sqlite', dataDir };
    }
    const store = await openStore(location);
    try {
      const log = new UserChangeLog(store.sql, store.signals);
      const page = await log.afterFor(7, 0, 10);
      expect(page.changes.map((c) => [c.seq, c.user.username])).toEqual([
        [1, 'ann'],
        [3, 'ann'],
      ]);
      expect(page).toMatchObject({ head: 3, oldest: 1 });
      expect((await log.afterFor(8, 1, 10)).changes.map((c) => c.seq)).toEqual([2]);
    } finally {
      await store.close();
    }
  });
});
