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

  /** Oldest first; with a limit, the most recent ones (still oldest first). */
  list(filter: EventFilter & { limit?: number | undefined } = {}): UnlinkEvent[] {
    const { where, params } = whereOf(filter);
    const limit = filter.limit === undefined ? '' : ' LIMIT ?';
    const sql = `SELECT * FROM unlink_events ${where} ORDER BY received_at DESC, id DESC${limit}`;
    const rows = (this.db.prepare(sql).all(...params, ...(filter.limit === undefined ? [] : [filter.limit])) as Row[]).reverse();
    return rows.map((row) => ({
      id: row.id,
      receivedAt: row.received_at,
      userKey: row.user_key,
      referrer: row.referrer,
      method: row.method,
      source: row.source,
    }));
  }

  /** How many match, whatever the limit. */
  count(filter: EventFilter = {}): number {
    const { where, params } = whereOf(filter);
    return (this.db.prepare(`SELECT count(*) AS n FROM unlink_events ${where}`).get(...params) as { n: number }).n;
  }
}

export interface EventFilter {
  since?: Date | undefined;
  userKey?: number | undefined;
}

function whereOf(filter: EventFilter): { where: string; params: unknown[] } {
  const clauses: string[] = [];
  const params: unknown[] = [];
  if (filter.since) {
    clauses.push('received_at >= ?');
    params.push(filter.since.toISOString());
  }
  if (filter.userKey !== undefined) {
    clauses.push('user_key = ?');
    params.push(filter.userKey);
  }
  return { where: clauses.length ? `WHERE ${clauses.join(' AND ')}` : '', params };
}
