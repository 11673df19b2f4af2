/**
 * The cell measure of tables and progress lines (text-width.ts, on
 * string-width), loaded only when a terminal will show something, so that
 * piped and --json runs never pay for it.
 */
import type * as TextWidth from './text-width.js';

let loaded: typeof TextWidth | undefined;

export async function loadTextWidths(): Promise<void> {
  loaded ??= await import('./text-width.js');
}

export function textWidths(): typeof TextWidth {
  if (!loaded) throw new Error('text widths used before they were loaded (createOutput loads them for a terminal)');
  return loaded;
}
