/**
 * Where a JSON text stops being JSON, said without quoting it, and what a
 * parsed value is, said without its content. V8's own
 * messages quote the text ("Unexpected token 'a', "at_secret" is not valid
 * JSON"), which put a token, a key or a password piped in by mistake on
 * the terminal and in logs; the texts read here (a login-me response, the
 * config file) hold exactly such things.
 */

/** A JSON object: not null, not an array. */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** "a string", "an array", "null": what a JSON value is, never what it says. */
export function jsonKind(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value === 'bigint' ? 'number' : typeof value}`;
}

/** Line and column (1-based) of `offset` in `text`. */
function lineAndColumn(text: string, offset: number): string {
  let line = 1;
  let start = 0;
  for (let at = text.indexOf('\n'); at !== -1 && at < offset; at = text.indexOf('\n', at + 1)) {
    line++;
    start = at + 1;
  }
  return `line ${line}, column ${offset - start + 1}`;
}

/** Whether `text` is JSON, or a beginning of some JSON (it fails only at its end). */
function isJsonSoFar(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch (error) {
    const message = (error as Error).message;
    if (/^Unexpected end of JSON input/.test(message)) return true;
    const at = / at position (\d+)/.exec(message);
    return at !== null && Number(at[1]) >= text.length;
  }
}

/**
 * Why `JSON.parse(text)` threw `error`, as "<what is wrong> at line L,
 * column C", with no character of the text in it. Where V8 gives no position,
 * it is searched for by parsing beginnings of the text (about 20 parses);
 * `searchUpTo` bounds that search to texts of so many characters (a server's
 * answer to a body must not cost far more than the body), past which the
 * problem is said without its place.
 */
export function jsonSyntaxProblem(text: string, error: unknown, searchUpTo = Number.POSITIVE_INFINITY): string {
  const message = error instanceof Error ? error.message : String(error);
  if (/^Unexpected end of JSON input/.test(message) || text.trim() === '') return `it ends too early (${lineAndColumn(text, text.length)})`;
  const positioned = /^(.*?) in JSON at position (\d+)/.exec(message);
  if (positioned) return `${positioned[1]!.replace(/^./, (c) => c.toLowerCase())} at ${lineAndColumn(text, Number(positioned[2]))}`;
  // "Unexpected token 'x', "..." is not valid JSON" has no position: the longest beginning that is still JSON so far ends at it.
  if (text.length > searchUpTo) return 'unexpected character';
  let good = 0;
  let bad = text.length;
  while (bad - good > 1) {
    const middle = (good + bad) >>> 1;
    if (isJsonSoFar(text.slice(0, middle))) good = middle;
    else bad = middle;
  }
  return `unexpected character at ${lineAndColumn(text, good)}`;
}
