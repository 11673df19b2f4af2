/**
 * What happened in the sandbox, for the host page's log: users created,
 * codes issued and exchanged, tokens refreshed, connections removed,
 * callbacks sent, appLogin() calls that failed. Kept in memory, the most
 * recent JOURNAL_CAPACITY entries; read by sequence number, so a page that
 * polls gets each entry once. Codes and tokens appear shortened, never whole.
 */

export type JournalKind =
  | 'user-created'
  | 'code-issued'
  | 'code-exchanged'
  | 'exchange-refused'
  | 'token-refreshed'
  | 'user-info-read'
  | 'connection-removed'
  | 'callback'
  | 'app-login-failed';

export interface JournalEntry {
  seq: number;
  /** ISO time on the sandbox clock. */
  at: string;
  kind: JournalKind;
  userKey: number | null;
  text: string;
  /** False for what went wrong (a refused exchange, a failed callback, a rejected appLogin()). */
  ok: boolean;
}

const JOURNAL_CAPACITY = 500;

/** The first characters of a code or token, enough to tell them apart in a log and never enough to use. */
export function shortened(secret: string): string {
  return secret.length <= 12 ? '…' : `${secret.slice(0, 9)}…`;
}

export class Journal {
  readonly #entries: JournalEntry[] = [];
  #seq = 0;

  constructor(
    private readonly now: () => number,
    private readonly capacity = JOURNAL_CAPACITY,
  ) {}

  add(kind: JournalKind, userKey: number | null, text: string, ok = true): JournalEntry {
    const entry = { seq: ++this.#seq, at: new Date(this.now()).toISOString(), kind, userKey, text, ok };
    this.#entries.push(entry);
    if (this.#entries.length > this.capacity) this.#entries.splice(0, this.#entries.length - this.capacity);
    return entry;
  }

  /** The entries after `seq`, oldest first. */
  since(seq: number): JournalEntry[] {
    return this.#entries.filter((entry) => entry.seq > seq);
  }

  get last(): number {
    return this.#seq;
  }
}
