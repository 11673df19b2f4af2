/**
 * What a long stream may do follows its token as things are now, not as
 * they were when the stream opened. Each open stream holds a grant: its
 * token and the principal it had. The grant is checked again (the token
 * looked up, as for a new call) when something may have changed it:
 *
 * - its user changed: deactivated, deleted (its tokens go with it) or given
 *   other roles, heard from the user change feed, on any instance's commit;
 * - its token was revoked (TOKEN_REVOKED_CHANNEL, on any instance);
 * - its token expired (a timer at the expiry);
 * - the signals reconnected (what was said meanwhile is lost: all grants).
 *
 * A grant whose token no longer authenticates is told `undefined` (the
 * stream ends UNAUTHENTICATED); one whose principal changed is told the new
 * one (the stream narrows what it sends, or ends PERMISSION_DENIED).
 */
import type { Signals } from '../store/signals.js';
import { TOKEN_REVOKED_CHANNEL, tokenHash, type Principal, type TokenService } from './tokens.js';

/** The longest a timer can wait (setTimeout's bound); an expiry past it is checked again then. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export interface Grant {
  /** The principal as last checked. */
  readonly principal: Principal;
  /** Checks the token now (before a write the stream is about to act on); undefined when it no longer authenticates. */
  recheck(): Promise<Principal | undefined>;
  release(): void;
}

interface Held {
  token: string;
  hash: string;
  principal: Principal;
  onChange: (principal: Principal | undefined) => void;
  timer: NodeJS.Timeout | undefined;
  released: boolean;
}

export interface StreamGrantsOptions {
  tokens: TokenService;
  signals: Signals;
  /** Calls the listener with the id of each user that changed; returns the function that stops it. */
  follow: (listener: (userId: number) => void) => () => void;
  now?: () => Date;
  warn?: (message: string, fields: Record<string, unknown>) => void;
}

export class StreamGrants {
  readonly #held = new Set<Held>();
  readonly #byUser = new Map<number, Set<Held>>();
  readonly #byHash = new Map<string, Set<Held>>();
  readonly #now: () => Date;
  #unsubscribe: (() => Promise<void>) | undefined;
  #unfollow: (() => void) | undefined;
  /** Grants to look at again on the next turn (#recheckAll). */
  readonly #due = new Set<Held>();
  #dueScheduled = false;

  constructor(private readonly options: StreamGrantsOptions) {
    this.#now = options.now ?? (() => new Date());
  }

  async start(): Promise<void> {
    this.#unsubscribe = await this.options.signals.subscribe(
      TOKEN_REVOKED_CHANNEL,
      (hash) => this.#recheckAll(this.#byHash.get(hash)),
      // Revocations said while the subscription was away are lost: every grant is looked at again.
      () => this.#recheckAll(this.#held),
    );
  }

  async stop(): Promise<void> {
    this.#unfollow?.();
    this.#unfollow = undefined;
    await this.#unsubscribe?.();
    for (const held of [...this.#held]) this.#release(held);
  }

  /** Open grants, for tests and metrics. */
  size(): number {
    return this.#held.size;
  }

  /**
   * Holds `token` (which authenticated as `principal`) for a stream until
   * `release`; `onChange` hears each change of what it grants.
   */
  hold(token: string, principal: Principal, onChange: (principal: Principal | undefined) => void): Grant {
    const held: Held = { token, hash: tokenHash(token), principal, onChange, timer: undefined, released: false };
    this.#held.add(held);
    add(this.#byHash, held.hash, held);
    if (principal.userId !== null) add(this.#byUser, principal.userId, held);
    this.#arm(held);
    // Changes are followed only while a grant is held: an idle serve does not read the change log for them.
    this.#unfollow ??= this.options.follow((userId) => this.#recheckAll(this.#byUser.get(userId)));
    // A change made between the token's check and this hold was fanned out before anyone followed it.
    void this.#recheck(held);
    return {
      get principal() {
        return held.principal;
      },
      recheck: () => this.#recheck(held),
      release: () => this.#release(held),
    };
  }

  #arm(held: Held): void {
    clearTimeout(held.timer);
    const expiresAt = held.principal.expiresAt;
    if (expiresAt === undefined) return;
    held.timer = setTimeout(() => void this.#recheck(held), Math.min(Math.max(expiresAt - this.#now().getTime(), 0), MAX_TIMER_MS));
    held.timer.unref();
  }

  /**
   * Looks at `grants` again, once each on the next turn of the event loop however many changes asked meanwhile:
   * the change log fans out up to a page of one user's changes at once, and each would otherwise cost every one
   * of that user's streams a token lookup.
   */
  #recheckAll(grants: Set<Held> | undefined): void {
    if (!grants || grants.size === 0) return;
    for (const held of grants) this.#due.add(held);
    if (this.#dueScheduled) return;
    this.#dueScheduled = true;
    setImmediate(() => {
      this.#dueScheduled = false;
      const due = [...this.#due];
      this.#due.clear();
      for (const held of due) if (!held.released) void this.#recheck(held);
    });
  }

  async #recheck(held: Held): Promise<Principal | undefined> {
    let principal: Principal | undefined;
    try {
      principal = await this.options.tokens.authenticate(held.token);
    } catch (error) {
      // The store cannot say now: the grant stands as it was, and the next change or call asks again.
      this.options.warn?.('cannot check the token of an open stream; it keeps what it had', { error: String(error) });
      return held.principal;
    }
    if (held.released) return principal;
    if (!principal) {
      this.#release(held);
      this.#tell(held, undefined);
      return undefined;
    }
    const changed =
      principal.isAdmin !== held.principal.isAdmin ||
      principal.username !== held.principal.username ||
      principal.roles.join('\n') !== held.principal.roles.join('\n');
    held.principal = principal;
    if (changed) this.#tell(held, principal);
    return principal;
  }

  /** Tells a stream's owner; a failure there is the owner's bug, logged, and never a crash of serve. */
  #tell(held: Held, principal: Principal | undefined): void {
    try {
      held.onChange(principal);
    } catch (error) {
      this.options.warn?.('a stream failed to follow its token', { error: String(error) });
    }
  }

  #release(held: Held): void {
    if (held.released) return;
    held.released = true;
    clearTimeout(held.timer);
    this.#held.delete(held);
    this.#due.delete(held);
    remove(this.#byHash, held.hash, held);
    if (held.principal.userId !== null) remove(this.#byUser, held.principal.userId, held);
    if (this.#held.size === 0) {
      this.#unfollow?.();
      this.#unfollow = undefined;
    }
  }
}

function add<K>(map: Map<K, Set<Held>>, key: K, held: Held): void {
  let set = map.get(key);
  if (!set) {
    set = new Set();
    map.set(key, set);
  }
  set.add(held);
}

function remove<K>(map: Map<K, Set<Held>>, key: K, held: Held): void {
  const set = map.get(key);
  if (!set) return;
  set.delete(held);
  if (set.size === 0) map.delete(key);
}
