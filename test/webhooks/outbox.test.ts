/**
 * The outbox on both backends, one suite: one serialisation per event, all
 * rows or none, the caller's transaction, due and list, claims and their
 * leases (several handles on one database, as several instances have), the
 * hold rule with several senders, cancel and resend, and the signals that
 * wake the dispatchers.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { MIGRATIONS, migrate, schemaVersion } from '../../src/store/database.js';
import { SqliteSql } from '../../src/store/sql.js';
import type { Store } from '../../src/store/store.js';
import { afterAttempt, OUTBOX_CHANNEL, WebhookOutbox } from '../../src/webhooks/outbox.js';
import { type Claim, MAX_ATTEMPTS } from '../../src/webhooks/delivery.js';
import { POST_CREATED } from '../../src/blog/posts.js';
import { BACKENDS } from '../helpers/postgres.js';
import { webhookDatabase, type WebhookTestDatabase } from './backend.js';

const T0 = new Date('2026-11-21T12:00:00.000Z');
const MINUTE = 60_000;
const LEASE = 2 * MINUTE;
const POST = {
  id: 7,
  title: 'Hello',
  content: 'Ünïcödé \u{1F600} and a lone surrogate \ud800',
  author: 'alice',
  created_at: T0.toISOString(),
  updated_at: T0.toISOString(),
  tags: ['a', 'b'],
  is_published: true,
};
const at = (ms: number) => new Date(T0.getTime() + ms);

describe.each(BACKENDS)('the outbox on %s', (backend) => {
  let database: WebhookTestDatabase;
  let store: Store;
  let now: Date;
  let outbox: WebhookOutbox;

  beforeEach(async () => {
    database = await webhookDatabase(backend);
    store = await database.open();
    now = T0;
    outbox = new WebhookOutbox(store, () => now);
  });
  afterEach(async () => {
    await database.dispose();
  });

  /** Claims delivery `id` (the most overdue one due at `now`) as a dispatcher would. */
  async function claimed(id: number, by = outbox): Promise<Claim> {
    const claim = await by.claim(now, new Date(now.getTime() + LEASE));
    expect(claim?.delivery.id).toBe(id);
    return claim!;
  }

  /** Claims and records one attempt with this status; returns the state it left. */
  async function attempt(id: number, status: number) {
    const claim = await claimed(id);
    const next = afterAttempt(claim.delivery.attemptCount + 1, status >= 200 && status < 300, now);
    return outbox.recordAttempt({ id, claim: claim.claim }, { at: now.toISOString(), statusCode: status, error: null }, { ...next, at: now.toISOString() });
  }

  describe('enqueue', () => {
    it('gives each delivery an X-Webhook-Delivery key unique across databases: a rebuilt one counts ids from 1 again, never keys', async () => {
      const [first] = await outbox.enqueue(POST_CREATED, POST, ['http://127.0.0.1:1/a']);
      const rebuilt = await webhookDatabase(backend);
      try {
        const other = new WebhookOutbox(await rebuilt.open(), () => now);
        const [again] = await other.enqueue(POST_CREATED, POST, ['http://127.0.0.1:1/a']);
        expect(again).toBe(first);
        const [a, b] = [(await outbox.get(first!))!, (await other.get(again!))!];
        expect(a.key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
        expect(b.key).not.toBe(a.key);
        // Made at the same instant, they still differ, and both start with that instant (UUIDv7).
        expect(a.key!.replace(/-/g, '').slice(0, 12)).toBe(T0.getTime().toString(16).padStart(12, '0'));
      } finally {
        await rebuilt.dispose();
      }
    });

    it('stores one serialisation of { event, timestamp, data } per URL, pending and due now', async () => {
      const ids = await outbox.enqueue(POST_CREATED, POST, ['http://127.0.0.1:1/a', 'http://127.0.0.1:1/b']);
      expect(ids).toHaveLength(2);
      const [a, b] = await outbox.list();
      expect(a!.body).toBe(b!.body);
      expect(a!.body).toBe(JSON.stringify({ event: 'post.created', timestamp: T0.toISOString(), data: POST }));
      expect(JSON.parse(a!.body)).toEqual({ event: 'post.created', timestamp: '2026-11-21T12:00:00.000Z', data: POST });
      for (const [i, delivery] of [a!, b!].entries()) {
        expect(delivery).toMatchObject({
          id: ids[i],
          event: 'post.created',
          url: `http://127.0.0.1:1/${'ab'[i]}`,
          state: 'pending',
          attemptCount: 0,
          nextAttemptAt: T0.toISOString(),
          createdAt: T0.toISOString(),
          attempts: [],
        });
      }
      // The raw column holds the same string (no re-encoding on the way in or out).
      const raw = await store.sql.one<{ body: string }>('SELECT body FROM webhook_deliveries WHERE id = $1', [ids[0]!]);
      expect(Buffer.from(raw!.body, 'utf8').equals(Buffer.from(a!.body, 'utf8'))).toBe(true);
    });

    it('returns the ids in the order of the URLs, also for one URL given twice', async () => {
      const urls = ['http://127.0.0.1:1/z', 'http://127.0.0.1:1/a', 'http://127.0.0.1:1/z'];
      const ids = await outbox.enqueue(POST_CREATED, POST, urls);
      expect(await Promise.all(ids.map(async (id) => (await outbox.get(id))!.url))).toEqual(urls);
    });

    it('enqueues nothing for no URL', async () => {
      expect(await outbox.enqueue(POST_CREATED, POST, [])).toEqual([]);
      expect(await outbox.list()).toEqual([]);
    });

    it('writes all rows or none', async () => {
      await expect(outbox.enqueue(POST_CREATED, POST, ['http://127.0.0.1:1/a', null as unknown as string])).rejects.toThrow();
      expect(await outbox.list()).toEqual([]);
    });

    it("joins the caller's transaction: a rolled-back post leaves no delivery and wakes no one; a committed one wakes once it commits", async () => {
      const heard: string[] = [];
      const unlisten = await outbox.listen(() => heard.push('wake'));
      heard.length = 0; // the wake-up of the subscription itself
      await expect(
        store.sql.transaction(async (tx) => {
          await outbox.enqueue(POST_CREATED, POST, ['http://127.0.0.1:1/a'], tx);
          throw new Error('post insert failed');
        }),
      ).rejects.toThrow('post insert failed');
      expect(await outbox.list()).toEqual([]);

      let heardBeforeCommit = -1;
      await store.sql.transaction(async (tx) => {
        await outbox.enqueue(POST_CREATED, POST, ['http://127.0.0.1:1/a'], tx);
        heardBeforeCommit = heard.length;
      });
      await until(() => heard.length > 0, 'the wake-up');
      expect(heardBeforeCommit).toBe(0);
      expect(heard).toEqual(['wake']);
      expect(await outbox.list()).toHaveLength(1);
      await unlisten();
    });
  });

  describe('due, list and the schedule', () => {
    it('due returns pending deliveries whose time has come, most overdue first', async () => {
      const [first] = await outbox.enqueue(POST_CREATED, { id: 1 }, ['http://127.0.0.1:1/1']);
      now = at(1000);
      const [second] = await outbox.enqueue(POST_CREATED, { id: 2 }, ['http://127.0.0.1:1/2']);
      expect((await outbox.due(T0)).map((d) => d.id)).toEqual([first]);
      expect((await outbox.due(now)).map((d) => d.id)).toEqual([first, second]);
      expect(await attempt(first!, 200)).toBe('delivered');
      expect((await outbox.due(at(86_400_000))).map((d) => d.id)).toEqual([second]);
      expect((await outbox.nextDueAt())?.toISOString()).toBe(now.toISOString());
      expect((await outbox.list({ state: 'delivered' })).map((d) => d.id)).toEqual([first]);
      expect((await outbox.list({ state: 'delivered' }))[0]!.attempts).toEqual([{ at: now.toISOString(), statusCode: 200, error: null }]);
      expect(await outbox.list({ state: 'failed' })).toEqual([]);
      expect((await outbox.get(second!))?.state).toBe('pending');
      expect(await outbox.get(999)).toBeUndefined();
      expect(await outbox.pendingCount()).toBe(1);
      expect(await outbox.count()).toBe(2);
    });

    it('lists the N most recent, oldest first, and filters by state and URL', async () => {
      const ids = await outbox.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/a', 'http://127.0.0.1:1/b', 'http://127.0.0.1:1/a']);
      expect((await outbox.list({ limit: 2 })).map((d) => d.id)).toEqual(ids.slice(1));
      expect((await outbox.list({ url: 'http://127.0.0.1:1/a' })).map((d) => d.id)).toEqual([ids[0], ids[2]]);
      expect(await outbox.count({ url: 'http://127.0.0.1:1/a', state: 'pending' })).toBe(2);
      expect(await outbox.count({ state: 'held' })).toBe(0);
    });

    it('counts only the URLs asked for when telling when the next one is due', async () => {
      await outbox.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/a']);
      now = at(MINUTE);
      await outbox.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/b']);
      expect((await outbox.nextDueAt())?.toISOString()).toBe(T0.toISOString());
      expect((await outbox.nextDueAt(['http://127.0.0.1:1/b']))?.toISOString()).toBe(at(MINUTE).toISOString());
      expect(await outbox.nextDueAt(['http://127.0.0.1:1/c'])).toBeUndefined();
    });
  });

  describe('claims', () => {
    it('claims a due delivery once, for the length of its lease, and numbers each claim', async () => {
      const [id] = await outbox.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/']);
      const first = await claimed(id!);
      expect(first.claim).toBe(1);
      expect(first.delivery).toMatchObject({ state: 'pending', nextAttemptAt: at(LEASE).toISOString(), attemptCount: 0 });
      expect(await outbox.claim(now, at(LEASE))).toBeUndefined();
      expect(await outbox.due(now)).toEqual([]);
      // The claimer is gone: when the lease ends, the delivery is due again, for anyone.
      now = at(LEASE);
      const second = await claimed(id!);
      expect(second.claim).toBe(2);
    });

    it('claims only deliveries to the URLs asked for', async () => {
      const [a, b] = await outbox.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/a', 'http://127.0.0.1:1/b']);
      expect((await outbox.claim(now, at(LEASE), ['http://127.0.0.1:1/b']))?.delivery.id).toBe(b);
      expect(await outbox.claim(now, at(LEASE), ['http://127.0.0.1:1/b'])).toBeUndefined();
      expect(await outbox.claim(now, at(LEASE), [])).toBeUndefined();
      expect((await outbox.claim(now, at(LEASE)))?.delivery.id).toBe(a);
    });

    it('an outcome recorded under an older claim cannot reschedule what a newer claim is sending, unless it delivered', async () => {
      const [id] = await outbox.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/']);
      const stale = await claimed(id!);
      now = at(LEASE);
      const current = await claimed(id!);
      // The stale claimer comes back with a failure: the attempt is recorded, the newer lease stands.
      const failed = { at: T0.toISOString(), statusCode: 500, error: null };
      expect(await outbox.recordAttempt({ id: id!, claim: stale.claim }, failed, { ...afterAttempt(1, false, now), at: now.toISOString() })).toBe('pending');
      expect(await outbox.get(id!)).toMatchObject({ state: 'pending', nextAttemptAt: at(2 * LEASE).toISOString(), attemptCount: 1 });
      // The current claim's outcome applies.
      const ok = { at: now.toISOString(), statusCode: 500, error: null };
      expect(await outbox.recordAttempt({ id: id!, claim: current.claim }, ok, { ...afterAttempt(2, false, now), at: now.toISOString() })).toBe('pending');
      expect(await outbox.get(id!)).toMatchObject({ state: 'pending', nextAttemptAt: at(LEASE + 5 * MINUTE).toISOString(), attemptCount: 2 });
      // A stale claim that delivered: the receiver has it, and the delivery says so.
      expect(
        await outbox.recordAttempt(
          { id: id!, claim: stale.claim },
          { at: now.toISOString(), statusCode: 200, error: null },
          { state: 'delivered', nextAttemptAt: null, at: now.toISOString() },
        ),
      ).toBe('delivered');
      expect(await outbox.get(id!)).toMatchObject({ state: 'delivered', nextAttemptAt: null, attemptCount: 3 });
    });

    it('gives each delivery to one claimer when several instances claim at once', async () => {
      // Claims are single statements: on SQLite too, several connections in one process take turns.
      const others = await Promise.all([database.open(), database.open()]);
      const outboxes = [outbox, ...others.map((other) => new WebhookOutbox(other, () => now))];
      const urls = Array.from({ length: 10 }, (_, i) => `http://127.0.0.1:1/${i}`);
      const ids = [...(await outbox.enqueue(POST_CREATED, {}, urls)), ...(await outbox.enqueue(POST_CREATED, {}, urls))];
      const taken: number[][] = outboxes.map(() => []);
      await Promise.all(
        outboxes.flatMap((box, i) =>
          Array.from({ length: 4 }, async () => {
            for (;;) {
              const claim = await box.claim(now, at(LEASE));
              if (!claim) return;
              taken[i]!.push(claim.delivery.id);
            }
          }),
        ),
      );
      expect(taken.flat().sort((a, b) => a - b)).toEqual(ids);
      expect(await outbox.due(at(LEASE - 1))).toEqual([]);
    });
  });

  describe('retries', () => {
    it('retries 1, 5 and 30 minutes after a failure, then gives up after the fourth attempt', () => {
      expect(MAX_ATTEMPTS).toBe(4);
      expect(afterAttempt(1, false, T0)).toEqual({ state: 'pending', nextAttemptAt: '2026-11-21T12:01:00.000Z' });
      expect(afterAttempt(2, false, T0)).toEqual({ state: 'pending', nextAttemptAt: '2026-11-21T12:05:00.000Z' });
      expect(afterAttempt(3, false, T0)).toEqual({ state: 'pending', nextAttemptAt: '2026-11-21T12:30:00.000Z' });
      expect(afterAttempt(4, false, T0)).toEqual({ state: 'failed', nextAttemptAt: null });
      expect(afterAttempt(3, true, T0)).toEqual({ state: 'delivered', nextAttemptAt: null });
    });
  });

  describe('cancel, hold and resend', () => {
    it('an attempt in flight when its delivery is cancelled is recorded, and leaves it cancelled unless it delivered', async () => {
      const [lost, arrived] = await outbox.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/a', 'http://127.0.0.1:1/b']);
      const lostClaim = await claimed(lost!);
      const arrivedClaim = await claimed(arrived!);
      expect((await outbox.cancel([lost!, arrived!])).done.map((d) => d.state)).toEqual(['cancelled', 'cancelled']);
      const retry = afterAttempt(1, false, now);
      expect(
        await outbox.recordAttempt(
          { id: lost!, claim: lostClaim.claim },
          { at: now.toISOString(), statusCode: 500, error: null },
          { ...retry, at: now.toISOString() },
        ),
      ).toBe('cancelled');
      expect(await outbox.get(lost!)).toMatchObject({ state: 'cancelled', nextAttemptAt: null, attemptCount: 1 });
      expect(
        await outbox.recordAttempt(
          { id: arrived!, claim: arrivedClaim.claim },
          { at: now.toISOString(), statusCode: 200, error: null },
          { state: 'delivered', nextAttemptAt: null, at: now.toISOString() },
        ),
      ).toBe('delivered');
      expect((await outbox.get(arrived!))?.state).toBe('delivered');
    });

    it('holds pending deliveries to other URLs and resumes held ones to these, due now, attempts kept', async () => {
      const [a, b] = await outbox.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/a', 'http://127.0.0.1:1/b']);
      expect(await attempt(a!, 500)).toBe('pending');
      const moved = await outbox.holdOthers(['http://127.0.0.1:1/b']);
      expect(moved.held.map((d) => [d.id, d.state, d.nextAttemptAt])).toEqual([[a, 'held', null]]);
      expect(moved.resumed).toEqual([]);
      expect((await outbox.due(at(3_600_000))).map((d) => d.id)).toEqual([b]);
      now = at(5000);
      const back = await outbox.holdOthers(['http://127.0.0.1:1/a', 'http://127.0.0.1:1/b']);
      expect(back.resumed.map((d) => [d.id, d.state, d.nextAttemptAt, d.attemptCount])).toEqual([[a, 'pending', now.toISOString(), 1]]);
    });

    it('never holds a delivery to a URL that another live sender sends to; holds it once that sender stopped or its word lapsed', async () => {
      const [onlyOther] = await outbox.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/other']);
      const other = new WebhookOutbox(await database.instance(store), () => now);
      await other.registerSender('instance-b', ['http://127.0.0.1:1/mine', 'http://127.0.0.1:1/other'], MINUTE);
      await outbox.registerSender('instance-a', ['http://127.0.0.1:1/mine'], MINUTE);
      expect((await outbox.holdOthers(['http://127.0.0.1:1/mine'])).held).toEqual([]);
      expect((await outbox.get(onlyOther!))?.state).toBe('pending');

      // B died without a word: once its word lapses, nobody sends to its URL.
      now = at(MINUTE);
      expect((await outbox.holdOthers(['http://127.0.0.1:1/mine'])).held.map((d) => d.id)).toEqual([onlyOther]);

      // B is back, and resumes it; then stops cleanly: held again at A's next look.
      await other.registerSender('instance-b', ['http://127.0.0.1:1/other'], MINUTE);
      expect((await other.holdOthers(['http://127.0.0.1:1/other'])).resumed.map((d) => d.id)).toEqual([onlyOther]);
      expect((await outbox.holdOthers(['http://127.0.0.1:1/mine'])).held).toEqual([]);
      await other.removeSender('instance-b');
      expect((await outbox.holdOthers(['http://127.0.0.1:1/mine'])).held.map((d) => d.id)).toEqual([onlyOther]);
    });

    it('forgets senders whose word lapsed', async () => {
      await outbox.registerSender('gone', ['http://127.0.0.1:1/a'], MINUTE);
      now = at(2 * MINUTE);
      await outbox.registerSender('here', ['http://127.0.0.1:1/b'], MINUTE);
      expect((await store.sql.all<{ id: string }>('SELECT id FROM webhook_senders ORDER BY id')).map((row) => row.id)).toEqual(['here']);
    });

    it('resends once at a time: a pending resend of the same delivery refuses another', async () => {
      const [id] = await outbox.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/a']);
      expect(await attempt(id!, 204)).toBe('delivered');
      const first = await outbox.resend([id!]);
      expect(first.done.map((d) => [d.originalId, d.state])).toEqual([[id, 'pending']]);
      const second = await outbox.resend([id!]);
      expect(second.done).toEqual([]);
      const key = (await outbox.get(id!))!.key;
      expect(first.done[0]!.key).toBe(key);
      expect(second.refused).toEqual([{ id, reason: `delivery ${first.done[0]!.id}, which sends the same X-Webhook-Delivery ${key}, is still pending` }]);
      expect((await outbox.resend([first.done[0]!.id])).refused[0]!.reason).toContain('still pending');
    });

    it('two resends of one delivery at once, from two instances, queue it once', async () => {
      const [id] = await outbox.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/a']);
      expect(await attempt(id!, 204)).toBe('delivered');
      const other = new WebhookOutbox(await database.instance(store), () => now);
      const outcomes = await Promise.all([outbox.resend([id!]), other.resend([id!])]);
      expect(outcomes.map((o) => o.done.length).sort()).toEqual([0, 1]);
      expect(await outbox.count({ state: 'pending' })).toBe(1);
    });

    it('wakes the dispatchers of every instance when it resends or cancels', async () => {
      // Another instance's outbox; on SQLite the signals of a store reach its own process, the one instance.
      const listener = new WebhookOutbox(await database.instance(store));
      const heard: number[] = [];
      const unlisten = await listener.listen(() => heard.push(Date.now()));
      heard.length = 0;
      const [id] = await outbox.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/a']);
      await until(() => heard.length === 1, 'the enqueue');
      expect((await outbox.cancel([id!])).done).toHaveLength(1);
      await until(() => heard.length === 2, 'the cancel');
      expect((await outbox.resend([id!])).done).toHaveLength(1);
      await until(() => heard.length === 3, 'the resend');
      expect(await outbox.cancelUrl('http://127.0.0.1:1/a')).toHaveLength(1);
      await until(() => heard.length === 4, 'the cancel by URL');
      // Nothing changed, nobody is woken.
      expect((await outbox.cancel([id!])).done).toEqual([]);
      expect(await outbox.cancelUrl('http://127.0.0.1:1/a')).toEqual([]);
      await store.signals.publish(OUTBOX_CHANNEL, 'marker');
      await until(() => heard.length === 5, 'the marker');
      await unlisten();
    });
  });
});

describe('SQLite migration 5', () => {
  it('keeps the deliveries and attempts of schema 4, and never hands out an id again', async () => {
    const old = new Database(':memory:');
    old.pragma('foreign_keys = ON');
    for (const m of MIGRATIONS.filter((m) => m.version <= 4)) {
      old.exec(m.sql);
      old.pragma(`user_version = ${m.version}`);
    }
    const v4 = new WebhookOutbox({ sql: new SqliteSql(old) }, () => T0);
    // Deliveries as serve of schema 4 wrote them.
    const insert = old.prepare(
      "INSERT INTO webhook_deliveries (event, url, body, state, attempts, next_attempt_at, created_at, updated_at) VALUES (?, ?, ?, 'pending', 0, ?, ?, ?) RETURNING id",
    );
    const body = JSON.stringify({ event: POST_CREATED, timestamp: T0.toISOString(), data: { id: 1 } });
    const ids = ['http://127.0.0.1:1/a', 'http://127.0.0.1:1/b', 'http://127.0.0.1:1/c'].map(
      (url) => (insert.get(POST_CREATED, url, body, T0.toISOString(), T0.toISOString(), T0.toISOString()) as { id: number }).id,
    );
    old.prepare('INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, error) VALUES (?, ?, 500, NULL)').run(ids[0], T0.toISOString());
    old.prepare('DELETE FROM webhook_deliveries WHERE id = ?').run(ids[2]);
    const before = await v4.list();

    migrate(old);
    expect(schemaVersion(old)).toBe(MIGRATIONS.at(-1)!.version);
    const after = new WebhookOutbox({ sql: new SqliteSql(old) }, () => T0);
    // The same deliveries, each with a key of its own now (migration 13): a random UUID.
    const listed = await after.list();
    expect(listed.map(({ key: _key, ...rest }) => rest)).toEqual(before.map(({ key: _key, ...rest }) => rest));
    expect(before.map((d) => d.key)).toEqual([null, null]);
    for (const d of listed) expect(d.key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(listed.map((d) => d.key)).size).toBe(2);
    expect(listed.map((d) => d.originalId)).toEqual([null, null]);
    // A resend keeps the key of what it repeats.
    expect((await after.resend([ids[0]!])).refused[0]!.reason).toContain('still pending');
    expect((await after.cancel([ids[1]!])).done[0]!.state).toBe('cancelled');
    expect(await after.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/d'])).toEqual([ids[2]! + 1]);
    expect(old.pragma('foreign_key_check')).toEqual([]);
    old.close();
  });
});

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  if (!condition()) throw new Error(`never saw ${what}`);
}
