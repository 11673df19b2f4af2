/**
 * The sandbox's rate limit: so many calls per token in a rolling window
 * (200 an hour by default, as the spec's limits table says), reported the
 * way the real API does in `X-App-Usage` and `X-Business-Use-Case-Usage`.
 *
 * Only answered calls use the budget: a call refused with error 17 does
 * not, so a client that backs off gets its turn back when the oldest calls
 * leave the window (the real API is harsher and may extend the block).
 */

export interface RateLimitOptions {
  calls: number;
  windowMs: number;
}

export const DEFAULT_RATE_LIMIT: RateLimitOptions = { calls: 200, windowMs: 3_600_000 };

export interface UsageReport {
  /** Whether this call may proceed. */
  allowed: boolean;
  /** Calls in the window, as a percentage of the limit, after this call. */
  callCount: number;
  /** Whole minutes until a call would be allowed again; 0 when allowed. */
  regainMinutes: number;
}

export class RateLimiter {
  readonly #calls = new Map<string, number[]>();

  constructor(readonly options: RateLimitOptions) {
    if (!(options.calls >= 1) || !(options.windowMs >= 1)) throw new RangeError('the rate limit needs at least 1 call per window of at least 1 ms');
  }

  /** Records a call by `token` at `now` if the window has room. */
  take(token: string, now: number): UsageReport {
    const log = (this.#calls.get(token) ?? []).filter((at) => at > now - this.options.windowMs);
    this.#calls.set(token, log);
    const allowed = log.length < this.options.calls;
    if (allowed) log.push(now);
    const callCount = Math.min(100, Math.round((log.length / this.options.calls) * 100));
    let regainMinutes = 0;
    if (!allowed) {
      // The call after the oldest one in the window leaves it.
      const freeAt = log[log.length - this.options.calls]! + this.options.windowMs;
      regainMinutes = Math.max(1, Math.ceil((freeAt - now) / 60_000));
    }
    return { allowed, callCount, regainMinutes };
  }
}

/** The two usage headers; the business one only for calls on a business account's objects. */
export function usageHeaders(report: UsageReport, businessId: string | undefined): Record<string, string> {
  // CPU and time shares are a fixed fraction of the call share: the sandbox does no real work.
  const appUsage = { call_count: report.callCount, total_cputime: Math.floor(report.callCount / 4), total_time: Math.floor(report.callCount / 3) };
  const headers: Record<string, string> = { 'x-app-usage': JSON.stringify(appUsage) };
  if (businessId !== undefined) {
    headers['x-business-use-case-usage'] = JSON.stringify({
      [businessId]: [{ type: 'social', ...appUsage, estimated_time_to_regain_access: report.regainMinutes }],
    });
  }
  return headers;
}
