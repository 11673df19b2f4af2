/**
 * All rendering goes through here: what goes to stdout (data) and stderr
 * (spinners, warnings, errors), the colour policy, and the three output
 * modes: a table on a TTY, tab-separated rows when piped, exact JSON with
 * `--json` (plus CSV where a command offers it).
 *
 * Heavy renderers (csv-stringify, ora) load on first use, and
 * chalk only when some stream will show colour, so that quick paths such as
 * `miniapp decrypt --json | jq` never pay for them.
 */
import { printable } from './printable.js';
import { createRequire } from 'node:module';
import type { ChalkInstance } from 'chalk';
import { resolveColorLevel, type ColorLevel } from './color.js';
import { ProgressLine, type ProgressOptions } from './progress.js';
import { loadTextWidths, textWidths } from './cells.js';
import { planTable } from './table-plan.js';

export { fitColumns, tableChrome } from './column-fit.js';
import type { Io, OutStream } from './streams.js';

export interface Column<Row> {
  /** Header on a TTY and in CSV. */
  header: string;
  /** How to read the cell from a row. */
  value: (row: Row) => unknown;
  /** Cut longer cells on a TTY (never in TSV, CSV or JSON), even when the terminal has room. */
  maxWidth?: number;
  /**
   * Which text columns give way when a table is wider than the terminal: the
   * highest first (captions, then URLs and messages), each cut to its
   * `minWidth` with an ellipsis before the next is touched. A column with a
   * `maxWidth` is text by its own account (default 1). Columns without a
   * shrink (IDs, states, numbers, times) are never cut: they are shown
   * whole or left out (see `drop`).
   */
  shrink?: number;
  /** The narrowest a shrinking column becomes before the next one gives way (default: 8, or its header when wider). */
  minWidth?: number;
  /**
   * Where a text cell too wide for its column is cut: at the end (default),
   * in the middle when its end matters as much, or not at all: `wrap` breaks
   * it between words onto the row's next lines (a command to copy, a path).
   */
  cut?: 'end' | 'middle' | 'wrap';
  /**
   * When whole values do not fit, columns are left out (and named on
   * stderr): the highest `drop` first, the rightmost of equals first.
   * Default: a text column's shrink, else 0; negative: never left out (the
   * first column, which names the row, never is).
   */
  drop?: number;
  /**
   * The tool's own colour of a cell (a status in green or red), applied on a
   * terminal after the cell's text is made printable, cut and measured: the
   * text stays others' (escaped), the colour stays ours (obeyed). Cells never
   * carry colour codes in their text, which would be escaped as anyone's.
   */
  style?: (row: Row) => ((text: string) => string) | undefined;
}

export interface Spinner {
  text(message: string): void;
  succeed(message?: string): void;
  fail(message?: string): void;
  stop(): void;
}

const noSpinner: Spinner = { text() {}, succeed() {}, fail() {}, stop() {} };

const requireCjs = createRequire(import.meta.url);

/** `eyJh...9x2Q`: enough to recognise a secret, never enough to use it. */
export function maskSecret(value: string): string {
  const compact = value.trim();
  if (compact.length < 16) return '****';
  return `${compact.slice(0, 4)}...${compact.slice(-4)}`;
}

/** Renders any cell value as one line of text. */
function cellText(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (value instanceof Date) return value.toISOString();
  return JSON.stringify(value);
}

/** `text` in lines of at most `width` cells, broken between words (a word longer than a line stays whole). */
function wrapWords(text: string, width: number): string[] {
  const lines: string[] = [];
  let current = '';
  for (const word of text.split(' ')) {
    if (current && current.length + 1 + word.length > width) {
      lines.push(current);
      current = word;
    } else current = current ? `${current} ${word}` : word;
  }
  if (current) lines.push(current);
  return lines;
}

/** A cell's text in lines of at most `width` cells, broken between words; a word wider than that is broken where it must. */
function wrapCell(text: string, width: number, measure: (text: string) => number): string[] {
  const lines: string[] = [];
  let current = '';
  for (const word of text.split(' ')) {
    const joined = current ? `${current} ${word}` : word;
    if (measure(joined) <= width) {
      current = joined;
      continue;
    }
    if (current) lines.push(current);
    current = word;
    while (measure(current) > width) {
      let at = width;
      while (at > 1 && measure(current.slice(0, at)) > width) at--;
      lines.push(current.slice(0, at));
      current = current.slice(at);
    }
  }
  lines.push(current);
  return lines;
}

/** A cell's text on one line, with no control character left to act on the terminal (printable.ts). */
function oneLine(text: string): string {
  return printable(text.replace(/[\t\r\n]+/g, ' '));
}

export interface OutputOptions {
  json: boolean;
  noColor: boolean;
  /** `--color`: colours even where they would be off (piped, NO_COLOR). */
  forceColor?: boolean | undefined;
  env: Readonly<Record<string, string | undefined>>;
}

/** Styles nothing: what chalk does at level 0, without loading chalk. */
const plain: ChalkInstance = new Proxy(((...text: unknown[]) => text.join(' ')) as unknown as ChalkInstance, {
  get: (target, property) => (property === 'level' ? 0 : property in target ? Reflect.get(target, property) : plain),
});

export async function createOutput(io: Io, options: OutputOptions): Promise<Output> {
  if (io.stdout.isTTY || io.stderr.isTTY) await loadTextWidths();
  const level = (stream: OutStream): ColorLevel =>
    resolveColorLevel({ noColorFlag: options.noColor, colorFlag: options.forceColor, env: options.env, isTTY: Boolean(stream.isTTY) });
  const [outLevel, errLevel] = [level(io.stdout), level(io.stderr)];
  if (outLevel === 0 && errLevel === 0) return new Output(io, options.json, plain, plain);
  const { Chalk } = await import('chalk');
  const styler = (lvl: ColorLevel) => (lvl === 0 ? plain : new Chalk({ level: lvl }));
  return new Output(io, options.json, styler(outLevel), styler(errLevel));
}

export class Output {
  /**
   * Warnings held under --json until the command has data on stdout or ends:
   * a command that fails before then has stderr as one JSON object, its
   * `error` with these as its `warnings` (program.ts).
   */
  #held: string[] | undefined;

  constructor(
    readonly io: Io,
    readonly json: boolean,
    /** Colours for stdout. */
    readonly color: ChalkInstance,
    /** Colours for stderr. */
    readonly errColor: ChalkInstance,
  ) {
    if (json) this.#held = [];
  }

  /** The warnings held back (under --json), no longer held: for the error object of a failed command. */
  takeWarnings(): string[] {
    const held = this.#held ?? [];
    this.#held = this.json ? [] : undefined;
    return held;
  }

  /** Writes the warnings held back, and from now on each as it comes: the command has answered. */
  releaseWarnings(): void {
    const held = this.#held ?? [];
    this.#held = undefined;
    for (const message of held) this.#writeWarning(message);
  }

  #writeWarning(message: string): void {
    this.io.stderr.write(`${this.errColor.yellow('warning:')} ${message}\n`);
  }

  get isTTY(): boolean {
    return Boolean(this.io.stdout.isTTY);
  }

  /** Human-oriented output: a TTY and not `--json`. */
  get human(): boolean {
    return this.isTTY && !this.json;
  }

  /** Data on stdout exactly as given (CSV carries its own line endings). */
  write(text: string): void {
    if (this.#held) this.releaseWarnings();
    this.io.stdout.write(text);
  }

  /** One line of data on stdout. */
  line(text = ''): void {
    this.write(`${text}\n`);
  }

  /** Exact machine output: what `--json` promises. */
  printJson(value: unknown): void {
    this.write(`${JSON.stringify(value, null, 2)}\n`);
  }

  /**
   * Rows of data: a table on a TTY, tab-separated rows without a header when
   * piped, or `jsonValue` (the rows themselves by default) with `--json`.
   */
  table<Row>(rows: readonly Row[], columns: readonly Column<Row>[], jsonValue: unknown = rows): void {
    if (this.json) {
      this.printJson(jsonValue);
      return;
    }
    if (!this.isTTY) {
      for (const row of rows) this.line(columns.map((c) => oneLine(cellText(c.value(row)))).join('\t'));
      return;
    }
    if (rows.length === 0) {
      this.io.stderr.write(`${this.errColor.dim('(nothing to show)')}\n`);
      return;
    }
    const { textWidth, truncateMiddle, truncateToWidth } = textWidths();
    const cells = rows.map((row) =>
      columns.map((c) => {
        const text = oneLine(cellText(c.value(row)));
        return c.maxWidth === undefined ? text : truncateToWidth(text, c.maxWidth);
      }),
    );
    const shrinks = columns.map((c) => c.shrink ?? (c.maxWidth !== undefined ? 1 : 0));
    const width = this.io.stdout.columns || 80;
    // A terminal that reports no width (0: script, some CI pseudo-terminals) is taken as 80 wide, as gh does.
    const plan = planTable(
      columns.map((c, i) => ({
        header: textWidth(c.header),
        data: cells.reduce((widest, r) => Math.max(widest, textWidth(r[i]!)), 0),
        shrink: shrinks[i]!,
        minWidth: c.minWidth,
        text: shrinks[i]! > 0,
        drop: c.drop ?? shrinks[i]!,
        empty: cells.every((r) => r[i] === ''),
      })),
      width,
    );
    const widths = plan.widths;
    const pick = <T>(all: readonly T[]) => plan.shown.map((i) => all[i]!);
    // Drawn here rather than by cli-table3, whose string-width counts some emoji (ZWJ sequences, flags) otherwise than
    // the cut above did: one measure for cutting and padding keeps the borders straight.
    const rule = (left: string, middle: string, right: string) => `${left}${widths.map((w) => '─'.repeat(w + 2)).join(middle)}${right}`;
    const shownColumns = pick(columns);
    const cutters = shownColumns.map((c) => (c.cut === 'middle' ? truncateMiddle : truncateToWidth));
    const unstyled = (text: string) => text;
    const line = (texts: readonly string[], styles: readonly ((text: string) => string)[]) =>
      `│${texts
        .map((text, i) => {
          const cut = cutters[i]!(text, widths[i]!);
          return ` ${styles[i]!(cut)}${' '.repeat(Math.max(0, widths[i]! - textWidth(cut)))} `;
        })
        .join('│')}│`;
    // A row is a line, or more where a wrapping column's cell takes more; the other cells stay on its first line.
    const rowLines = (texts: readonly string[], styles: readonly ((text: string) => string)[]) => {
      const parts = texts.map((text, i) => (shownColumns[i]!.cut === 'wrap' ? wrapCell(text, widths[i]!, textWidth) : [text]));
      const height = Math.max(...parts.map((p) => p.length));
      return Array.from({ length: height }, (_, k) =>
        line(
          parts.map((p) => p[k] ?? ''),
          styles,
        ),
      );
    };
    const lines = [
      rule('┌', '┬', '┐'),
      line(
        shownColumns.map((c) => c.header),
        shownColumns.map(() => (header: string) => this.color.bold(header)),
      ),
      // No rule between rows: compact, like `gh` and `kubectl` listings.
      ...cells.flatMap((row, r) =>
        rowLines(
          pick(row),
          shownColumns.map((c) => c.style?.(rows[r]!) ?? unstyled),
        ),
      ),
      rule('└', '┴', '┘'),
    ];
    this.line(lines.join('\n'));
    if (plan.omitted.length > 0) {
      const names = plan.omitted.map((i) => columns[i]!.header);
      const note = `(not shown at ${width} columns: ${names.join(', ')}; a wider terminal or --json shows ${names.length === 1 ? 'it' : 'them'})`;
      for (const part of wrapWords(note, width)) this.io.stderr.write(`${this.errColor.dim(part)}\n`);
    }
  }

  /**
   * One object as field/value pairs: a two-column table on a TTY (or, when
   * the table would cut a value, `field  value` lines with every value
   * whole), `field<TAB>value` lines when piped, `jsonValue` with `--json`.
   */
  record(pairs: readonly (readonly [string, unknown])[], jsonValue: unknown): void {
    if (this.human && pairs.length > 0) {
      // A value is copied off the screen (a CI, a token, a URL): never cut. When the table would cut one, the pairs
      // are lines of `field  value` instead, each value whole, wrapped by the terminal (a soft wrap copies as one line).
      const { textWidth } = textWidths();
      const fields = pairs.map(([field]) => oneLine(field));
      const values = pairs.map(([, value]) => oneLine(cellText(value)));
      const fieldWidth = Math.max(textWidth('field'), ...fields.map(textWidth));
      const valueWidth = Math.max(textWidth('value'), ...values.map(textWidth));
      // │ field │ value │: the two cells, their padding and three borders.
      if (fieldWidth + valueWidth + 7 > (this.io.stdout.columns || 80)) {
        const lines = fields.map((field, i) => `${this.color.bold(field)}${' '.repeat(fieldWidth - textWidth(field))}  ${values[i]}`);
        this.line(lines.join('\n'));
        return;
      }
    }
    this.table(
      pairs,
      [
        { header: 'field', value: ([field]) => field },
        { header: 'value', value: ([, value]) => value, shrink: 1, drop: -1 },
      ],
      jsonValue,
    );
  }

  /** RFC 4180 CSV with a header row. */
  csv<Row>(rows: readonly Row[], columns: readonly Column<Row>[]): string {
    const { stringify } = requireCjs('csv-stringify/sync') as typeof import('csv-stringify/sync');
    return stringify(
      rows.map((row) => columns.map((c) => cellText(c.value(row)))),
      { header: true, columns: columns.map((c) => c.header), record_delimiter: 'windows' },
    );
  }

  /** A remark for the person at the terminal; stderr, so pipes stay clean. */
  info(message: string): void {
    this.io.stderr.write(`${message}\n`);
  }

  /**
   * A dim note for the person at the terminal, broken between words at the
   * width of stderr; `command`, when given, follows it whole (on a line of
   * its own, indented, when the two do not fit on one), so that it is copied
   * as it must be typed.
   */
  note(text: string, command?: string): void {
    const width = (this.io.stderr.columns || 80) - 1;
    const whole = command === undefined ? text : `${text} ${command}`;
    const { textWidth } = this.io.stderr.isTTY ? textWidths() : { textWidth: (t: string) => t.length };
    const lines = textWidth(whole) <= width ? [whole] : [...wrapWords(text, width), ...(command === undefined ? [] : [`  ${command}`])];
    for (const line of lines) this.io.stderr.write(`${this.errColor.dim(line)}\n`);
  }

  warn(message: string): void {
    if (this.#held) this.#held.push(message);
    else this.#writeWarning(message);
  }

  success(message: string): void {
    this.io.stderr.write(`${this.errColor.green('✓')} ${message}\n`);
  }

  /** A progress line on stderr; it draws only on a terminal that reports its width, and never under `--json`. */
  progress(options: ProgressOptions): ProgressLine {
    return new ProgressLine(this.io.stderr, !this.json && Boolean(this.io.stderr.isTTY) && Boolean(this.io.stderr.columns), options);
  }

  /**
   * Spinners only when stderr is a TTY and never under `--json`. A terminal
   * that reports no width (0 columns: `script`, some CI pseudo-terminals)
   * gets none either: ora divides by the width to know what to redraw, and
   * with 0 it clears lines without end.
   */
  async spinner(text: string): Promise<Spinner> {
    if (this.json || !this.io.stderr.isTTY || !this.io.stderr.columns) return noSpinner;
    const { default: ora } = await import('ora');
    const spinner = ora({
      text,
      stream: this.io.stderr as NodeJS.WritableStream,
      isEnabled: true,
      color: 'cyan',
      // Commands may read stdin themselves (decrypt, bulk-create, chat).
      discardStdin: false,
    }).start();
    return {
      text: (message) => {
        spinner.text = message;
      },
      succeed: (message) => void spinner.succeed(message),
      fail: (message) => void spinner.fail(message),
      stop: () => void spinner.stop(),
    };
  }
}
