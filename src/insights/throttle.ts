/**
 * Staying under the graph API's rate limit and recovering from it.
 *
 * - Every response's `X-App-Usage` and `X-Business-Use-Case-Usage` are read;
 *   a missing header is "unknown", never zero (FIELD-NOTES).
 * - From 80 % of the limit the client warns once and paces itself: the next
 *   call waits a share of the base back-off that grows to all of it at
 *   100 %, so a long export slows down instead of running into error 17.
 * - When throttled (codes 4, 17, 32, 613, ...) it retries up to
 *   `maxRetries` times, waiting `backoffMs` doubled per attempt (the spec's
 *   reference: 60 s, 120 s, 240 s), or `estimated_time_to_regain_access`
 *   when the API says it is longer.
 *
 * All waiting goes through the injectable `sleep`, which the CLI wraps
 * with a countdown on a TTY and tests replace. `backoffMs` is also the
 * length of one minute of `estimated_time_to_regain_access`, so that one
 * test setting (MINIAPP_GRAPH_BACKOFF_MS) shortens every wait alike.
 */

export const DEFAULT_BACKOFF_MS = 60_000;
const DEFAULT_MAX_RETRIES = 3;
const WARN_AT_PERCENT = 80;

export interface UsageReading {
  /** The highest share (call count, CPU time, total time) in either header, in percent; undefined when neither header came. */
  percent: number | undefined;
  /** The header that gave `percent`. */
  source: string | undefined;
  /** The longest `estimated_time_to_regain_access` given, in minutes; undefined when none was. */
  regainMinutes: number | undefined;
}

export interface WaitReason {
  reason: 'throttled' | 'pacing';
  /** Retry number (1-based) and the most there will be, when throttled. */
  attempt?: number;
  maxRetries?: number;
  /** The graph error code, when throttled. */
  code?: number | undefined;
  /** Usage that led to pacing. */
  percent?: number | undefined;
}

export type Sleep = (ms: number, why: WaitReason) => Promise<void>;

/** What a wait is for, in a few words: "rate limited by the graph API (code 17); retry 1 of 3". */
export function describeWait(why: WaitReason): string {
  return why.reason === 'throttled'
    ? `rate limited by the graph API (code ${why.code ?? '?'}); retry ${why.attempt} of ${why.maxRetries}`
    : `graph API usage at ${Math.round(why.percent ?? 0)}%; pacing`;
}

const realSleep: Sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

type Headers = Record<string, string | string[] | undefined>;

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name] ?? headers[name.toLowerCase()];
  return Array.isArray(value) ? value[0] : value;
}

function json(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

const SHARES = ['call_count', 'total_cputime', 'total_time'] as const;

function highestShare(entry: unknown): number | undefined {
  if (typeof entry !== 'object' || entry === null) return undefined;
  const values = SHARES.map((key) => (entry as Record<string, unknown>)[key]).filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  return values.length > 0 ? Math.max(...values) : undefined;
}

/** Reads both usage headers of a response. */
export function parseUsage(headers: Headers): UsageReading {
  const reading: UsageReading = { percent: undefined, source: undefined, regainMinutes: undefined };
  const consider = (percent: number | undefined, source: string) => {
    if (percent !== undefined && (reading.percent === undefined || percent > reading.percent)) {
      reading.percent = percent;
      reading.source = source;
    }
  };
  consider(highestShare(json(header(headers, 'x-app-usage'))), 'X-App-Usage');
  const business = json(header(headers, 'x-business-use-case-usage'));
  if (typeof business === 'object' && business !== null) {
    for (const entries of Object.values(business)) {
      for (const entry of Array.isArray(entries) ? entries : []) {
        consider(highestShare(entry), 'X-Business-Use-Case-Usage');
        const regain = (entry as Record<string, unknown>)?.estimated_time_to_regain_access;
        if (typeof regain === 'number' && Number.isFinite(regain) && regain >= 0) {
          reading.regainMinutes = Math.max(reading.regainMinutes ?? 0, regain);
        }
      }
    }
  }
  return reading;
}

export interface ThrottleOptions {
  /** First wait when throttled, doubled per retry (default 60 s); also one "minute" of regain time. */
  backoffMs?: number;
  maxRetries?: number;
  sleep?: Sleep;
  /** Told once, when usage first reaches 80 %. */
  onWarn?: (message: string) => void;
}

export class Throttle {
  readonly backoffMs: number;
  readonly maxRetries: number;
  readonly #sleep: Sleep;
  readonly #onWarn: (message: string) => void;
  #pacingMs = 0;
  #pacingPercent: number | undefined;
  #warned = false;
  /** Milliseconds spent waiting, pacing and back-off together. */
  waitedMs = 0;

  constructor(options: ThrottleOptions = {}) {
    this.backoffMs = options.backoffMs ?? DEFAULT_BACKOFF_MS;
    this.maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    if (!(this.backoffMs >= 0) || !Number.isInteger(this.maxRetries) || this.maxRetries < 0) {
      throw new RangeError('backoffMs must be >= 0 and maxRetries a whole number >= 0');
    }
    this.#sleep = options.sleep ?? realSleep;
    this.#onWarn = options.onWarn ?? (() => {});
  }

  /** The back-off before retry `attempt` (0-based): backoffMs, doubled per attempt. */
  backoff(attempt: number): number {
    return this.backoffMs * 2 ** attempt;
  }

  /** Takes in a response's usage: warns once from 80 %, and decides how long the next call waits. */
  observe(usage: UsageReading): void {
    const { percent } = usage;
    if (percent === undefined) return;
    if (percent >= WARN_AT_PERCENT && !this.#warned) {
      this.#warned = true;
      this.#onWarn(`graph API usage is at ${Math.round(percent)}% of the rate limit (${usage.source}); slowing down to stay under it`);
    }
    this.#pacingPercent = percent;
    if (percent >= 100) this.#pacingMs = Math.max(this.backoffMs, (usage.regainMinutes ?? 0) * this.backoffMs);
    else if (percent > WARN_AT_PERCENT) this.#pacingMs = Math.round((this.backoffMs * (percent - WARN_AT_PERCENT)) / (100 - WARN_AT_PERCENT));
    else this.#pacingMs = 0;
  }

  /** Waits the pacing delay, if usage asked for one. */
  async beforeRequest(): Promise<void> {
    const ms = this.#pacingMs;
    this.#pacingMs = 0;
    if (ms > 0) await this.#wait(ms, { reason: 'pacing', percent: this.#pacingPercent });
  }

  /** How long to wait before retry `attempt` (0-based): the back-off, or the API's regain estimate if longer. */
  retryDelay(attempt: number, usage: UsageReading): number {
    return Math.max(this.backoff(attempt), (usage.regainMinutes ?? 0) * this.backoffMs);
  }

  async waitToRetry(attempt: number, usage: UsageReading, code: number | undefined): Promise<void> {
    // The retry itself is the next call: no pacing on top of the back-off.
    this.#pacingMs = 0;
    await this.#wait(this.retryDelay(attempt, usage), { reason: 'throttled', attempt: attempt + 1, maxRetries: this.maxRetries, code });
  }

  async #wait(ms: number, why: WaitReason): Promise<void> {
    this.waitedMs += ms;
    await this.#sleep(ms, why);
  }
}
