/**
 * What a SKU has reserved lives in its stock_holds row, apart from its
 * products row (migration SQLite 14 / PostgreSQL 10, shared-migrations.ts
 * stockHolds): the rule 0 <= reserved <= on_hand, which spans the two rows,
 * still holds in the database whatever the statement, on both backends; on
 * PostgreSQL also between two transactions that each pass their own check;
 * and a database made before the split keeps its numbers.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Commerce } from '../../src/commerce/commerce.js';
import { databasePath, MIGRATIONS } from '../../src/store/database.js';
import { openStore, type Store, type StoreLocation } from '../../src/store/store.js';
import { BACKENDS, createTestDatabase } from '../helpers/postgres.js';
import { useBackendStore } from '../helpers/backend-store.js';
import { adminSql, migrateUpTo } from '../helpers/pg-admin.js';

const ADMIN = { isAdmin: true, userId: null };
const commerceOn = (store: Store) =>
  new Commerce({ sql: store.sql, now: () => new Date(), authenticate: () => Promise.reject(new Error('no calls')), sweepMs: 0 });

describe.each(BACKENDS)('the stock rule across stock_holds and products on %s', (backend) => {
  const location = useBackendStore(backend);
  let store: Store;
  let commerce: Commerce;

  beforeEach(async () => {
    store = await openStore(location.location());
    commerce = commerceOn(store);
    await commerce.inventory.set({ sku: 'MUG', quantity: 3, price: 12000, reason: 'initial count', actor: 'admin' });
    await commerce.orders.create(ADMIN, { items: [{ sku: 'MUG', quantity: 2 }], key: 'o1' });
  });
  afterEach(async () => {
    await store.close();
  });

  it('refuses in the database any statement that leaves reserved below 0 or above on_hand, and keeps the rows as they were', async () => {
    const before = await commerce.inventory.levels(['MUG']);
    expect(before).toMatchObject([{ onHand: 3, reserved: 2, available: 1 }]);
    const rule = /stock rule broken: reserved must stay between 0 and on_hand/;
    // on_hand below what is reserved; more reserved than on hand; more let go of than was ever reserved.
    await expect(store.sql.run("UPDATE products SET on_hand = 1 WHERE sku = 'MUG'")).rejects.toThrow(rule);
    await expect(store.sql.run("UPDATE stock_holds SET reserved_total = reserved_total + 2 WHERE sku = 'MUG'")).rejects.toThrow(rule);
    await expect(store.sql.run("UPDATE products SET released_total = released_total + 3 WHERE sku = 'MUG'")).rejects.toThrow(rule);
    expect(await commerce.inventory.levels(['MUG'])).toEqual(before);
    // Within the rule, the same statements go through: a sale of one takes it from on_hand and from reserved alike.
    await store.sql.run("UPDATE products SET on_hand = on_hand - 1, released_total = released_total + 1 WHERE sku = 'MUG'");
    expect(await commerce.inventory.levels(['MUG'])).toMatchObject([{ onHand: 2, reserved: 1, available: 1 }]);
    // And the service's own refusal comes first, in words.
    await expect(commerce.inventory.adjust('MUG', -2, 'broken', 'admin')).rejects.toThrow(
      'SKU MUG has 2 on hand, 1 reserved: removing 2 would leave less than is reserved (at most 1 can be removed)',
    );
  });
});

describe('the stock rule between two PostgreSQL transactions', () => {
  const location = useBackendStore('postgres');

  it('a change that leaves less available waits for a reservation in flight and is refused once that one commits, though each passed alone', async () => {
    const store = await openStore(location.location());
    const admin = adminSql(location.url);
    try {
      await commerceOn(store).inventory.set({ sku: 'MUG', quantity: 3, price: 12000, reason: 'initial count', actor: 'admin' });
      let taken!: () => void;
      const reserving = new Promise<void>((resolve) => (taken = resolve));
      let finish!: () => void;
      const finished = new Promise<void>((resolve) => (finish = resolve));
      // One transaction reserves two of the three units and stays open.
      const reservation = store.sql.transaction(async (tx) => {
        await tx.run("UPDATE stock_holds SET reserved_total = reserved_total + 2 WHERE sku = 'MUG'");
        taken();
        await finished;
      });
      await reserving;
      // Another takes two units away without the service's locks: alone, with nothing reserved, it would be within the rule.
      const removing = admin.unsafe("UPDATE products SET on_hand = 1 WHERE sku = 'MUG'").then(
        () => 'updated',
        (error: Error) => error.message,
      );
      let waited = false;
      for (let i = 0; i < 500 && !waited; i++) {
        waited =
          (await store.sql.all("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE products SET on_hand = 1%'")).length > 0;
        if (!waited) await new Promise((resolve) => setTimeout(resolve, 10));
      }
      expect(waited).toBe(true);
      finish();
      await reservation;
      expect(await removing).toMatch(/stock rule broken: reserved must stay between 0 and on_hand \(SKU MUG\)/);
      expect(await commerceOn(store).inventory.levels(['MUG'])).toMatchObject([{ onHand: 3, reserved: 2, available: 1 }]);
    } finally {
      await admin.end();
      await store.close();
    }
  });
});

/** Opens (so migrates) a database made before stock_holds, with MUG 5 on hand and 2 reserved: the numbers are kept, and the rule holds. */
async function keepsItsNumbers(location: StoreLocation): Promise<void> {
  const store = await openStore(location);
  try {
    expect(await commerceOn(store).inventory.levels(['MUG'])).toEqual([
      { sku: 'MUG', name: 'Mug', price: 12000, currency: 'KRW', onHand: 5, reserved: 2, available: 3, updatedAt: '2026-11-02T00:00:00.000Z' },
    ]);
    await expect(store.sql.run("UPDATE products SET on_hand = 1 WHERE sku = 'MUG'")).rejects.toThrow(/stock rule broken/);
  } finally {
    await store.close();
  }
}

describe('a database made before stock_holds', () => {
  it('on SQLite keeps what each SKU had reserved, and the rule', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'miniapp-holds-'));
    try {
      const db = new Database(databasePath(dataDir));
      for (const migration of MIGRATIONS.filter((m) => m.version <= 13)) {
        db.exec(migration.sql);
        db.pragma(`user_version = ${migration.version}`);
      }
      db.exec(`INSERT INTO products (sku, name, price, currency, on_hand, reserved, created_at, updated_at)
        VALUES ('MUG', 'Mug', 12000, 'KRW', 5, 2, '2026-11-01T00:00:00.000Z', '2026-11-02T00:00:00.000Z')`);
      db.close();
      await keepsItsNumbers({ kind: 'sqlite', dataDir });
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('on PostgreSQL keeps what each SKU had reserved, and the rule', async () => {
    const database = await createTestDatabase();
    const admin = adminSql(database.url);
    try {
      await migrateUpTo(admin, 9);
      await admin.unsafe(`INSERT INTO products (sku, name, price, currency, on_hand, reserved, created_at, updated_at)
        VALUES ('MUG', 'Mug', 12000, 'KRW', 5, 2, '2026-11-01T00:00:00.000Z', '2026-11-02T00:00:00.000Z')`);
      await keepsItsNumbers({ kind: 'postgres', url: database.url, poolSize: 2 });
    } finally {
      await admin.end();
      await database.drop();
    }
  });
});
