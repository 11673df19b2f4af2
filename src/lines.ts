/**
 * Text input as numbered lines, for the parsers of line-based files (user
 * imports, sync requests) and for commands that read stdin a line at a
 * time. The numbers are the file's own, so messages can point at them.
 */

/** Lines with their 1-based numbers, decoded as UTF-8 across chunk boundaries; a leading BOM dropped. */
export async function* linesOf(source: AsyncIterable<Buffer | string>): AsyncGenerator<{ text: string; line: number }> {
  const decoder = new TextDecoder('utf-8');
  let rest = '';
  let line = 0;
  let first = true;
  const clean = (text: string) => {
    let out = text.endsWith('\r') ? text.slice(0, -1) : text;
    if (first) {
      out = out.replace(/^\uFEFF/, '');
      first = false;
    }
    return out;
  };
  const split = function* (final: boolean) {
    let start = 0;
    for (let at = rest.indexOf('\n'); at !== -1; at = rest.indexOf('\n', start)) {
      yield { text: clean(rest.slice(start, at)), line: ++line };
      start = at + 1;
    }
    rest = rest.slice(start);
    if (final && rest !== '') {
      const text = clean(rest);
      rest = '';
      yield { text, line: ++line };
    }
  };
  for await (const chunk of source) {
    rest += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    yield* split(false);
  }
  rest += decoder.decode();
  yield* split(true);
}
