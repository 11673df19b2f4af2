/**
 * How many terminal cells a string takes, and cutting it to a number of
 * cells. `String.length` counts UTF-16 units: a CJK character or an emoji
 * takes two cells but may count one or two units, a combining accent takes
 * none, and colour codes take none, so tables and progress lines measured
 * with it overflow or leave gaps. string-width measures (by grapheme: East
 * Asian Wide/Fullwidth and emoji two cells, marks none, colour codes none);
 * the cut walks graphemes with the same measure, so it never splits a wide
 * character or a colour code and never overshoots (cli-truncate does, by a
 * cell, on wide characters).
 */
import stringWidth from 'string-width';
import { stripVTControlCharacters } from 'node:util';

// CSI sequences (colours, cursor moves) and OSC sequences (hyperlinks, titles).
const ANSI = /\u001b\[[0-9;?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)/y;
const segmenter = new Intl.Segmenter();

export function stripAnsi(text: string): string {
  return stripVTControlCharacters(text);
}

/** How many terminal cells `text` takes on one line. */
export function textWidth(text: string): number {
  return stringWidth(text);
}

/**
 * `text` cut to at most `width` cells, ending in `…` when cut. Colour codes
 * are kept whole, and a cut coloured text is reset before the ellipsis so
 * the colour does not run on.
 */
export function truncateToWidth(text: string, width: number): string {
  if (stringWidth(text) <= width) return text;
  if (width <= 0) return '';
  const room = width - 1;
  let out = '';
  let used = 0;
  let styled = false;
  let full = false;
  let run = '';
  // Copies the text before an escape sequence (or the end) while it fits.
  const copy = () => {
    for (const { segment } of segmenter.segment(run)) {
      const cells = stringWidth(segment);
      if (used + cells > room) {
        full = true;
        break;
      }
      out += segment;
      used += cells;
    }
    run = '';
  };
  let index = 0;
  while (index < text.length && !full) {
    ANSI.lastIndex = index;
    const sequence = text[index] === '\u001b' ? ANSI.exec(text) : null;
    if (!sequence) {
      run += text[index];
      index++;
      continue;
    }
    copy();
    if (full) break;
    out += sequence[0];
    styled = true;
    index += sequence[0].length;
  }
  if (!full) copy();
  return `${out}${styled ? '\u001b[0m' : ''}…`;
}

/**
 * `text` cut to at most `width` cells in the middle, `start…end`, when the
 * end says as much as the start (a path, a detail that ends in its verdict).
 * Text with colour codes is cut at the end instead, by truncateToWidth.
 */
export function truncateMiddle(text: string, width: number): string {
  if (stringWidth(text) <= width) return text;
  if (width <= 2 || text.includes('\u001b')) return truncateToWidth(text, width);
  const graphemes = [...segmenter.segment(text)].map(({ segment }) => segment);
  const room = width - 1;
  const headRoom = Math.ceil(room / 2);
  let head = '';
  let used = 0;
  for (const g of graphemes) {
    const cells = stringWidth(g);
    if (used + cells > headRoom) break;
    head += g;
    used += cells;
  }
  let tail = '';
  let tailUsed = 0;
  for (let i = graphemes.length - 1; i >= 0; i--) {
    const cells = stringWidth(graphemes[i]!);
    if (used + tailUsed + cells > room) break;
    tail = graphemes[i]! + tail;
    tailUsed += cells;
  }
  return `${head}…${tail}`;
}
