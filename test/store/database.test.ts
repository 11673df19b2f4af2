/**
 * The SQLite file of `serve` holds password hashes and e-mail addresses:
 * private to its owner, whatever the data dir and the umask.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { databasePath, openDatabase } from '../../src/store/database.js';

let dir: string;
let previousUmask: number;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'miniapp-db-'));
  chmodSync(dir, 0o755);
  previousUmask = process.umask(0o022);
});
afterEach(() => {
  process.umask(previousUmask);
  rmSync(dir, { recursive: true, force: true });
});

const modeOf = (path: string) => statSync(path).mode & 0o777;

describe('the database file', () => {
  it('is created 0600 with its -wal and -shm in a data dir that already existed', () => {
    const db = openDatabase({ dataDir: dir });
    db.prepare("INSERT INTO users (username, email, password_hash, created_at, updated_at) VALUES ('a', 'a@example.com', 'h', 'now', 'now')").run();
    const file = databasePath(dir);
    expect(existsSync(`${file}-wal`)).toBe(true);
    for (const path of [file, `${file}-wal`, `${file}-shm`]) expect(modeOf(path), path).toBe(0o600);
    db.close();
  });

  it('is tightened to 0600 when an older run left it readable by others', () => {
    const file = databasePath(dir);
    openDatabase({ dataDir: dir }).close();
    chmodSync(file, 0o644);
    writeFileSync(`${file}-wal`, '');
    chmodSync(`${file}-wal`, 0o644);
    const db = openDatabase({ dataDir: dir });
    expect(modeOf(file)).toBe(0o600);
    expect(modeOf(`${file}-wal`)).toBe(0o600);
    db.close();
  });
});
