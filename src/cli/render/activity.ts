/**
 * What a command shows on stderr while it works: a spinner while it waits
 * for an answer or two, a progress line once a long job knows what it
 * counts, and the countdown of a wait (a throttled API) in whichever of the
 * two is showing. Only on a terminal that reports its width, and never
 * under --json; elsewhere a wait the user should hear of is one warning
 * line, and the rest is silent, so pipes and logs get no redraws.
 */
import type { Output, Spinner } from './output.js';
import type { ProgressLine, ProgressOptions, ProgressState } from './progress.js';
import { formatDuration } from '../../duration.js';

/** Waits `ms`, or less when `signal` aborts (the job was stopped: nothing is left to wait for). */
const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });

export class Activity {
  readonly #out: Output;
  readonly #spinner: Spinner;
  #words: string;
  #progress: ProgressLine | undefined;
  #state: ProgressState = { done: 0 };
  #waiting = false;
  readonly #stopped = new AbortController();

  private constructor(
    out: Output,
    spinner: Spinner,
    /** Whether anything is drawn: a terminal with a width on stderr, and not --json. */
    readonly live: boolean,
    words: string,
  ) {
    this.#out = out;
    this.#spinner = spinner;
    this.#words = words;
  }

  static async start(out: Output, words: string): Promise<Activity> {
    const live = !out.json && Boolean(out.io.stderr.isTTY) && Boolean(out.io.stderr.columns);
    return new Activity(out, await out.spinner(words), live, words);
  }

  /** The spinner's words, while no progress line has taken its place. */
  text(words: string): void {
    this.#words = words;
    if (!this.#waiting && !this.#progress) this.#spinner.text(words);
  }

  /** Puts a progress line in place of the spinner, drawn at once. */
  progress(options: ProgressOptions): void {
    this.#spinner.stop();
    this.#progress = this.#out.progress(options);
    this.#progress.update(this.#state, true);
  }

  update(state: ProgressState): void {
    this.#state = state;
    if (!this.#waiting && !this.#stopped.signal.aborted) this.#progress?.update(state);
  }

  /** A line for the person at the terminal, above the progress line (written straight to stderr, it would be drawn over). */
  log(line: string): void {
    if (this.#progress) this.#progress.log(line);
    else this.#out.info(line);
  }

  warn(message: string): void {
    this.log(`${this.#out.errColor.yellow('warning:')} ${message}`);
  }

  /**
   * Waits `ms`, counting `label in 42s` down each second on a terminal;
   * elsewhere an `announce`d wait is one warning and any other is silent.
   */
  async wait(ms: number, label: string, options: { announce: boolean }): Promise<void> {
    if (!this.live) {
      if (options.announce) this.warn(`${label} in ${formatDuration(ms)}`);
      await sleep(ms, this.#stopped.signal);
      return;
    }
    const end = Date.now() + ms;
    // A wait of seconds counts down in whole seconds to the end ("in 1s", not "in 956ms").
    const left = () => Math.max(0, end - Date.now());
    const show = () => {
      const note = `${label} in ${formatDuration(ms >= 1000 ? Math.ceil(left() / 1000) * 1000 : left())}`;
      if (this.#progress) this.#progress.update({ ...this.#state, note }, true);
      else this.#spinner.text(note);
    };
    this.#waiting = true;
    show();
    const timer = setInterval(show, 1000);
    try {
      await sleep(ms, this.#stopped.signal);
    } finally {
      clearInterval(timer);
      this.#waiting = false;
      if (this.#stopped.signal.aborted) {
        // Stopped: nothing more is drawn.
      } else if (this.#progress) this.#progress.update(this.#state, true);
      else this.#spinner.text(this.#words);
    }
  }

  /** Clears whatever is showing, and ends a wait in progress; the command prints its result after. */
  stop(): void {
    this.#stopped.abort();
    this.#spinner.stop();
    this.#progress?.finish();
  }
}
