/**
 * What is made at its first use and kept: `make` runs at the first call,
 * every later call gets the same promise; a make that failed is tried
 * again at the next call rather than failing every call after it.
 */
export function lazyOnce<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () =>
    (made ??= make().catch((error: unknown) => {
      made = undefined;
      throw error;
    }));
}
