/**
 * Serialised answers of the post lists, keyed on the request (method, host,
 * URL: every filter and the page are in it, and next/previous are absolute)
 * and on the posts' version, so any write makes every entry stale. Bounded,
 * least recently used out first.
 */
export class ListCache {
  readonly #entries = new Map<string, { version: string; body: string }>();

  constructor(private readonly capacity = 512) {}

  get(key: string, version: string): string | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    this.#entries.delete(key);
    if (entry.version !== version) return undefined;
    this.#entries.set(key, entry);
    return entry.body;
  }

  set(key: string, version: string, body: string): void {
    this.#entries.delete(key);
    this.#entries.set(key, { version, body });
    if (this.#entries.size > this.capacity) this.#entries.delete(this.#entries.keys().next().value!);
  }
}
