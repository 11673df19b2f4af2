/** Receipts of the partner's unlink callbacks, written before the callback is answered. */
import type { Db } from './database.js';

export interface UnlinkEvent {
  id: number;
  receivedAt: string;
  userKey: number;
  /** As it came: UNLINK, WITHDRAWAL_TERMS, WITHDRAWAL_PLATFORM, or anything else (null when absent). */
  referrer: string | null;
  method: string;
  source: string | null;
}

interface Row {
  id: number;
  received_at: string;
  user_key: number;
  referrer: string | null;
  method: string;
  source: string | null;
}

export class UnlinkEventStore {
  readonly #insert;
  constructor(private readonly db: Db) {
    this.#insert = db.prepare('INSERT INTO unlink_events (received_at, user_key, referrer, method, source) VALUES (?, ?, ?, ?, ?)');
  }

  record(event: Omit<UnlinkEvent, 'id'>): UnlinkEvent {
    const { lastInsertRowid } = this.#insert.run(event.receivedAt, event.userKey, event.referrer, event.method, event.source);
    return { id: Number(lastInsertRowid), ...event };
  }

  list(filter: { since?: Date | undefined; userKey?: number | undefined } = {}): UnlinkEvent[] {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.since) {
      where.push('received_at >= ?');
      params.push(filter.since.toISOString());
    }
    if (filter.userKey !== undefined) {
      where.push('user_key = ?');
      params.push(filter.userKey);
    }
    const sql = `SELECT * FROM unlink_events ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY received_at, id`;
    return (this.db.prepare(sql).all(...params) as Row[]).map((row) => ({
      id: row.id,
      receivedAt: row.received_at,
      userKey: row.user_key,
      referrer: row.referrer,
      method: row.method,
      source: row.source,
    }));
  }
}
