/**
 * Idempotency keys of CreateOrder, ProcessPayment and RefundPayment (one
 * table, a scope per method), per caller, kept 15 days as Toss keeps its
 * Idempotency-Key. A key is claimed in the transaction that starts the work;
 * it records the request's hash, the resource the work made (an order, a
 * payment, a refund) and, once the outcome is final, the answer that every
 * retry with the same key gets. The same key with another request is
 * FAILED_PRECONDITION. A key whose work failed before anything was written
 * (bad input, short stock) is not kept: its transaction rolled back.
 */
import type { Sql } from '../../store/sql.js';
import { CommerceError, IDEMPOTENCY_TTL_MS, precondition } from './common.js';
import { Statement } from './statement.js';

export type KeyScope = 'order.create' | 'payment.process' | 'payment.refund';

export interface KeyRecord {
  requestHash: string;
  resourceId: string | null;
  /** The stored answer (JSON), once the outcome is final. */
  response: string | null;
}

interface Row {
  request_hash: string;
  resource_id: string | null;
  response: string | null;
}

/** What a keyed piece of work will make (see IdempotencyKeys.once). */
export interface KeyedWork<T, M> {
  /** The id of what the work makes (an order, a payment, a refund), kept with the key from its claim on. */
  id: string;
  /** The final answer, when known before the work runs: stored with the key by the claim. */
  answer?: T | undefined;
  /** The work, once the key is this request's: writes (or refuses, rolling the claim back) in the claim's transaction. */
  run: () => Promise<M>;
}

/** Answers given to a key seen before (stored, or resumed), so that the gRPC side can say so (`idempotent-replayed`). */
const replayed = new WeakSet<object>();

/** `answer` as a replay: what a retry with a key seen before gets. Returns `answer`. */
export function markReplayed<T>(answer: T): T {
  if (typeof answer === 'object' && answer !== null) replayed.add(answer);
  return answer;
}

/** Whether `answer` is the answer to a key seen before, rather than the work of this request. */
export function wasReplayed(answer: unknown): boolean {
  return typeof answer === 'object' && answer !== null && replayed.has(answer);
}

const METHOD: Record<KeyScope, string> = {
  'order.create': 'CreateOrder',
  'payment.process': 'ProcessPayment',
  'payment.refund': 'RefundPayment',
};

export class IdempotencyKeys {
  constructor(
    private readonly sql: Sql,
    private readonly now: () => Date,
  ) {}

  /** The live record of a key, if any. */
  async find(scope: KeyScope, owner: string, key: string, sql: Sql = this.sql): Promise<KeyRecord | undefined> {
    const row = await sql.one<Row>(
      'SELECT request_hash, resource_id, response FROM idempotency_keys WHERE scope = $1 AND owner = $2 AND key = $3 AND expires_at > $4',
      [scope, owner, key, this.now().toISOString()],
    );
    return row && { requestHash: row.request_hash, resourceId: row.resource_id, response: row.response };
  }

  /**
   * Claims a key in `tx` for a request, naming what its work makes (and the
   * final answer, when known already); undefined when it is this request's
   * now, else the record another request made with it (on PostgreSQL a
   * concurrent claim waits for the first transaction to end).
   */
  async claim(tx: Sql, scope: KeyScope, owner: string, key: string, hash: string, resourceId: string, answer?: unknown): Promise<KeyRecord | undefined> {
    const s = new Statement();
    if (await tx.one(this.claimSql(s, { scope, owner, key, hash, resourceId, answer }), s.params)) return undefined;
    return this.find(scope, owner, key, tx);
  }

  /**
   * The claim as one statement, which inserts a new key, takes over a key
   * past its 15 days and leaves a live one as it is (RETURNING the resource
   * id where it claimed). `when` is an SQL condition the claim waits on (a
   * piece of a step written as one statement: postgres-steps.ts); SQLite
   * wants a WHERE before ON CONFLICT in any case.
   */
  claimSql(s: Statement, claim: { scope: KeyScope; owner: string; key: string; hash: string; resourceId: string; answer?: unknown }, when = 'true'): string {
    const values = [claim.scope, claim.owner, claim.key, claim.hash, claim.resourceId, claim.answer === undefined ? null : JSON.stringify(claim.answer)];
    return this.#claiming(s, `${values.map((value) => s.$(value)).join(', ')}`, ` WHERE ${when}`);
  }

  /**
   * Claims as one statement (placing orders together: postgres-steps.ts),
   * a key for each row of `from` (a FROM clause with its WHERE, whose rows
   * have the columns owner, key, request_hash, resource_id and answer), as
   * claimSql claims one. Each (owner, key) may come once: PostgreSQL
   * refuses a statement that claims one key twice.
   */
  claimAllSql(s: Statement, scope: KeyScope, from: string): string {
    return this.#claiming(s, `${s.$(scope)}, owner, key, request_hash, resource_id, answer`, ` FROM ${from}`);
  }

  /** The INSERT of claims: `columns`, the scope to the answer, then the times of now, from `rest`. */
  #claiming(s: Statement, columns: string, rest: string): string {
    const now = this.now();
    return `INSERT INTO idempotency_keys (scope, owner, key, request_hash, resource_id, response, created_at, expires_at)
      SELECT ${columns}, ${s.$(now.toISOString())}, ${s.$(new Date(now.getTime() + IDEMPOTENCY_TTL_MS).toISOString())}${rest}
      ON CONFLICT (scope, owner, key) DO UPDATE SET request_hash = excluded.request_hash, resource_id = excluded.resource_id, response = excluded.response,
        created_at = excluded.created_at, expires_at = excluded.expires_at
      WHERE idempotency_keys.expires_at <= excluded.created_at
      RETURNING resource_id`;
  }

  /** Stores the final answer for the key that made `resourceId`. */
  async complete(tx: Sql, scope: KeyScope, resourceId: string, response: unknown): Promise<void> {
    const s = new Statement();
    await tx.run(completeSql(s, scope, s.$(resourceId), response), s.params);
  }

  /**
   * Does a keyed piece of work once. A key seen before answers its stored
   * result, or, while its work is not final, `resume`s that work (asks the
   * provider again, ...); a key with another request is FAILED_PRECONDITION.
   * A new key is claimed in the transaction where the work is recorded:
   * `plan` reads what the work needs and names what it will make (its id,
   * and its answer when final already), which the claim stores with the key
   * in one statement; then `run` does the work, or refuses it (the claim
   * rolls back with it). `plan` must not refuse: which request the key
   * belongs to is told first. Without a final answer, `finish` carries the
   * work out after the commit from what `run` made (`resume` does when
   * there is no `finish`).
   */
  async once<T, M = void>(
    sql: Sql,
    claim: { scope: KeyScope; owner: string; key: string; hash: string },
    work: {
      plan: (tx: Sql) => Promise<KeyedWork<T, M>>;
      finish?: (made: M, id: string) => Promise<T>;
      resume: (resourceId: string) => Promise<T>;
    },
  ): Promise<T> {
    const { scope, owner, key, hash } = claim;
    const made = await sql.transaction(async (tx): Promise<{ other: KeyRecord } | { plan: KeyedWork<T, M>; made: M }> => {
      const plan = await work.plan(tx);
      const other = await this.claim(tx, scope, owner, key, hash, plan.id, plan.answer);
      if (other) return { other };
      return { plan, made: await plan.run() };
    });
    if ('other' in made) return this.replay(scope, key, made.other, hash, work.resume);
    const { plan } = made;
    if (plan.answer !== undefined) return plan.answer;
    return work.finish ? work.finish(made.made, plan.id) : work.resume(plan.id);
  }

  /** The answer for a key another call claimed: its stored answer, or its work resumed; FAILED_PRECONDITION for another request. */
  replay<T>(scope: KeyScope, key: string, record: KeyRecord, hash: string, resume: (resourceId: string) => Promise<T>): Promise<T> {
    sameRequest(scope, key, record, hash);
    if (record.response) return Promise.resolve(markReplayed(JSON.parse(record.response) as T));
    if (!record.resourceId) throw new CommerceError('ABORTED', `a request with idempotency_key "${key}" is being processed; retry shortly`);
    return resume(record.resourceId).then(markReplayed);
  }

  /** Forgets keys past their 15 days. */
  async purge(): Promise<number> {
    return this.sql.run('DELETE FROM idempotency_keys WHERE expires_at <= $1', [this.now().toISOString()]);
  }
}

/** Stores the final answers of the keys that made resources, from the rows of `answers` (a FROM item with the columns resource_id and response). */
export function completeAllSql(s: Statement, scope: KeyScope, answers: string): string {
  return `UPDATE idempotency_keys SET response = a.response FROM ${answers} a WHERE idempotency_keys.scope = ${s.$(scope)} AND idempotency_keys.resource_id = a.resource_id`;
}

/** Stores `response` as the final answer of the key that made the resource `resource` (an SQL expression: a placeholder, or a subquery). */
function completeSql(s: Statement, scope: KeyScope, resource: string, response: unknown): string {
  return `UPDATE idempotency_keys SET response = ${s.$(JSON.stringify(response))} WHERE scope = ${s.$(scope)} AND resource_id = ${resource}`;
}

/** The record's request must be this one: else FAILED_PRECONDITION saying so. */
function sameRequest(scope: KeyScope, key: string, record: KeyRecord, hash: string): void {
  if (record.requestHash !== hash) {
    throw precondition(
      `idempotency_key "${key}" was used with a different ${METHOD[scope]} request; a key stands for one request (use a new key for a new request)`,
    );
  }
}
