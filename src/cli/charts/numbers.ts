/**
 * Numbers and dates as chart labels: short enough for an axis (1.2k,
 * 3.4M), and the same in the terminal and in the HTML report.
 */

const UNITS: readonly [number, string][] = [
  [1e12, 'T'],
  [1e9, 'B'],
  [1e6, 'M'],
  [1e3, 'k'],
];

/** 950, 1.2k, 12k, 3.4M: at most one decimal, none from two digits on; small fractions keep two. */
export function compactNumber(value: number): string {
  if (!Number.isFinite(value)) return '';
  const sign = value < 0 ? '-' : '';
  const size = Math.abs(value);
  for (const [unit, suffix] of UNITS) {
    // 999_950 rounds to 1000.0k: that is 1.0M.
    if (size >= unit * 0.99995) return `${sign}${trim((size / unit).toFixed(size / unit >= 9.995 ? 0 : 1))}${suffix}`;
  }
  if (Number.isInteger(size) || size >= 100) return `${sign}${Math.round(size)}`;
  return `${sign}${trim(size.toFixed(size >= 10 ? 1 : 2))}`;
}

function trim(text: string): string {
  return text.includes('.') ? text.replace(/\.?0+$/, '') : text;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** `2026-11-21` as `Nov 21`: what an axis under a month or two of days needs. */
export function shortDate(isoDate: string): string {
  const match = /^(\d{4})-(\d{2})-(\d{2})/.exec(isoDate);
  if (!match) return isoDate;
  return `${MONTHS[Number(match[2]) - 1] ?? match[2]} ${Number(match[3])}`;
}
