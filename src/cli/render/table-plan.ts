/**
 * Which columns of a terminal table are shown, and how wide. IDs, states,
 * numbers and times are never cut (a cut `P…` reads as PAID and as
 * PAYMENT_FAILED alike, a cut id cannot be copied): text columns (captions,
 * names, URLs, messages) give way first, down to their minimum; columns
 * with nothing in them are left out; and when whole values still do not
 * fit, whole columns are left out, in the order the table gives, and named
 * (as kubectl leaves out what `-o wide` shows). Only a terminal too narrow
 * for the columns that are never left out gets cut cells again.
 */
import { fitColumns, tableChrome, type ColumnFit } from './column-fit.js';

export interface PlannedColumn extends ColumnFit {
  /** Cut with an ellipsis when the table is too wide (captions, URLs); else shown whole or left out. */
  text: boolean;
  /** Left out when whole values do not fit: the highest first, the rightmost of equals first; negative: never. */
  drop: number;
  /** No cell below the header has anything in it. */
  empty: boolean;
}

export interface TablePlan {
  /** The columns shown, by their index in the table, in order. */
  shown: number[];
  /** The width of each shown column. */
  widths: number[];
  /** Columns with values that were left out to fit (empty ones are not named). */
  omitted: number[];
}

/** The narrowest a column may be: whole for IDs, states and numbers; its floor for text. */
function narrowest(column: PlannedColumn): number {
  const whole = Math.max(1, column.header, column.data);
  if (!column.text) return whole;
  return Math.min(whole, column.minWidth ?? Math.max(8, Math.min(column.header, column.data)));
}

export function planTable(columns: readonly PlannedColumn[], width: number): TablePlan {
  // The first column names the row; an empty one stays when it is the only one.
  let shown = columns.map((_, i) => i).filter((i) => i === 0 || !columns[i]!.empty);
  const omitted: number[] = [];
  const needed = (set: number[]) => set.reduce((sum, i) => sum + narrowest(columns[i]!), 0) + tableChrome(set.length);
  while (needed(shown) > width) {
    let victim = -1;
    for (const i of shown) {
      const drop = columns[i]!.drop;
      if (i === 0 || drop < 0) continue;
      if (victim < 0 || drop >= columns[victim]!.drop) victim = i;
    }
    if (victim < 0) break;
    shown = shown.filter((i) => i !== victim);
    omitted.push(victim);
  }
  // Whole columns do not shrink (shrink below 0 keeps them until the last pass, which only a terminal too narrow for
  // the never-dropped columns reaches); text columns shrink to their floor first, as fitColumns does.
  const fits = shown.map((i) => {
    const c = columns[i]!;
    return { header: c.header, data: c.data, shrink: c.text ? Math.max(1, c.shrink) : i === 0 ? -2 : -1, minWidth: c.minWidth };
  });
  return { shown, widths: fitColumns(fits, width), omitted: omitted.sort((a, b) => a - b) };
}
