/**
 * Values that hold while the posts are unchanged: the serialised answers of
 * the post lists (keyed on the request: host and URL, which hold every filter
 * and the page, since next/previous are absolute) and the counts of a filter.
 * Each entry carries the posts' version, so any write makes every entry
 * stale. Bounded, least recently used out first.
 *
 * With `admitOnSecondRequest`, a value is kept only for a key that was
 * already asked for under the same version (a doorkeeper of keys alone, as
 * TinyLFU's): an answer that nobody asks for twice (a crawler walking every
 * filter, a URL with a parameter of its own) is never kept. Keeping it is
 * what costs: each kept answer outlives the young generation, and the
 * garbage collector copies and later sweeps every one, which doubled the
 * work of an uncached list request while it bought nothing.
 */
export class ListCache<T = string> {
  readonly #entries = new Map<string, { version: string; body: T }>();
  /** Keys asked for once, and under which version (admitOnSecondRequest only). */
  readonly #seen: Map<string, string> | undefined;

  constructor(
    private readonly capacity = 512,
    options: { admitOnSecondRequest?: boolean } = {},
  ) {
    this.#seen = options.admitOnSecondRequest ? new Map() : undefined;
  }

  /** Whether anything is kept for `key`, under any version (a value asked for once only is not). */
  has(key: string): boolean {
    return this.#entries.has(key);
  }

  get(key: string, version: string): T | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    this.#entries.delete(key);
    if (entry.version !== version) return undefined;
    this.#entries.set(key, entry);
    return entry.body;
  }

  /** Keeps `body` (made by it when a function, and only if kept) for `key` under `version`. */
  set(key: string, version: string, body: T | (() => T)): void {
    if (this.#seen && !this.#admit(key, version)) return;
    this.#entries.delete(key);
    this.#entries.set(key, { version, body: typeof body === 'function' ? (body as () => T)() : body });
    if (this.#entries.size > this.capacity) this.#entries.delete(this.#entries.keys().next().value!);
  }

  /** Whether `key` was asked for before under `version`; remembers it otherwise. */
  #admit(key: string, version: string): boolean {
    const seen = this.#seen!;
    if (seen.get(key) === version) {
      seen.delete(key);
      return true;
    }
    seen.delete(key);
    seen.set(key, version);
    if (seen.size > this.capacity * 8) seen.delete(seen.keys().next().value!);
    return false;
  }
}
