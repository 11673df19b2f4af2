/**
 * Whose access token is this: the userKey login-me answered for it, kept
 * for the token's lifetime (an access token lives an hour) so that a
 * log-out after `/me` costs no second login-me. Keyed by a SHA-256 of the
 * token, so the cache holds no token; bounded, the oldest entry going
 * first.
 */
import { createHash } from 'node:crypto';

const OWNER_TTL_MS = 3600_000;
const MAX_OWNERS = 10_000;

interface Owner {
  userKey: number;
  expiresAt: number;
}

const digest = (token: string) => createHash('sha256').update(token).digest('base64');

export class TokenOwners {
  readonly #owners = new Map<string, Owner>();

  constructor(
    private readonly now: () => number,
    private readonly max = MAX_OWNERS,
    private readonly ttlMs = OWNER_TTL_MS,
  ) {}

  get size(): number {
    return this.#owners.size;
  }

  get(token: string): number | undefined {
    const id = digest(token);
    const owner = this.#owners.get(id);
    if (!owner) return undefined;
    if (owner.expiresAt <= this.now()) {
      this.#owners.delete(id);
      return undefined;
    }
    return owner.userKey;
  }

  /** Remembers a token's user; `ttlMs` may be shorter than the default (the token's own time left). */
  set(token: string, userKey: number, ttlMs = this.ttlMs): void {
    const id = digest(token);
    this.#owners.delete(id);
    while (this.#owners.size >= this.max) this.#owners.delete(this.#owners.keys().next().value!);
    this.#owners.set(id, { userKey, expiresAt: this.now() + Math.min(ttlMs, this.ttlMs) });
  }

  forgetToken(token: string): void {
    this.#owners.delete(digest(token));
  }

  /** After a removal every token of the user is dead upstream: none of them is anyone's any more. */
  forgetUser(userKey: number): void {
    for (const [id, owner] of this.#owners) if (owner.userKey === userKey) this.#owners.delete(id);
  }
}
