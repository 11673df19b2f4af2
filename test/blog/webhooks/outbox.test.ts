/** The outbox in SQLite: one serialisation per event, all rows or none, due and list. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { MIGRATIONS, migrate, openDatabase, schemaVersion, type Db } from '../../../src/store/database.js';
import { afterAttempt, MAX_ATTEMPTS, POST_CREATED, WebhookOutbox } from '../../../src/blog/webhooks.js';

const T0 = new Date('2026-11-21T12:00:00.000Z');
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

let db: Db;
let now: Date;
let outbox: WebhookOutbox;

beforeEach(() => {
  db = openDatabase('memory');
  now = T0;
  outbox = new WebhookOutbox(db, () => now);
});
afterEach(() => db.close());

describe('enqueue', () => {
  it('stores one serialisation of { event, timestamp, data } per URL, pending and due now', () => {
    const ids = outbox.enqueue(POST_CREATED, POST, ['http://127.0.0.1:1/a', 'http://127.0.0.1:1/b']);
    expect(ids).toHaveLength(2);
    const [a, b] = outbox.list();
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
    const raw = db.prepare('SELECT body FROM webhook_deliveries WHERE id = ?').get(ids[0]) as { body: string };
    expect(Buffer.from(raw.body, 'utf8').equals(Buffer.from(a!.body, 'utf8'))).toBe(true);
  });

  it('enqueues nothing for no URL', () => {
    expect(outbox.enqueue(POST_CREATED, POST, [])).toEqual([]);
    expect(outbox.list()).toEqual([]);
  });

  it('writes all rows or none', () => {
    expect(() => outbox.enqueue(POST_CREATED, POST, ['http://127.0.0.1:1/a', null as unknown as string])).toThrow();
    expect(outbox.list()).toEqual([]);
  });

  it('joins the caller\'s transaction, so a rolled-back post leaves no delivery', () => {
    expect(() =>
      db.transaction(() => {
        outbox.enqueue(POST_CREATED, POST, ['http://127.0.0.1:1/a']);
        throw new Error('post insert failed');
      })(),
    ).toThrow('post insert failed');
    expect(outbox.list()).toEqual([]);
  });
});

describe('due, list and the schedule', () => {
  it('due returns pending deliveries whose time has come, most overdue first', () => {
    const [first] = outbox.enqueue(POST_CREATED, { id: 1 }, ['http://127.0.0.1:1/1']);
    now = new Date(T0.getTime() + 1000);
    const [second] = outbox.enqueue(POST_CREATED, { id: 2 }, ['http://127.0.0.1:1/2']);
    expect(outbox.due(T0).map((d) => d.id)).toEqual([first]);
    expect(outbox.due(now).map((d) => d.id)).toEqual([first, second]);
    outbox.recordAttempt(first!, { at: now.toISOString(), statusCode: 200, error: null }, { state: 'delivered', nextAttemptAt: null, at: now.toISOString() });
    expect(outbox.due(new Date(T0.getTime() + 86_400_000)).map((d) => d.id)).toEqual([second]);
    expect(outbox.nextDueAt()?.toISOString()).toBe(now.toISOString());
    expect(outbox.list({ state: 'delivered' }).map((d) => d.id)).toEqual([first]);
    expect(outbox.list({ state: 'delivered' })[0]!.attempts).toEqual([{ at: now.toISOString(), statusCode: 200, error: null }]);
    expect(outbox.list({ state: 'failed' })).toEqual([]);
    expect(outbox.get(second!)?.state).toBe('pending');
    expect(outbox.get(999)).toBeUndefined();
  });

  it('claims a due delivery once (compare-and-set on its next attempt)', () => {
    const [id] = outbox.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/']);
    const later = new Date(T0.getTime() + 120_000);
    expect(outbox.claim(id!, T0.toISOString(), later, T0)).toBe(true);
    expect(outbox.claim(id!, T0.toISOString(), later, T0)).toBe(false);
    expect(outbox.due(T0)).toEqual([]);
    expect(outbox.due(later).map((d) => d.id)).toEqual([id]);
  });

  it('retries 1, 5 and 30 minutes after a failure, then gives up after the fourth attempt', () => {
    const at = T0;
    expect(MAX_ATTEMPTS).toBe(4);
    expect(afterAttempt(1, false, at)).toEqual({ state: 'pending', nextAttemptAt: '2026-11-21T12:01:00.000Z' });
    expect(afterAttempt(2, false, at)).toEqual({ state: 'pending', nextAttemptAt: '2026-11-21T12:05:00.000Z' });
    expect(afterAttempt(3, false, at)).toEqual({ state: 'pending', nextAttemptAt: '2026-11-21T12:30:00.000Z' });
    expect(afterAttempt(4, false, at)).toEqual({ state: 'failed', nextAttemptAt: null });
    expect(afterAttempt(3, true, at)).toEqual({ state: 'delivered', nextAttemptAt: null });
  });
});

describe('cancel, hold and resend', () => {
  const failedAttempt = (at: Date) => ({ at: at.toISOString(), statusCode: 500, error: null });

  it('an attempt in flight when its delivery is cancelled is recorded, and leaves it cancelled unless it delivered', () => {
    const [lost, arrived] = outbox.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/a', 'http://127.0.0.1:1/b']);
    expect(outbox.cancel([lost!, arrived!]).done.map((d) => d.state)).toEqual(['cancelled', 'cancelled']);
    const retry = afterAttempt(1, false, now);
    expect(outbox.recordAttempt(lost!, failedAttempt(now), { ...retry, at: now.toISOString() })).toBe('cancelled');
    expect(outbox.get(lost!)).toMatchObject({ state: 'cancelled', nextAttemptAt: null, attemptCount: 1 });
    expect(outbox.recordAttempt(arrived!, { at: now.toISOString(), statusCode: 200, error: null }, { state: 'delivered', nextAttemptAt: null, at: now.toISOString() })).toBe('delivered');
    expect(outbox.get(arrived!)?.state).toBe('delivered');
  });

  it('holds pending deliveries to other URLs and resumes held ones to these, due now, attempts kept', () => {
    const [a, b] = outbox.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/a', 'http://127.0.0.1:1/b']);
    outbox.recordAttempt(a!, failedAttempt(now), { ...afterAttempt(1, false, now), at: now.toISOString() });
    const moved = outbox.holdOthers(['http://127.0.0.1:1/b']);
    expect(moved.held.map((d) => [d.id, d.state, d.nextAttemptAt])).toEqual([[a, 'held', null]]);
    expect(moved.resumed).toEqual([]);
    expect(outbox.due(new Date(T0.getTime() + 3_600_000)).map((d) => d.id)).toEqual([b]);
    now = new Date(T0.getTime() + 5000);
    const back = outbox.holdOthers(['http://127.0.0.1:1/a', 'http://127.0.0.1:1/b']);
    expect(back.resumed.map((d) => [d.id, d.state, d.nextAttemptAt, d.attemptCount])).toEqual([[a, 'pending', now.toISOString(), 1]]);
  });

  it('resends once at a time: a pending resend of the same delivery refuses another', () => {
    const [id] = outbox.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/a']);
    outbox.recordAttempt(id!, { at: now.toISOString(), statusCode: 204, error: null }, { state: 'delivered', nextAttemptAt: null, at: now.toISOString() });
    const first = outbox.resend([id!]);
    expect(first.done.map((d) => [d.originalId, d.state])).toEqual([[id, 'pending']]);
    const second = outbox.resend([id!]);
    expect(second.done).toEqual([]);
    expect(second.refused).toEqual([{ id, reason: `delivery ${first.done[0]!.id}, which sends the same X-Webhook-Delivery ${id}, is still pending` }]);
    expect(outbox.resend([first.done[0]!.id]).refused[0]!.reason).toContain('still pending');
  });
});

describe('migration 5', () => {
  it('keeps the deliveries and attempts of schema 4, and never hands out an id again', () => {
    const old = new Database(':memory:');
    old.pragma('foreign_keys = ON');
    for (const m of MIGRATIONS.filter((m) => m.version <= 4)) {
      old.exec(m.sql);
      old.pragma(`user_version = ${m.version}`);
    }
    const v4 = new WebhookOutbox(old, () => T0);
    // Version 4 has no original_id: enqueue writes only the columns both schemas have.
    const ids = v4.enqueue(POST_CREATED, { id: 1 }, ['http://127.0.0.1:1/a', 'http://127.0.0.1:1/b', 'http://127.0.0.1:1/c']);
    old.prepare('INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, error) VALUES (?, ?, 500, NULL)').run(ids[0], T0.toISOString());
    old.prepare('DELETE FROM webhook_deliveries WHERE id = ?').run(ids[2]);
    const before = v4.list();

    migrate(old);
    expect(schemaVersion(old)).toBe(MIGRATIONS.at(-1)!.version);
    const after = new WebhookOutbox(old, () => T0);
    expect(after.list()).toEqual(before);
    expect(after.list().map((d) => d.originalId)).toEqual([null, null]);
    expect(after.cancel([ids[1]!]).done[0]!.state).toBe('cancelled');
    expect(after.enqueue(POST_CREATED, {}, ['http://127.0.0.1:1/d'])).toEqual([ids[2]! + 1]);
    expect(old.pragma('foreign_key_check')).toEqual([]);
    old.close();
  });
});
