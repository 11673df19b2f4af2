/**
 * Payment providers: what the payment service asks to charge and refund,
 * whatever is behind it. A real provider is one new implementation of
 * PaymentProvider. Every call carries the payment's (or refund's) own id as
 * the provider's idempotency key, so asking again after a lost answer never
 * charges twice: that is how payments in progress are reconciled.
 *
 * The embedded default is the sandbox: test payment methods in the spirit of
 * Toss Payments' and Stripe's test modes, and books kept in the store (so a
 * charge is remembered by its key across restarts, as a real provider's are).
 *
 * Domain module: nothing here prints or reads the environment.
 */
import type { Sql } from '../../store/sql.js';
import { newId, num } from '../kernel/common.js';

export interface ChargeRequest {
  /** The provider's idempotency key: the payment's id. */
  key: string;
  amount: number;
  currency: string;
  method: string;
}

export type ChargeResult = { outcome: 'approved'; reference: string } | { outcome: 'declined'; code: string; message: string };

export interface RefundRequest {
  /** The provider's idempotency key: the refund's id. */
  key: string;
  /** The charge's reference. */
  reference: string;
  amount: number;
  currency: string;
}

/** The provider did not answer in time: the outcome is unknown until asked again by the same key. */
export class ProviderTimeoutError extends Error {}

export interface PaymentProvider {
  readonly name: string;
  /** The method used when a request names none. */
  readonly defaultMethod: string;
  /** Why a method cannot be used with this provider, or undefined when it can. */
  checkMethod(method: string): string | undefined;
  /** Charges once per key; the same key again answers the first charge's outcome. Throws ProviderTimeoutError when the answer is lost. */
  charge(request: ChargeRequest): Promise<ChargeResult>;
  /** Refunds once per key. Throws ProviderTimeoutError when the answer is lost. */
  refund(request: RefundRequest): Promise<{ reference: string }>;
}

/** The sandbox's test methods and what each does. */
const SANDBOX_METHODS = {
  test_approve: { outcome: 'approved' },
  test_decline_insufficient_funds: { outcome: 'declined', code: 'INSUFFICIENT_FUNDS', message: 'the card has not enough funds' },
  test_decline_card_declined: { outcome: 'declined', code: 'CARD_DECLINED', message: 'the card issuer declined the payment' },
  // Charges, but the first answer for a key is lost (a time-out); asking again by the key answers approved.
  test_timeout: { outcome: 'approved', timeout: true },
} as const satisfies Record<string, { outcome: 'approved' | 'declined'; code?: string; message?: string; timeout?: boolean }>;

export type SandboxMethod = keyof typeof SANDBOX_METHODS;

interface ChargeRow {
  amount: number;
  method: SandboxMethod;
  outcome: 'approved' | 'declined';
  failure_code: string | null;
  reference: string;
  answered: number;
}

const CHARGE_COLUMNS = 'amount, method, outcome, failure_code, reference, answered';

export class SandboxProvider implements PaymentProvider {
  readonly name = 'sandbox';
  readonly defaultMethod: SandboxMethod = 'test_approve';

  constructor(
    private readonly sql: Sql,
    private readonly now: () => Date = () => new Date(),
  ) {}

  checkMethod(method: string): string | undefined {
    if (Object.hasOwn(SANDBOX_METHODS, method)) return undefined;
    return `the sandbox provider takes the test methods ${Object.keys(SANDBOX_METHODS).join(', ')}; got "${method.slice(0, 64)}"`;
  }

  async charge(request: ChargeRequest): Promise<ChargeResult> {
    const method = SANDBOX_METHODS[request.method as SandboxMethod];
    if (!method) return { outcome: 'declined', code: 'INVALID_METHOD', message: this.checkMethod(request.method)! };
    // A new key's charge comes back from its INSERT; a key charged before is read as it was charged.
    const row =
      (await this.sql.one<ChargeRow>(
        `INSERT INTO sandbox_charges (key, amount, currency, method, outcome, failure_code, reference, answered, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8) ON CONFLICT (key) DO NOTHING RETURNING ${CHARGE_COLUMNS}`,
        [
          request.key,
          request.amount,
          request.currency,
          request.method,
          method.outcome,
          'code' in method ? method.code : null,
          newId('sbx'),
          this.now().toISOString(),
        ],
      )) ?? (await this.sql.one<ChargeRow>(`SELECT ${CHARGE_COLUMNS} FROM sandbox_charges WHERE key = $1`, [request.key]))!;
    if (num(row.amount) !== request.amount) {
      return { outcome: 'declined', code: 'IDEMPOTENCY_MISMATCH', message: `key ${request.key} charged ${num(row.amount)} before, not ${request.amount}` };
    }
    if ('timeout' in SANDBOX_METHODS[row.method] && num(row.answered) === 0) {
      await this.sql.run('UPDATE sandbox_charges SET answered = 1 WHERE key = $1', [request.key]);
      throw new ProviderTimeoutError('the sandbox provider did not answer (test_timeout)');
    }
    if (row.outcome === 'approved') return { outcome: 'approved', reference: row.reference };
    const declined = SANDBOX_METHODS[row.method] as { code: string; message: string };
    return { outcome: 'declined', code: row.failure_code ?? declined.code, message: declined.message };
  }

  async refund(request: RefundRequest): Promise<{ reference: string }> {
    await this.sql.run('INSERT INTO sandbox_refunds (key, charge_reference, amount, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (key) DO NOTHING', [
      request.key,
      request.reference,
      request.amount,
      this.now().toISOString(),
    ]);
    return { reference: request.key };
  }
}
