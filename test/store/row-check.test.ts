/**
 * Rows found by their keys on PostgreSQL, whatever the statistics say of
 * their states (src/store/sql.ts, rowCheck). Payments, refunds,
 * reservations and webhook deliveries each have an index on their state,
 * for the sweeps that look for the rare ones (in progress, pending, due).
 * Told by the last ANALYZE that few rows are in such a state, the planner
 * found "the payment with this id, IN_PROGRESS" by walking every
 * IN_PROGRESS payment. With 20,000 payments left in progress by a
 * provider's outage and 20,000 carts left open in a sale, a payment took
 * 33 ms instead of 7, and it grew with them (bench/RESULTS.md,
 * 2026-11-28). A backlog of deliveries to a receiver that is down did the
 * same to each claim of the outbox.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Commerce } from '../../src/commerce/commerce.js';
import { openStore, type Store } from '../../src/store/store.js';
import { WebhookOutbox } from '../../src/webhooks/outbox.js';
import type { Param, Sql } from '../../src/store/sql.js';
import { useBackendStore } from '../helpers/backend-store.js';
import { observedSql } from '../helpers/observed-sql.js';

const ADMIN = { isAdmin: true, userId: null };
/** The indexes of states, which only the sweeps may use. */
const STATE_INDEXES = ['payments_status', 'refunds_status', 'reservations_due'];

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Relation Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

interface Scan {
  /** Its index's name, if it reads one. */
  index: string | undefined;
  /** "Index Scan payments_pkey on payments". */
  name: string;
  /** The rows it read, kept or filtered out (a plan run with ANALYZE; 0 otherwise). */
  rows: number;
}

/** Every scan of a plan: of a table, or of an index alone (a Bitmap Index Scan names no table). */
function scansOf(node: PlanNode, found: Scan[] = []): Scan[] {
  if (node['Node Type'].includes('Scan') && (node['Relation Name'] || node['Index Name'])) {
    found.push({
      index: node['Index Name'],
      name: `${node['Node Type']} ${node['Index Name'] ?? ''} on ${node['Relation Name'] ?? 'its table'}`,
      rows: ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0)) * (node['Actual Loops'] ?? 1),
    });
  }
  for (const child of node.Plans ?? []) scansOf(child, found);
  return found;
}

type Sent = { text: string; params: readonly Param[] | undefined }[];

/** `sql`, keeping in `sent` the text and parameters of each statement sent through it (and through its transactions). */
const recording = (sql: Sql, sent: Sent): Sql => observedSql(sql, { statement: (text, params) => void sent.push({ text, params }) });

/** A statement shortened for a message. */
const brief = (text: string) => text.replace(/\s+/g, ' ').slice(0, 80);

describe('a checkout on PostgreSQL with many rows in rare states since the last ANALYZE', () => {
  const location = useBackendStore('postgres');
  let store: Store;

  /**
   * `count` payments, refunds (each of one of the first settled payments, at `position`) and reservations, named
   * `name` and their number, in the states given.
   */
  const seed = async (
    name: string,
    count: number,
    as: { payment: string; refund: string; position: number; reservation: string; expiresAt: string; at: string },
  ) => {
    const sql = store.sql;
    const balance = as.payment === 'DONE' ? 100 : 0;
    await sql.run(
      `INSERT INTO payments (id, order_id, user_id, status, amount, balance, currency, method, provider, created_at, updated_at)
      SELECT 'pay_${name}' || g, NULL, NULL, $1, 100, ${balance}, 'KRW', 'test_approve', 'sandbox', $2, $2 FROM generate_series(1, ${count}) g`,
      [as.payment, as.at],
    );
    await sql.run(
      `INSERT INTO refunds (id, payment_id, position, amount, reason, status, created_at, updated_at)
      SELECT 'ref_${name}' || g, 'pay_old' || g, ${as.position}, 1, $1, $2, $3, $3 FROM generate_series(1, ${count}) g`,
      [name, as.refund, as.at],
    );
    await sql.run(
      `INSERT INTO reservations (id, order_id, state, expires_at, created_at, updated_at)
      SELECT 'res_${name}' || g, NULL, $1, $2, $3, $3 FROM generate_series(1, ${count}) g`,
      [as.reservation, as.expiresAt, as.at],
    );
  };

  beforeEach(async () => {
    store = await openStore(location.location());
    // What the last ANALYZE saw: payments settled, refunds done, reservations ended.
    await seed('old', 20_000, {
      payment: 'DONE',
      refund: 'DONE',
      position: 1,
      reservation: 'committed',
      expiresAt: '2020-01-01T00:00:00.000Z',
      at: '2026-01-01',
    });
    await store.sql.exec('ANALYZE payments; ANALYZE refunds; ANALYZE reservations');
    // Since then: payments left in progress by a provider's outage, refunds pending, carts left open in a sale.
    await seed('stuck', 2_000, {
      payment: 'IN_PROGRESS',
      refund: 'PENDING',
      position: 2,
      reservation: 'active',
      expiresAt: '2099-01-01T00:00:00.000Z',
      at: '2026-01-02',
    });
  });
  afterEach(async () => {
    await store.close();
  });

  /** The indexes of states that the plans of `sent` read, with the statement that reads each. */
  const stateIndexesRead = async (sent: Sent) => {
    const read: string[] = [];
    for (const { text, params } of sent) {
      if (!/^\s*(WITH|SELECT|UPDATE|INSERT|DELETE)/i.test(text)) continue;
      const [row] = await store.sql.all<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (FORMAT JSON) ${text}`, params);
      for (const { index } of scansOf(row!['QUERY PLAN'][0].Plan)) if (index && STATE_INDEXES.includes(index)) read.push(`${index}: ${brief(text)}`);
    }
    return read;
  };

  it.each([
    ['settled in one statement', undefined],
    ['settled in a transaction (webhooks on)', async () => undefined],
  ])('create, pay (%s), refund and cancel find each row by its key', async (_, publish) => {
    const sent: Sent = [];
    const commerce = new Commerce({
      sql: recording(store.sql, sent),
      now: () => new Date(),
      authenticate: () => Promise.reject(new Error('no calls')),
      sweepMs: 0,
      publish,
    });
    await commerce.inventory.set({ sku: 'MUG', quantity: 10, price: 12000, reason: 'initial count', actor: 'admin' });
    // Several rounds, so that the statements prepared on the server are planned for any parameters (generic plans) too.
    for (let round = 0; round < 6; round++) {
      const order = await commerce.orders.create(ADMIN, { items: [{ sku: 'MUG', quantity: 1 }], key: `o${round}` });
      const paid = await commerce.orders.pay(ADMIN, { orderId: order.id, key: `p${round}` });
      expect(paid.payment.status).toBe('DONE');
      const refunded = await commerce.payments.refund(ADMIN, { paymentId: paid.payment.id, amount: 0, reason: 'returned', key: `r${round}` });
      expect(refunded.refund.status).toBe('DONE');
      const open = await commerce.orders.create(ADMIN, { items: [{ sku: 'MUG', quantity: 1 }], key: `c${round}` });
      expect((await commerce.orders.cancel(ADMIN, open.id, 'changed my mind')).status).toBe('CANCELLED');
    }
    expect(sent.some(({ text }) => text.includes('payments') && text.includes('IN_PROGRESS'))).toBe(true);
    expect(await stateIndexesRead(sent)).toEqual([]);
    // The sweeps still find the rare ones by those indexes.
    expect(await stateIndexesRead([{ text: "SELECT id FROM payments WHERE status = 'IN_PROGRESS' ORDER BY created_at", params: undefined }])).toEqual([
      "payments_status: SELECT id FROM payments WHERE status = 'IN_PROGRESS' ORDER BY created_at",
    ]);
  });
});

describe('the webhook outbox on PostgreSQL with a backlog of pending deliveries since the last ANALYZE', () => {
  const location = useBackendStore('postgres');
  let store: Store;

  beforeEach(async () => {
    store = await openStore(location.location());
    await store.sql.run(`INSERT INTO webhook_deliveries (event, url, body, state, attempts, next_attempt_at, created_at, updated_at)
      SELECT 'order.paid', 'http://127.0.0.1:1/hook', '{}', 'delivered', 1, NULL, '2026-01-01', '2026-01-01' FROM generate_series(1, 20000)`);
    await store.sql.exec('ANALYZE webhook_deliveries');
    // The receiver has been down since: 2,000 deliveries pending, due now.
    await store.sql.run(`INSERT INTO webhook_deliveries (event, url, body, state, attempts, next_attempt_at, created_at, updated_at)
      SELECT 'order.paid', 'http://127.0.0.1:1/hook', '{}', 'pending', 3, to_char(timestamp '2026-01-02' + g * interval '1 second', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        '2026-01-02', '2026-01-02' FROM generate_series(1, 2000) g`);
  });
  afterEach(async () => {
    await store.close();
  });

  it('claiming one, giving it back and cancelling one each read a few rows, not the backlog', async () => {
    const sent: Sent = [];
    const now = new Date('2026-11-28T12:00:00.000Z');
    const outbox = new WebhookOutbox({ sql: recording(store.sql, sent) }, () => now);
    const [mine] = await outbox.enqueue('order.paid', { id: 'ord_1' }, ['http://127.0.0.1:1/hook']);
    for (let round = 0; round < 6; round++) {
      // The first due: one of the backlog's (the earliest), given back at once.
      const claim = await outbox.claim(now, new Date(now.getTime() + 60_000));
      expect(claim?.delivery.state).toBe('pending');
      expect(await outbox.release({ id: claim!.delivery.id, claim: claim!.claim })).toBe(true);
    }
    expect((await outbox.cancel([mine!])).done.map((delivery) => delivery.id)).toEqual([mine]);
    // (The pick reads its first rows in a batch of 32, for its sort.)
    expect(sent.length).toBeGreaterThan(12);
    expect(await plannedReads(sent.filter(({ text }) => text.startsWith('WITH picked') || text.startsWith('UPDATE')))).toEqual([]);
  });

  it("a dispatcher for other URLs claims, sleeps and holds without reading another instance's backlog", async () => {
    const sent: Sent = [];
    const now = new Date('2026-11-28T12:00:00.000Z');
    const outbox = new WebhookOutbox({ sql: recording(store.sql, sent) }, () => now);
    // The backlog's URL belongs to another instance, alive: nothing of it is held.
    await outbox.registerSender('the-other-instance', ['http://127.0.0.1:1/hook'], 60_000);
    const mine = ['http://127.0.0.1:2/mine', 'http://127.0.0.1:3/mine-too'];
    const [first, second] = await outbox.enqueue('order.paid', { id: 'ord_1' }, mine);
    sent.length = 0;
    expect(await outbox.holdOthers(mine)).toEqual({ held: [], resumed: [] });
    expect(await outbox.nextDueAt(mine)).toEqual(now);
    const claims = [];
    for (let round = 0; round < 3; round++) claims.push(await outbox.claim(now, new Date(now.getTime() + 60_000), mine));
    // Its own two, in the order they were made, then nothing: the backlog is not its to send.
    expect(claims.map((claim) => claim?.delivery.id)).toEqual([first, second, undefined]);
    expect(await outbox.nextDueAt(mine)).toEqual(new Date(now.getTime() + 60_000));
    expect(sent.length).toBeGreaterThan(5);
    expect(await plannedReads(sent)).toEqual([]);

    // Once the other instance is gone, its backlog is held, all of it.
    await outbox.removeSender('the-other-instance');
    expect((await outbox.holdOthers(mine)).held).toHaveLength(2000);
  });

  /** Each statement run again for its plan (and undone): those that read more than 100 rows in one scan. */
  const plannedReads = async (statements: Sent): Promise<string[]> => {
    const read: string[] = [];
    for (const { text, params } of statements) {
      await store.sql
        .transaction(async (tx) => {
          const [row] = await tx.all<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, params);
          for (const scan of scansOf(row!['QUERY PLAN'][0].Plan)) if (scan.rows > 100) read.push(`${scan.rows} rows by ${scan.name}: ${brief(text)}`);
          throw new Undone();
        })
        .catch((error: unknown) => {
          if (!(error instanceof Undone)) throw error;
        });
    }
    return read;
  };
});

class Undone extends Error {}
