/**
 * A horizontal bar chart of labelled values (the top media by a metric),
 * fitted to a width: the label column gives way first (cut with an
 * ellipsis), the bars get what is left, in eighths of a cell.
 *
 * No well-kept package draws these (the candidates are unmaintained and
 * bring old chalk copies), and a bar is one repeated character and one
 * partial block, so this stays here; the line charts come from asciichart.
 */
import type { ChalkInstance } from 'chalk';
import { textWidth, truncateToWidth } from '../render/text-width.js';
import { compactNumber } from './numbers.js';

interface Bar {
  label: string;
  /** A note after the label, dimmed: the media type. */
  note?: string | undefined;
  value: number | undefined;
}

export interface BarChartOptions {
  title: string;
  bars: readonly Bar[];
  width: number;
  color: ChalkInstance;
}

const EIGHTHS = ['', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
/** The narrowest bar column worth drawing, and the widest a label column gets of a wide terminal. */
const MIN_BAR = 10;
const MAX_LABEL = 60;

function bar(value: number, max: number, cells: number): string {
  if (max <= 0 || value <= 0) return '';
  const eighths = Math.max(1, Math.round((value / max) * cells * 8));
  return '█'.repeat(Math.floor(eighths / 8)) + EIGHTHS[eighths % 8];
}

export function barChart({ title, bars, width, color }: BarChartOptions): string[] {
  const usable = Math.max(MIN_BAR + 12, width - 1);
  const lines = [textWidth(title) > usable ? color.bold(truncateToWidth(title, usable)) : color.bold(title)];
  if (bars.length === 0) return [...lines, color.dim('(no media to chart)')];
  const heads = bars.map((b) => ({ label: b.label.replace(/\s+/g, ' ').trim(), note: b.note ? ` ${b.note}` : '' }));
  const values = bars.map((b) => (b.value === undefined || !Number.isFinite(b.value) ? undefined : b.value));
  const numbers = values.map((v) => (v === undefined ? '-' : compactNumber(v)));
  const numberWidth = Math.max(...numbers.map((n) => n.length));
  const max = Math.max(0, ...values.map((v) => v ?? 0));
  const wanted = Math.max(...heads.map((h) => textWidth(h.label + h.note)));
  // Label, a space, the bar, a space, the number.
  // The label column takes at most 45 % of the width: the bars are the point.
  const labelWidth = Math.max(8, Math.min(wanted, MAX_LABEL, Math.floor(usable * 0.45), usable - MIN_BAR - numberWidth - 2));
  const barCells = Math.max(1, usable - labelWidth - numberWidth - 2);
  heads.forEach((head, i) => {
    const noteWidth = textWidth(head.note);
    const roomForLabel = Math.max(1, labelWidth - noteWidth);
    const label = textWidth(head.label) > roomForLabel ? truncateToWidth(head.label, roomForLabel) : head.label;
    const pad = ' '.repeat(Math.max(0, labelWidth - textWidth(label) - noteWidth));
    const drawn = bar(values[i] ?? 0, max, barCells);
    const fill = ' '.repeat(Math.max(0, barCells - textWidth(drawn)));
    lines.push(`${label}${color.dim(head.note)}${pad} ${color.cyan(drawn)}${fill} ${numbers[i]!.padStart(numberWidth)}`.trimEnd());
  });
  return lines;
}
