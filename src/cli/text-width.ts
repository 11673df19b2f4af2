/**
 * How many terminal cells a string takes, and cutting it to a number of
 * cells. `String.length` counts UTF-16 units: a CJK character or an emoji
 * takes two cells but may count one or two units, a combining accent takes
 * none, and colour codes take none, so tables and progress lines measured
 * with it overflow or leave gaps.
 *
 * Each grapheme (Intl.Segmenter) is measured as a whole: two cells when it
 * is East Asian Wide or Fullwidth or is shown as an emoji, none when it is
 * only combining or zero-width marks, else one. Ambiguous-width characters
 * (…, ·, ─) count one, as terminals outside East Asian locales show them.
 * This agrees with the string-width that cli-table3 pads with, so a cut
 * cell and its column line up.
 */

// CSI sequences (colours, cursor moves) and OSC sequences (hyperlinks, titles).
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)/y;
// eslint-disable-next-line no-control-regex
const ANSI_GLOBAL = new RegExp(ANSI.source, 'g');

const ZERO_WIDTH = /^(?:\p{Mn}|\p{Me}|\p{Cf}|[\u200b-\u200f\u2060\ufeff]|[\u0000-\u001f\u007f-\u009f])+$/u;
const EMOJI = /\p{Emoji_Presentation}|\p{Extended_Pictographic}\ufe0f|\p{Regional_Indicator}{2}/u;

/** Ranges of East Asian Wide (W) and Fullwidth (F) code points (Unicode 15, EastAsianWidth.txt, merged). */
const WIDE: readonly (readonly [number, number])[] = [
  [0x1100, 0x115f],
  [0x231a, 0x231b],
  [0x2329, 0x232a],
  [0x23e9, 0x23ec],
  [0x23f0, 0x23f0],
  [0x23f3, 0x23f3],
  [0x25fd, 0x25fe],
  [0x2614, 0x2615],
  [0x2648, 0x2653],
  [0x267f, 0x267f],
  [0x2693, 0x2693],
  [0x26a1, 0x26a1],
  [0x26aa, 0x26ab],
  [0x26bd, 0x26be],
  [0x26c4, 0x26c5],
  [0x26ce, 0x26ce],
  [0x26d4, 0x26d4],
  [0x26ea, 0x26ea],
  [0x26f2, 0x26f3],
  [0x26f5, 0x26f5],
  [0x26fa, 0x26fa],
  [0x26fd, 0x26fd],
  [0x2705, 0x2705],
  [0x270a, 0x270b],
  [0x2728, 0x2728],
  [0x274c, 0x274c],
  [0x274e, 0x274e],
  [0x2753, 0x2755],
  [0x2757, 0x2757],
  [0x2795, 0x2797],
  [0x27b0, 0x27b0],
  [0x27bf, 0x27bf],
  [0x2b1b, 0x2b1c],
  [0x2b50, 0x2b50],
  [0x2b55, 0x2b55],
  [0x2e80, 0x303e],
  [0x3041, 0x33ff],
  [0x3400, 0x4dbf],
  [0x4e00, 0x9fff],
  [0xa000, 0xa4cf],
  [0xa960, 0xa97f],
  [0xac00, 0xd7a3],
  [0xf900, 0xfaff],
  [0xfe10, 0xfe19],
  [0xfe30, 0xfe6f],
  [0xff00, 0xff60],
  [0xffe0, 0xffe6],
  [0x16fe0, 0x16fe4],
  [0x17000, 0x18cff],
  [0x1b000, 0x1b2ff],
  [0x1f004, 0x1f004],
  [0x1f0cf, 0x1f0cf],
  [0x1f18e, 0x1f18e],
  [0x1f191, 0x1f19a],
  [0x1f200, 0x1f251],
  [0x1f300, 0x1f64f],
  [0x1f680, 0x1f6ff],
  [0x1f7e0, 0x1f7eb],
  [0x1f90c, 0x1f9ff],
  [0x1fa70, 0x1faff],
  [0x20000, 0x2fffd],
  [0x30000, 0x3fffd],
];

function isWide(codePoint: number): boolean {
  let low = 0;
  let high = WIDE.length - 1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    const [from, to] = WIDE[middle]!;
    if (codePoint < from) high = middle - 1;
    else if (codePoint > to) low = middle + 1;
    else return true;
  }
  return false;
}

let segmenter: Intl.Segmenter | undefined;

function graphemes(text: string): Iterable<string> {
  // Plain ASCII (most cells) needs no segmenter.
  if (/^[\x20-\x7e]*$/.test(text)) return text;
  segmenter ??= new Intl.Segmenter('en', { granularity: 'grapheme' });
  return Array.from(segmenter.segment(text), (s) => s.segment);
}

/** The cells one grapheme takes: 0, 1 or 2. */
function graphemeWidth(grapheme: string): number {
  if (grapheme.length === 1) {
    const code = grapheme.charCodeAt(0);
    if (code >= 0x20 && code < 0x7f) return 1;
  }
  if (ZERO_WIDTH.test(grapheme)) return 0;
  if (EMOJI.test(grapheme) || isWide(grapheme.codePointAt(0)!)) return 2;
  return 1;
}

export function stripAnsi(text: string): string {
  return text.includes('\u001b') ? text.replace(ANSI_GLOBAL, '') : text;
}

/** How many terminal cells `text` takes on one line. */
export function textWidth(text: string): number {
  let width = 0;
  for (const grapheme of graphemes(stripAnsi(text))) width += graphemeWidth(grapheme);
  return width;
}

/**
 * `text` cut to at most `width` cells, ending in `…` when cut. Colour codes
 * are kept whole (never split), and a cut coloured text is reset before the
 * ellipsis so the colour does not run on.
 */
export function truncateToWidth(text: string, width: number): string {
  if (textWidth(text) <= width) return text;
  if (width <= 0) return '';
  const room = width - 1;
  let out = '';
  let used = 0;
  let styled = false;
  let full = false;
  let run = '';
  // Copies the text before an escape sequence (or the end) while it fits.
  const copy = () => {
    for (const grapheme of graphemes(run)) {
      const cells = graphemeWidth(grapheme);
      if (used + cells > room) {
        full = true;
        break;
      }
      out += grapheme;
      used += cells;
    }
    run = '';
  };
  let index = 0;
  while (index < text.length && !full) {
    ANSI.lastIndex = index;
    const escape = text[index] === '\u001b' ? ANSI.exec(text) : null;
    if (!escape) {
      run += text[index];
      index++;
      continue;
    }
    copy();
    if (full) break;
    out += escape[0];
    styled = true;
    index += escape[0].length;
  }
  if (!full) copy();
  return `${out}${styled ? '\u001b[0m' : ''}…`;
}
