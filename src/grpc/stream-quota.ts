/**
 * How many long streams of one kind (WatchUserChanges) serve holds open:
 * at most `perAccount` for one user (whatever number of tokens it logs in
 * for), and `total` in all. Past either, the call is refused with
 * RESOURCE_EXHAUSTED and a RetryInfo (retry-info.ts). The admin token is
 * the operator's, and counts against the total only.
 */
import type * as grpc from '@grpc/grpc-js';
import type { Principal } from '../auth/tokens.js';
import { resourceExhausted } from './retry-info.js';

export interface StreamQuotaLimits {
  perAccount: number;
  total: number;
}

/** When a refused client may try again: by then a stream of the same account may have ended. */
const QUOTA_RETRY_MS = 5_000;

/** A refusal past the quota, with the status (and its RetryInfo) that ends the call. */
export class QuotaExceeded extends Error {
  readonly status: { code: grpc.status; details: string; metadata: grpc.Metadata };

  constructor(message: string) {
    super(message);
    this.status = resourceExhausted(message, QUOTA_RETRY_MS);
  }
}

export class StreamQuota {
  readonly #perAccount = new Map<number, number>();
  #total = 0;

  constructor(
    private readonly what: string,
    readonly limits: StreamQuotaLimits,
  ) {}

  /** Counts one more stream of `principal`, or throws QuotaExceeded; returns the function that gives it back (once). */
  acquire(principal: Principal): () => void {
    const account = principal.userId;
    if (this.#total >= this.limits.total) {
      throw new QuotaExceeded(`serve holds ${this.limits.total} ${this.what} open, its limit: try again later`);
    }
    const mine = account === null ? 0 : (this.#perAccount.get(account) ?? 0);
    if (account !== null && mine >= this.limits.perAccount) {
      throw new QuotaExceeded(`this account has ${this.limits.perAccount} ${this.what} open, the most one account may: end one first`);
    }
    this.#total++;
    if (account !== null) this.#perAccount.set(account, mine + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.#total--;
      if (account === null) return;
      const left = (this.#perAccount.get(account) ?? 1) - 1;
      if (left > 0) this.#perAccount.set(account, left);
      else this.#perAccount.delete(account);
    };
  }

  /** Streams held now. */
  size(): number {
    return this.#total;
  }
}
