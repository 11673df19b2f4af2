/**
 * Whole numbers with thousands separators ("1,234"). The formatter is made
 * on first use: building an Intl.NumberFormat initialises ICU's number
 * formatting, tens of milliseconds that a command which prints no count
 * (most of them) should not pay at start-up.
 */
let formatter: Intl.NumberFormat | undefined;

export function grouped(value: number): string {
  formatter ??= new Intl.NumberFormat('en-US');
  return formatter.format(value);
}
