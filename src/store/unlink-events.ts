/** Receipts of the partner's unlink callbacks, written before the callback is answered. */
import type { Param, Sql } from './sql.js';

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
  constructor(private readonly sql: Sql) {}

  async record(event: Omit<UnlinkEvent, 'id'>): Promise<UnlinkEvent> {
    const row = await this.sql.one<{ id: number }>(
      'INSERT INTO unlink_events (received_at, user_key, referrer, method, source) VALUES ($1, $2, $3, $4, $5) RETURNING id',
      [event.receivedAt, event.userKey, event.referrer, event.method, event.source],
    );
    return { id: Number(row!.id), ...event };
  }

  /** Oldest first; with a limit, the most recent ones (still oldest first). */
  async list(filter: EventFilter & { limit?: number | undefined } = {}): Promise<UnlinkEvent[]> {
    const { where, params } = whereOf(filter);
    const limit = filter.limit === undefined ? '' : ` LIMIT CAST($${params.length + 1} AS INTEGER)`;
    const rows = await this.sql.all<Row>(
      `SELECT * FROM unlink_events ${where} ORDER BY received_at DESC, id DESC${limit}`,
      filter.limit === undefined ? params : [...params, filter.limit],
    );
    return rows.reverse().map((row) => ({
      id: Number(row.id),
      receivedAt: row.received_at,
      userKey: Number(row.user_key),
      referrer: row.referrer,
      method: row.method,
      source: row.source,
    }));
  }

  /** How many match, whatever the limit. */
  async count(filter: EventFilter = {}): Promise<number> {
    const { where, params } = whereOf(filter);
    return Number((await this.sql.one<{ n: number }>(`SELECT count(*) AS n FROM unlink_events ${where}`, params))!.n);
  }
}

export interface EventFilter {
  since?: Date | undefined;
  userKey?: number | undefined;
}

function whereOf(filter: EventFilter): { where: string; params: Param[] } {
  const clauses: string[] = [];
  const params: Param[] = [];
  if (filter.since) {
    params.push(filter.since.toISOString());
    clauses.push(`received_at >= $${params.length}`);
  }
  if (filter.userKey !== undefined) {
    params.push(filter.userKey);
    clauses.push(`user_key = $${params.length}`);
  }
  return { where: clauses.length ? `WHERE ${clauses.join(' AND ')}` : '', params };
}
