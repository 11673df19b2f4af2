/**
 * The progress line of a long job, on stderr, for a person at a terminal:
 *
 *   rows 1,234/3,000 (41%) · created 1,200 · failed 34 · 412/s · 4s left
 *
 * What is counted is what really happened (rows read, answers received),
 * with the total where it is known (a file's size or row count, not stdin)
 * and the time left from the rate so far. Redrawn in place at most every
 * 100 ms, cut to the terminal's width; lines the job prints meanwhile go
 * above it. Without a terminal (piped, CI, --json) it draws nothing, so
 * scripts see only the job's own output.
 */
import type { OutStream } from './streams.js';
import { formatDuration } from '../../duration.js';
import { textWidths } from './cells.js';
import { grouped } from './grouped.js';

export interface ProgressOptions {
  /** What is counted: "rows", "pages", "deliveries". */
  unit: string;
  /** How many there are, when known. */
  total?: number | undefined;
  /** Words before the counts ("importing users.csv"). */
  label?: string | undefined;
  /** Clock (tests). */
  now?: () => number;
}

export interface ProgressState {
  /** How many of `unit` are done. */
  done: number;
  /** Further counts, shown in order: { created: 1200, failed: 34 }. */
  counts?: Record<string, number>;
  /**
   * Why the job is not moving just now ("rate limited; retry 1 of 3 in 42s"):
   * shown in place of the rate and the time left, which a wait makes wrong,
   * and before anything the terminal's width would cut.
   */
  note?: string | undefined;
}

const REDRAW_MS = 100;

export class ProgressLine {
  readonly #stream: OutStream & { columns?: number };
  readonly #live: boolean;
  readonly #options: ProgressOptions;
  readonly #now: () => number;
  readonly #started: number;
  #state: ProgressState = { done: 0 };
  #drawnAt = 0;
  #shown = false;

  /** `live`: whether to draw at all (a terminal on stderr that reports a width, and not --json). */
  constructor(stream: OutStream & { columns?: number }, live: boolean, options: ProgressOptions) {
    this.#stream = stream;
    this.#live = live;
    this.#options = options;
    this.#now = options.now ?? (() => performance.now());
    this.#started = this.#now();
  }

  get live(): boolean {
    return this.#live;
  }

  /** The total, once it is known (or changes). */
  set total(total: number | undefined) {
    this.#options.total = total;
  }

  update(state: ProgressState, force = false): void {
    this.#state = state;
    if (!this.#live) return;
    const now = this.#now();
    if (!force && this.#shown && now - this.#drawnAt < REDRAW_MS) return;
    this.#drawnAt = now;
    this.#draw();
  }

  /** A line of the job's own (a failure, a notice) above the progress line. */
  log(line: string): void {
    if (this.#live && this.#shown) this.#stream.write('\r\x1b[2K');
    this.#stream.write(`${line}\n`);
    if (this.#live && this.#shown) this.#draw();
  }

  /** Clears the line; the job prints its summary after. */
  finish(): void {
    if (this.#live && this.#shown) this.#stream.write('\r\x1b[2K');
    this.#shown = false;
  }

  /** The line as drawn now (for tests and for a final summary). */
  text(): string {
    const { done, counts = {}, note } = this.#state;
    const { unit, total, label } = this.#options;
    const seconds = Math.max((this.#now() - this.#started) / 1000, 0.001);
    const rate = done / seconds;
    const parts: string[] = [];
    const amount = total !== undefined ? `${grouped(done)}/${grouped(total)}${total > 0 ? ` (${Math.floor((done / total) * 100)}%)` : ''}` : grouped(done);
    parts.push(`${label ? `${label} · ` : ''}${unit} ${amount}`);
    if (note) parts.push(note);
    for (const [name, value] of Object.entries(counts)) parts.push(`${name} ${grouped(value)}`);
    if (note) return parts.join(' · ');
    if (done > 0 && seconds >= 0.5) parts.push(`${rate >= 10 ? Math.round(rate) : rate.toFixed(1)}/s`);
    if (total !== undefined && done > 0 && done < total && seconds >= 0.5) parts.push(`${formatDuration(Math.ceil((total - done) / rate) * 1000)} left`);
    return parts.join(' · ');
  }

  #draw(): void {
    const width = this.#stream.columns || 80;
    // Three cells short of the width: a line that fills it leaves some terminals' cursor on the next row, and \r then
    // misses; and the terminal's echo of Ctrl-C (^C) must fit after it, or it wraps and leaves the line on screen.
    this.#stream.write(`\r\x1b[2K${textWidths().truncateToWidth(this.text(), width - 3)}`);
    this.#shown = true;
  }
}
