/**
 * Payments and refunds over the store and a provider (provider.ts), one
 * implementation for both backends.
 *
 * Crash safety: a charge is recorded IN_PROGRESS, with its idempotency key,
 * in a transaction that commits before the provider is called; the
 * provider is called with the payment's id as its key; the outcome is
 * settled in a second transaction (a conditional UPDATE from IN_PROGRESS, so
 * one settlement wins whatever instance reconciles at the same time). On
 * PostgreSQL either transaction may be a single statement, sent on its own
 * (order/postgres-steps.ts, #settle): it commits as one all the same. A
 * process that dies in between leaves the payment IN_PROGRESS; `reconcile`
 * asks the provider again by the same key (at start, and before any new
 * attempt), so nothing is charged twice. Refunds work the same way: the
 * amount leaves the balance with the PENDING refund, before the provider is
 * asked.
 *
 * Domain module: nothing here prints or reads the environment.
 */
import { rowCheck, type Sql } from '../../store/sql.js';
import {
  actorOf,
  checkCurrency,
  checkKey,
  DEFAULT_CURRENCY,
  checkText,
  CommerceError,
  integer,
  mayAccess,
  MAX_AMOUNT,
  newId,
  notFound,
  num,
  precondition,
  requestHash,
  type Caller,
} from '../kernel/common.js';
import { completeAllSql, type IdempotencyKeys } from '../kernel/idempotency.js';
import { Statement } from '../kernel/statement.js';
import { Together } from '../kernel/together.js';
import { ProviderTimeoutError, type ChargeResult, type PaymentProvider } from './provider.js';

type PaymentStatus = 'IN_PROGRESS' | 'DONE' | 'ABORTED' | 'CANCELED' | 'PARTIAL_CANCELED';

export interface RefundRecord {
  id: string;
  amount: number;
  reason: string;
  status: 'PENDING' | 'DONE';
  createdAt: string;
}

export interface PaymentRecord {
  id: string;
  orderId: string | null;
  userId: number | null;
  status: PaymentStatus;
  amount: number;
  balance: number;
  currency: string;
  method: string;
  provider: string;
  providerReference: string | null;
  failureCode: string | null;
  failureMessage: string | null;
  refunds: RefundRecord[];
  createdAt: string;
  updatedAt: string;
  approvedAt: string | null;
}

/** What ProcessPayment answers (and stores under its key once final). */
export interface PaymentOutcome {
  payment: PaymentRecord;
  message: string;
}

export interface RefundOutcome {
  payment: PaymentRecord;
  refund: RefundRecord;
}

/** A payment about to be charged: what it is for and how much. */
export interface NewPayment {
  orderId: string | null;
  userId: number | null;
  amount: number;
  currency: string;
  method: string;
}

const PAYMENT_REFUNDED = 'payment.refunded';
const NO_ANSWER = 'the provider did not answer; the outcome is reconciled by the same idempotency key: retry with it';

/** Writes a webhook event in the caller's transaction (the outbox); a no-op without webhooks, where `data` is not even called. */
export type Publish = (event: string, data: () => Promise<unknown>, tx: Sql) => Promise<void>;

export interface CommerceObserver {
  payment?(outcome: 'approved' | 'declined' | 'unknown', currency: string, amount: number): void;
  refund?(currency: string, amount: number): void;
  expiries?(count: number): void;
}

export interface PaymentsOptions {
  sql: Sql;
  now: () => Date;
  provider: PaymentProvider;
  keys: IdempotencyKeys;
  /** Webhook events, written in the transactions that make them; none without webhooks. */
  publish?: Publish | undefined;
  observe?: CommerceObserver | undefined;
}

/**
 * The order's side of a settlement (approved or declined): the order moves
 * with its payment. `inTransaction` writes it in the settlement's
 * transaction; `pieces`, where given, are the same writes as pieces of one
 * statement on PostgreSQL that settles payments together (data-modifying
 * CTEs after the payments' own, `settled`: their rows once settled, with
 * the columns id, order_id, status and at; none for a payment another call
 * settled first). Without `pieces` (webhooks to write) the settlement is a
 * transaction on every backend.
 */
export interface SettleHook {
  inTransaction: (tx: Sql, payment: PaymentRecord) => Promise<void>;
  pieces?: ((s: Statement, settled: string) => string[]) | undefined;
}

/** The order's side of a refund the provider made: in the transaction that marks it DONE, with the payment as it now stands. */
export type RefundHook = (tx: Sql, payment: PaymentRecord) => Promise<void>;

/** Why a user token may not refund (Stripe's rule: a refund is the merchant's act). */
const REFUND_NEEDS_ADMIN = "refunds need the admin token: a refund is the merchant's act, not the buyer's (ask the shop to refund)";

export interface PaymentRow {
  id: string;
  order_id: string | null;
  user_id: number | null;
  status: PaymentStatus;
  amount: number;
  balance: number;
  currency: string;
  method: string;
  provider: string;
  provider_reference: string | null;
  failure_code: string | null;
  failure_message: string | null;
  created_at: string;
  updated_at: string;
  approved_at: string | null;
}

interface RefundRow {
  id: string;
  amount: number;
  reason: string;
  status: 'PENDING' | 'DONE';
  created_at: string;
}

/** A payment as its row (and its refunds' rows) stand. */
export function paymentRecord(row: PaymentRow, refunds: readonly RefundRow[]): PaymentRecord {
  return {
    id: row.id,
    orderId: row.order_id,
    userId: row.user_id === null ? null : num(row.user_id),
    status: row.status,
    amount: num(row.amount),
    balance: num(row.balance),
    currency: row.currency,
    method: row.method,
    provider: row.provider,
    providerReference: row.provider_reference,
    failureCode: row.failure_code,
    failureMessage: row.failure_message,
    refunds: refunds.map((r) => ({ id: r.id, amount: num(r.amount), reason: r.reason, status: r.status, createdAt: r.created_at })),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    approvedAt: row.approved_at,
  };
}

export class Payments {
  readonly #sql: Sql;
  readonly #now: () => Date;
  readonly #keys: IdempotencyKeys;
  #onSettle: SettleHook = { inTransaction: async () => undefined, pieces: () => [] };
  #onRefund: RefundHook = async () => undefined;

  constructor(private readonly options: PaymentsOptions) {
    this.#sql = options.sql;
    this.#now = options.now;
    this.#keys = options.keys;
  }

  get provider(): PaymentProvider {
    return this.options.provider;
  }

  /** The order side of a settlement (orders.ts binds it). */
  onSettle(hook: SettleHook): void {
    this.#onSettle = hook;
  }

  /** The order side of a refund (orders.ts binds it). */
  onRefund(hook: RefundHook): void {
    this.#onRefund = hook;
  }

  /** The method a request names, or the provider's default; INVALID_ARGUMENT for one the provider does not take. */
  checkMethod(method: string | undefined): string {
    const chosen = checkText('method', method, { max: 64 }) || this.provider.defaultMethod;
    const problem = this.provider.checkMethod(chosen);
    if (problem) throw new CommerceError('INVALID_ARGUMENT', `method: ${problem}`);
    return chosen;
  }

  async record(id: string, sql: Sql = this.#sql): Promise<PaymentRecord | undefined> {
    const row = await sql.one<PaymentRow>('SELECT * FROM payments WHERE id = $1', [id]);
    if (!row) return undefined;
    const refunds = await sql.all<RefundRow>('SELECT id, amount, reason, status, created_at FROM refunds WHERE payment_id = $1 ORDER BY position', [id]);
    return paymentRecord(row, refunds);
  }

  /** A payment the caller may see; NOT_FOUND otherwise (another user's payment is not told apart from none). */
  async get(caller: Caller, id: string): Promise<PaymentRecord> {
    const payment = id ? await this.record(id) : undefined;
    if (!payment || !mayAccess(caller, payment.userId)) throw notFound(`no payment with id "${id.slice(0, 64)}"`);
    return payment;
  }

  /** A payment of `amount` not tied to an order (admin only). */
  async processStandalone(caller: Caller, request: { amount: string | number; currency: string; method: string; key: string }): Promise<PaymentOutcome> {
    if (!caller.isAdmin) throw new CommerceError('PERMISSION_DENIED', 'a payment without an order needs the admin token; pay an order with order_id');
    const key = checkKey(request.key);
    const amount = integer('amount', request.amount, 1, MAX_AMOUNT);
    const currency = checkCurrency(request.currency, DEFAULT_CURRENCY);
    const method = this.checkMethod(request.method);
    return this.process(caller, key, requestHash({ order: null, amount, currency, method }), async () => ({
      orderId: null,
      userId: null,
      amount,
      currency,
      method,
    }));
  }

  /**
   * Charges once per idempotency key: a key seen before answers its stored
   * outcome (or, still in progress, reconciles it); a new key records the
   * payment `prepare` describes (in the transaction where the caller checks
   * and locks what is paid for), then asks the provider.
   */
  async process(caller: Caller, key: string, hash: string, prepare: (tx: Sql, paymentId: string) => Promise<NewPayment>): Promise<PaymentOutcome> {
    return this.#keys.once(
      this.#sql,
      { scope: 'payment.process', owner: actorOf(caller), key, hash },
      {
        plan: async (tx) => {
          const id = newId('pay');
          return { id, run: async () => this.#record(tx, id, await prepare(tx, id)) };
        },
        // The payment as it was just written: charged without reading it back.
        finish: (payment) => this.charge(payment),
        resume: (id) => this.reconcile(id),
      },
    );
  }

  /** Records a payment IN_PROGRESS (in the transaction its key is claimed in). */
  async #record(tx: Sql, id: string, payment: NewPayment): Promise<PaymentRecord> {
    const s = new Statement();
    const row = await tx.one<PaymentRow>(
      this.recordSql(s, id, payment.method, {
        orderId: s.$(payment.orderId),
        userId: s.$(payment.userId),
        amount: s.$(payment.amount),
        currency: s.$(payment.currency),
      }),
      s.params,
    );
    return paymentRecord(row!, []);
  }

  /**
   * The INSERT of a payment IN_PROGRESS (RETURNING its row). What it pays
   * for are SQL expressions: placeholders, or the columns of the rows of
   * `from` (a FROM clause, with its WHERE) in a statement of several pieces.
   */
  recordSql(s: Statement, id: string, method: string, of: { orderId: string; userId: string; amount: string; currency: string }, from = ''): string {
    const at = s.$(this.#now().toISOString());
    return `INSERT INTO payments (id, order_id, user_id, status, amount, balance, currency, method, provider, created_at, updated_at)
      SELECT ${s.$(id)}, ${of.orderId}, ${of.userId}, 'IN_PROGRESS', ${of.amount}, 0, ${of.currency}, ${s.$(method)}, ${s.$(this.provider.name)}, ${at}, ${at}${from}
      RETURNING *`;
  }

  /** Asks the provider about an IN_PROGRESS payment by its key and settles it; a settled one is answered as it stands. */
  async reconcile(id: string): Promise<PaymentOutcome> {
    const payment = await this.record(id);
    if (!payment) throw notFound(`no payment with id "${id}"`);
    if (payment.status !== 'IN_PROGRESS') return { payment, message: 'settled' };
    return this.charge(payment);
  }

  /** Asks the provider to charge a payment just recorded IN_PROGRESS (as it was written), and settles it. */
  async charge(payment: PaymentRecord): Promise<PaymentOutcome> {
    let result: ChargeResult;
    try {
      result = await this.provider.charge({ key: payment.id, amount: payment.amount, currency: payment.currency, method: payment.method });
    } catch (error) {
      if (!(error instanceof ProviderTimeoutError)) throw error;
      this.options.observe?.payment?.('unknown', payment.currency, payment.amount);
      return { payment, message: NO_ANSWER };
    }
    return this.#settle(payment, result);
  }

  /**
   * Settles an IN_PROGRESS payment by the provider's answer: a conditional
   * UPDATE from IN_PROGRESS, so that one settlement wins whatever else
   * reconciles it at the same time, with the key's answer and the order's
   * side. On PostgreSQL, where the order's side comes as pieces, all of it
   * is one statement; else one transaction.
   */
  async #settle(payment: PaymentRecord, result: ChargeResult): Promise<PaymentOutcome> {
    const at = this.#now().toISOString();
    // Written as it is computed here: an IN_PROGRESS payment changes in no other way (only a DONE one is refunded).
    const settled: PaymentRecord =
      result.outcome === 'approved'
        ? { ...payment, status: 'DONE', balance: payment.amount, providerReference: result.reference, approvedAt: at, updatedAt: at }
        : { ...payment, status: 'ABORTED', failureCode: result.code, failureMessage: result.message, updatedAt: at };
    const outcome: PaymentOutcome = { payment: settled, message: result.outcome === 'approved' ? 'approved' : `declined: ${result.code}: ${result.message}` };
    const pieces = this.#onSettle.pieces;
    let settledNow: boolean;
    if (this.#sql.dialect === 'postgres' && pieces) {
      settledNow = await this.#settling.add({ settled, outcome });
    } else {
      const update = `UPDATE payments SET status = $1, balance = $2, provider_reference = $3, failure_code = $4, failure_message = $5, approved_at = $6, updated_at = $7
        WHERE id = $8 AND ${rowCheck("status = 'IN_PROGRESS'")}`;
      const params = [
        settled.status,
        settled.balance,
        settled.providerReference,
        settled.failureCode,
        settled.failureMessage,
        settled.approvedAt,
        at,
        payment.id,
      ];
      settledNow = await this.#sql.transaction(async (tx) => {
        if ((await tx.run(update, params)) === 0) return false;
        await this.#keys.complete(tx, 'payment.process', payment.id, outcome);
        // Last: the order's side takes the stock's rows, held only until the commit.
        await this.#onSettle.inTransaction(tx, settled);
        return true;
      });
    }
    // Settled by another call meanwhile: answered as it stands.
    if (!settledNow) return { payment: (await this.record(payment.id))!, message: outcome.message };
    this.options.observe?.payment?.(result.outcome, settled.currency, settled.amount);
    return outcome;
  }

  /**
   * Settlements written with those that come while a statement settling
   * others is in flight (kernel/together.ts): the next statement
   * settles them all, each payment once, so that under load the products
   * rows of a popular SKU are locked, and a commit waited for, once a
   * statement rather than once a payment. Each answers true when this call
   * settled it (false: another did first).
   */
  readonly #settling = new Together<{ settled: PaymentRecord; outcome: PaymentOutcome }, boolean>(
    (batch) => this.#settleAll(batch),
    ({ settled }) => [settled.id],
  );

  async #settleAll(batch: readonly { settled: PaymentRecord; outcome: PaymentOutcome }[]): Promise<boolean[]> {
    const s = new Statement();
    const payments = batch.map((settling) => settling.settled);
    const all = [
      `v AS (${s.unnest({
        id: [payments.map((p) => p.id), 'text'],
        status: [payments.map((p) => p.status), 'text'],
        balance: [payments.map((p) => p.balance), 'bigint'],
        provider_reference: [payments.map((p) => p.providerReference), 'text'],
        failure_code: [payments.map((p) => p.failureCode), 'text'],
        failure_message: [payments.map((p) => p.failureMessage), 'text'],
        approved_at: [payments.map((p) => p.approvedAt), 'text'],
        at: [payments.map((p) => p.updatedAt), 'text'],
        response: [batch.map((settling) => JSON.stringify(settling.outcome)), 'text'],
      })})`,
      // An IN_PROGRESS payment changes in no other way (only a DONE one is refunded): each is written as its caller computed it.
      `settled AS (UPDATE payments SET status = v.status, balance = v.balance, provider_reference = v.provider_reference, failure_code = v.failure_code,
        failure_message = v.failure_message, approved_at = v.approved_at, updated_at = v.at
        FROM v WHERE payments.id = v.id AND ${rowCheck("payments.status = 'IN_PROGRESS'")} RETURNING payments.id, payments.order_id, payments.status, v.at)`,
      `answered AS (${completeAllSql(s, 'payment.process', '(SELECT v.id AS resource_id, v.response FROM v JOIN settled ON settled.id = v.id)')})`,
      ...this.#onSettle.pieces!(s, 'settled'),
    ];
    const rows = await this.#sql.all<{ id: string }>(`WITH ${all.join(',\n')}\nSELECT id FROM settled`, s.params);
    const settledNow = new Set(rows.map((row) => row.id));
    return payments.map((payment) => settledNow.has(payment.id));
  }

  /**
   * Refunds all of the balance (amount 0) or part of it, once per key. The
   * amount leaves the balance with a PENDING refund before the provider is
   * asked; the payment becomes PARTIAL_CANCELED, or CANCELED at balance 0,
   * and its order PARTIALLY_REFUNDED or REFUNDED. The admin token only (a
   * user token is PERMISSION_DENIED before anything is read). `owner`
   * overrides the key's owner (the order's cancel refunds as "system").
   */
  async refund(
    caller: Caller,
    request: { paymentId: string; amount: string | number; reason: string; key: string },
    owner = actorOf(caller),
  ): Promise<RefundOutcome> {
    if (!caller.isAdmin) throw new CommerceError('PERMISSION_DENIED', REFUND_NEEDS_ADMIN);
    const key = checkKey(request.key);
    const reason = checkText('reason', request.reason, { required: true });
    const asked = integer('amount', request.amount, 0, MAX_AMOUNT);
    const hash = requestHash({ payment: request.paymentId, amount: asked, reason });
    let payment = await this.get(caller, request.paymentId);
    if (payment.status === 'IN_PROGRESS') payment = (await this.reconcile(payment.id)).payment;
    return this.#keys.once(
      this.#sql,
      { scope: 'payment.refund', owner, key, hash },
      {
        plan: async (tx) => {
          const id = newId('ref');
          const run = async () => {
            const current = (await this.record(payment.id, tx))!;
            if (current.status !== 'DONE' && current.status !== 'PARTIAL_CANCELED') {
              throw precondition(`payment ${current.id} is ${current.status}: only a DONE or PARTIAL_CANCELED payment can be refunded`);
            }
            const amount = asked === 0 ? current.balance : asked;
            if (amount === 0) throw precondition(`payment ${current.id} has nothing left to refund (balance 0)`);
            const at = this.#now().toISOString();
            const taken = await tx.run('UPDATE payments SET balance = balance - $2, updated_at = $3 WHERE id = $1 AND balance >= $2', [current.id, amount, at]);
            if (taken === 0)
              throw precondition(
                `a refund of ${amount} ${current.currency} is more than the balance of payment ${current.id} (${current.balance} ${current.currency})`,
              );
            // Numbered in the order they were made (the balance's UPDATE above holds the payment's row until commit).
            await tx.run(
              "INSERT INTO refunds (id, payment_id, position, amount, reason, status, created_at, updated_at) VALUES ($1, $2, (SELECT COUNT(*) + 1 FROM refunds WHERE payment_id = $2), $3, $4, 'PENDING', $5, $5)",
              [id, current.id, amount, reason, at],
            );
          };
          return { id, run };
        },
        resume: (id) => this.#refundAtProvider(id),
      },
    );
  }

  async #refundRecord(refundId: string, sql: Sql = this.#sql): Promise<{ payment: PaymentRecord; refund: RefundRecord }> {
    const row = (await sql.one<{ payment_id: string }>('SELECT payment_id FROM refunds WHERE id = $1', [refundId]))!;
    const payment = (await this.record(row.payment_id, sql))!;
    return { payment, refund: payment.refunds.find((r) => r.id === refundId)! };
  }

  /** Asks the provider for a PENDING refund (by its key) and settles it; a DONE one is answered as it stands. */
  async #refundAtProvider(refundId: string): Promise<RefundOutcome> {
    const { payment, refund } = await this.#refundRecord(refundId);
    if (refund.status === 'DONE') return { payment, refund };
    try {
      await this.provider.refund({ key: refund.id, reference: payment.providerReference ?? '', amount: refund.amount, currency: payment.currency });
    } catch (error) {
      if (error instanceof ProviderTimeoutError) return { payment, refund };
      throw error;
    }
    let settledNow = false;
    const outcome = await this.#sql.transaction(async (tx) => {
      const at = this.#now().toISOString();
      if ((await tx.run(`UPDATE refunds SET status = 'DONE', updated_at = $2 WHERE id = $1 AND ${rowCheck("status = 'PENDING'")}`, [refundId, at])) === 1) {
        settledNow = true;
        await tx.run("UPDATE payments SET status = CASE WHEN balance = 0 THEN 'CANCELED' ELSE 'PARTIAL_CANCELED' END, updated_at = $2 WHERE id = $1", [
          payment.id,
          at,
        ]);
        const outcome = await this.#refundRecord(refundId, tx);
        await this.options.publish?.(PAYMENT_REFUNDED, async () => outcome, tx);
        await this.#onRefund(tx, outcome.payment);
        await this.#keys.complete(tx, 'payment.refund', refundId, outcome);
        return outcome;
      }
      return this.#refundRecord(refundId, tx);
    });
    if (settledNow) this.options.observe?.refund?.(payment.currency, refund.amount);
    return outcome;
  }

  /** Settles what a stopped process left: every IN_PROGRESS payment and PENDING refund (at start, and now and then). */
  async reconcileAll(): Promise<{ payments: number; refunds: number }> {
    const payments = await this.#sql.all<{ id: string }>("SELECT id FROM payments WHERE status = 'IN_PROGRESS' ORDER BY created_at");
    for (const { id } of payments) await this.reconcile(id);
    const refunds = await this.#sql.all<{ id: string }>("SELECT id FROM refunds WHERE status = 'PENDING' ORDER BY created_at");
    for (const { id } of refunds) await this.#refundAtProvider(id);
    return { payments: payments.length, refunds: refunds.length };
  }
}
