/**
 * The durable log of user changes behind WatchUserChanges, on both engines.
 *
 * Each change is written to `user_events` in the transaction that makes it,
 * numbered from the `counters` row 'user_events'. Bumping that row locks it
 * until the transaction ends, so writers take their numbers in commit order
 * and a reader that sees number n also sees every number below it: "all
 * changes after n" is a complete answer, whichever instance asks and
 * whenever. The highest number of a transaction is published on commit, so
 * that readers on every instance know there is more to read.
 */
import type { Signals } from '../store/signals.js';
import type { Sql } from '../store/sql.js';
import type { UserRecord } from './user-record.js';

export type UserChangeType = 'CREATED' | 'UPDATED' | 'DELETED';

export interface UserChange {
  seq: number;
  type: UserChangeType;
  user: UserRecord;
  /** When the change was made (ISO 8601). */
  at: string;
}

/** The signal channel that carries the highest number of each committed transaction. */
export const USER_CHANGES_CHANNEL = 'user_changes';

interface Row {
  seq: number;
  type: UserChangeType;
  payload: string;
  at: string;
}

const BUMP = "UPDATE counters SET value = value + $1 WHERE name = 'user_events' RETURNING value";
const INSERT = 'INSERT INTO user_events (seq, type, payload, at, user_id) VALUES ($1, $2, $3, $4, $5)';
const AFTER = 'SELECT seq, type, payload, at FROM user_events WHERE seq > $1 ORDER BY seq LIMIT CAST($2 AS INTEGER)';
/** One user's changes after a number (the index on user_id, seq), with the log's head and oldest kept change as they were then. */
const AFTER_FOR = `
  SELECT e.seq, e.type, e.payload, e.at, h.head, h.oldest
  FROM (SELECT (SELECT value FROM counters WHERE name = 'user_events') AS head, (SELECT min(seq) FROM user_events) AS oldest) h
  LEFT JOIN (SELECT seq, type, payload, at FROM user_events WHERE user_id = $1 AND seq > $2 ORDER BY seq LIMIT CAST($3 AS INTEGER)) e ON TRUE
  ORDER BY e.seq`;
const HEAD = "SELECT value FROM counters WHERE name = 'user_events'";
const TRIM = 'DELETE FROM user_events WHERE at < $1';

export class UserChangeLog {
  constructor(
    private readonly sql: Sql,
    private readonly signals: Signals,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /**
   * Numbers `changes` within `tx` (the transaction that made them) and
   * publishes the last number when it commits. Called last in the
   * transaction, so that the counter's lock is held only until the commit.
   */
  async append(tx: Sql, changes: readonly (readonly [UserChangeType, UserRecord])[]): Promise<void> {
    if (changes.length === 0) return;
    const bumped = await tx.one<{ value: number }>(BUMP, [changes.length]);
    if (!bumped) throw new Error("the counters row 'user_events' is missing: the schema was not migrated");
    const last = Number(bumped.value);
    const at = this.now().toISOString();
    let seq = last - changes.length;
    for (const [type, user] of changes) await tx.run(INSERT, [++seq, type, JSON.stringify(user), at, user.id]);
    await this.signals.publish(USER_CHANGES_CHANNEL, String(last), tx);
  }

  /** The changes numbered above `seq`, oldest first, at most `limit` of them. */
  async after(seq: number, limit: number): Promise<UserChange[]> {
    const rows = await this.sql.all<Row>(AFTER, [seq, limit]);
    return rows.map((row) => ({ seq: Number(row.seq), type: row.type, user: JSON.parse(row.payload) as UserRecord, at: row.at }));
  }

  /**
   * The changes of user `userId` numbered above `seq`, oldest first, at most `limit` of them; with the number of the
   * last change of anyone's (`head`) and of the oldest still kept (`oldest`, undefined when none is), read with them.
   */
  async afterFor(userId: number, seq: number, limit: number): Promise<{ changes: UserChange[]; head: number; oldest: number | undefined }> {
    const rows = await this.sql.all<Partial<Row> & { head: number | null; oldest: number | null }>(AFTER_FOR, [userId, seq, limit]);
    const first = rows[0];
    return {
      changes: rows
        .filter((row) => row.seq !== null && row.seq !== undefined)
        .map((row) => ({ seq: Number(row.seq), type: row.type!, user: JSON.parse(row.payload!) as UserRecord, at: row.at! })),
      head: Number(first?.head ?? 0),
      oldest: first?.oldest === null || first?.oldest === undefined ? undefined : Number(first.oldest),
    };
  }

  /** The number of the last committed change (0 before the first). */
  async head(): Promise<number> {
    const row = await this.sql.one<{ value: number }>(HEAD);
    return Number(row?.value ?? 0);
  }

  /** Forgets the changes made before `before`; resolves with how many. */
  trim(before: Date): Promise<number> {
    return this.sql.run(TRIM, [before.toISOString()]);
  }
}
