/**
 * The next and previous links of a post list: the request's own path and
 * query with another `page`, as the WHATWG URL parser and URLSearchParams
 * write them (`new URL(url, base)`, `searchParams.set('page', n)`,
 * `pathname + search`). Every list answer has one or two, so the common
 * URL (a plain path and plain `name=value` pairs) is rewritten as text;
 * anything else goes through the parser. test/blog/page-links.test.ts holds
 * the two to the same answers.
 */

/** A path the URL parser gives back as it is: no dot segments, escapes or backslashes, and not `//host`. */
const PLAIN_PATH = /^\/(?!\/)[\w/-]*$/;
/**
 * `name=value` pairs of characters the form encoding never escapes, each
 * with exactly one `=` and none empty: URLSearchParams parses and writes
 * each of them back unchanged.
 */
const PLAIN_QUERY = /^[\w*.-]*=[\w*.-]*(?:&[\w*.-]*=[\w*.-]*)*$/;

/** The cursor parameters of a link; a link carries at most one, and never one of the request it is made from. */
const CURSORS = ['after', 'before'] as const;

/**
 * `url` (a request target: path and query) with its `page` parameter set to
 * `page`, its cursor parameters (`after`, `before`) removed, and `cursor`'s
 * added last. A cursor is base64url, which the form encoding leaves as it is.
 */
export function withPage(url: string, page: number, cursor: { after?: string; before?: string } = {}): string {
  const mark = url.indexOf('?');
  const path = mark === -1 ? url : url.slice(0, mark);
  const query = mark === -1 ? '' : url.slice(mark + 1);
  const added = CURSORS.filter((name) => cursor[name] !== undefined).map((name) => `${name}=${cursor[name]}`);
  if (PLAIN_PATH.test(path) && (query === '' || PLAIN_QUERY.test(query)) && added.every((pair) => PLAIN_QUERY.test(pair))) {
    // URLSearchParams.set: the first `page` pair takes the value and any later one goes; without one, it is appended.
    const pairs = query === '' ? [] : query.split('&');
    const out: string[] = [];
    let set = false;
    for (const pair of pairs) {
      if (pair.startsWith('after=') || pair.startsWith('before=')) continue;
      if (!pair.startsWith('page=')) out.push(pair);
      else if (!set) {
        out.push(`page=${page}`);
        set = true;
      }
    }
    if (!set) out.push(`page=${page}`);
    out.push(...added);
    return `${path}?${out.join('&')}`;
  }
  const parsed = new URL(url, 'http://relative.invalid');
  parsed.searchParams.set('page', String(page));
  for (const name of CURSORS) parsed.searchParams.delete(name);
  for (const name of CURSORS) if (cursor[name] !== undefined) parsed.searchParams.append(name, cursor[name]);
  return `${parsed.pathname}${parsed.search}`;
}
