/**
 * Values that hold while the posts are unchanged: the serialised answers of
 * the post lists (keyed on the request: host and URL, which hold every filter
 * and the page, since next/previous are absolute) and the counts of a filter.
 * Each entry carries the posts' version, so any write makes every entry
 * stale. Bounded, least recently used out first.
 */
export class ListCache<T = string> {
  readonly #entries = new Map<string, { version: string; body: T }>();

  constructor(private readonly capacity = 512) {}

  get(key: string, version: string): T | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    this.#entries.delete(key);
    if (entry.version !== version) return undefined;
    this.#entries.set(key, entry);
    return entry.body;
  }

  set(key: string, version: string, body: T): void {
    this.#entries.delete(key);
    this.#entries.set(key, { version, body });
    if (this.#entries.size > this.capacity) this.#entries.delete(this.#entries.keys().next().value!);
  }
}
