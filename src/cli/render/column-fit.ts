/**
 * The widths of a terminal table's columns that fit a width: which column
 * gives way first, and how far (see fitColumns). table-plan.ts decides
 * first which columns are shown at all.
 */

/** The cells of padding and border that a table adds: `│ ` before each cell, ` ` after it, and the closing `│`. */
export function tableChrome(columns: number): number {
  return columns * 3 + 1;
}

export interface ColumnFit {
  header: number;
  /** The widest cell below the header. */
  data: number;
  shrink: number;
  minWidth?: number | undefined;
}

/** What a column is cut to before the next priority gives way, unless its header is wider (and its cells are too). */
const DEFAULT_MIN_WIDTH = 8;

/** The header stays whole, unless it alone makes the column wide (comments_count over two-digit counts). */
function floorOf(column: ColumnFit): number {
  return Math.min(Math.max(column.header, column.data), column.minWidth ?? Math.max(DEFAULT_MIN_WIDTH, Math.min(column.header, column.data)));
}

/**
 * The width of each column so that the table, borders included, fits in
 * `width` cells: the highest `shrink` first, the widest column of a
 * priority first (so two long columns end up alike rather than one gone),
 * each down to its minimum; then, if that is not enough, in the same order
 * down to one cell. Only a terminal narrower than the borders themselves
 * leaves the table wider than asked.
 */
export function fitColumns(columns: readonly ColumnFit[], width: number): number[] {
  const widths = columns.map((c) => Math.max(1, c.header, c.data));
  let over = widths.reduce((sum, w) => sum + w, 0) + tableChrome(columns.length) - width;
  const squeeze = (members: number[], floor: (i: number) => number) => {
    while (over > 0) {
      let widest = -1;
      for (const i of members) if (widths[i]! > floor(i) && (widest < 0 || widths[i]! > widths[widest]!)) widest = i;
      if (widest < 0) return;
      widths[widest]!--;
      over--;
    }
  };
  const groups = [...new Set(columns.map((c) => c.shrink))]
    .sort((a, b) => b - a)
    .map((priority) => columns.flatMap((c, i) => (c.shrink === priority ? [i] : [])));
  // A negative priority (the first column by default) is cut only once every other column is down to an ellipsis.
  for (const members of groups) if (columns[members[0]!]!.shrink >= 0) squeeze(members, (i) => floorOf(columns[i]!));
  // Still too wide: the same order again, down to an ellipsis, so that the row's name and state outlast its text.
  for (const members of groups) squeeze(members, () => 1);
  return widths;
}
