/**
 * Request rates per client: a token bucket per bearer token that has
 * authenticated (its SHA-256, never the token itself), or per client
 * address for every other call: without a token, or with one serve has not
 * seen issued or authenticate (a made-up token, an expired or revoked
 * one). So sending a fresh random token with each request buys no fresh
 * bucket. A token this instance issued (a login, the admin token) has its
 * bucket from the start; one issued elsewhere (another instance, before a
 * restart) counts its first request against its address and has its own
 * bucket once it authenticates (TokenService tells `vouch`). A bucket holds up to `burst` requests and refills at
 * `perSecond`; a request that finds it empty is refused with the time
 * until one more would be allowed. The HTTP APIs
 * (server/request-rates-hook.ts) and the gRPC services
 * (grpc/request-check.ts) each take from one of these; the messages of a
 * SyncUsers stream take one each (`pace`).
 *
 * The buckets live in this process's memory: each serve instance counts
 * its own requests (N instances behind a balancer allow up to N times the
 * rate), unlike the login limits, which hold in the store. Costs one map
 * lookup and a little arithmetic per request; a bucket idle long enough to
 * be full again is forgotten when the map grows past `maxKeys`.
 */
import { TokenService, tokenHash } from './tokens.js';

export interface RequestRateLimits {
  /** Requests per second a bucket refills with: the sustained rate. */
  perSecond: number;
  /** Requests a bucket holds: how many may come at once after a quiet spell. */
  burst: number;
}

/**
 * Far above what a person, the CLI or a browser page sends (a page of the
 * docs is a few dozen requests, `miniapp users import` streams its rows in
 * one call), low enough that one token or address cannot take a whole
 * instance: serve answers a few thousand requests a second on two cores.
 */
export const DEFAULT_REQUEST_RATES: RequestRateLimits = { perSecond: 200, burst: 400 };

/** The limits in words, for serve's banner. */
export function describeRequestRates(limits: RequestRateLimits | false): string {
  if (!limits) return 'off';
  return `${limits.perSecond} per second per token or address (bursts of ${limits.burst}), per instance`;
}

interface Bucket {
  tokens: number;
  at: number;
}

/** The key of a token's hash (tokenHash: what the store keeps and TokenService vouches by). */
const hashRateKey = (hashed: string) => `t:${hashed}`;

/** The key of a bearer token, or undefined for a request without one. */
function tokenRateKey(authorization: string | undefined): string | undefined {
  const token = authorization === undefined ? undefined : TokenService.bearer(authorization);
  return token === undefined ? undefined : hashRateKey(tokenHash(token));
}

const addressRateKey = (address: string) => `a:${address}`;

/** Whether a rate key is a token's (else an address's), for messages. */
export const isTokenKey = (key: string) => key.startsWith('t:');

export class RequestRates {
  readonly #buckets = new Map<string, Bucket>();
  readonly #perMs: number;
  readonly #burst: number;
  /** Whole requests left in the bucket of the last `take`. */
  left = 0;

  constructor(
    readonly limits: RequestRateLimits,
    private readonly now: () => number = Date.now,
    private readonly maxKeys = 100_000,
  ) {
    this.#perMs = limits.perSecond / 1000;
    this.#burst = limits.burst;
  }

  /**
   * The key of a request: its bearer token's when that token has authenticated (it has a bucket), else its client
   * address's. `address` may be a function, asked only then (a gRPC peer's address is a system call).
   */
  keyOf(authorization: string | undefined, address: string | (() => string)): string {
    const token = tokenRateKey(authorization);
    if (token !== undefined && this.#buckets.has(token)) return token;
    return addressRateKey(typeof address === 'string' ? address : address());
  }

  /**
   * What authentication found of a token: one that authenticates gets a bucket of its own (full, if it had none);
   * one that does not (expired, revoked, made up) loses any it had, and its requests count against their address.
   */
  vouch(hashed: string, authenticated: boolean): void {
    const key = hashRateKey(hashed);
    if (!authenticated) this.#buckets.delete(key);
    else if (!this.#buckets.has(key)) {
      const now = this.now();
      if (this.#buckets.size >= this.maxKeys) this.#forget(now);
      this.#buckets.set(key, { tokens: this.#burst, at: now });
    }
  }

  /** Takes one request from `key`'s bucket: 0 when it may go, else how many ms until it could. Sets `left`. */
  take(key: string): number {
    const now = this.now();
    let bucket = this.#buckets.get(key);
    if (bucket === undefined) {
      if (this.#buckets.size >= this.maxKeys) this.#forget(now);
      bucket = { tokens: this.#burst, at: now };
      this.#buckets.set(key, bucket);
    } else if (now > bucket.at) {
      bucket.tokens = Math.min(this.#burst, bucket.tokens + (now - bucket.at) * this.#perMs);
      bucket.at = now;
    }
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      this.left = Math.floor(bucket.tokens);
      return 0;
    }
    this.left = 0;
    return Math.max(1, Math.ceil((1 - bucket.tokens) / this.#perMs));
  }

  /** Seconds until the bucket of the last `take` is full again (RateLimit-Reset). */
  resetSeconds(): number {
    return Math.ceil((this.#burst - this.left) / this.limits.perSecond);
  }

  /** How many keys have a bucket (for tests and metrics). */
  get size(): number {
    return this.#buckets.size;
  }

  /** Forgets full buckets; if every one is in use (a flood of keys), the oldest tenth. */
  #forget(now: number): void {
    for (const [key, bucket] of this.#buckets) {
      if (bucket.tokens + (now - bucket.at) * this.#perMs >= this.#burst) this.#buckets.delete(key);
    }
    if (this.#buckets.size < this.maxKeys) return;
    let drop = Math.ceil(this.maxKeys / 10);
    for (const key of this.#buckets.keys()) {
      if (drop-- <= 0) break;
      this.#buckets.delete(key);
    }
  }
}
