import { describe, expect, it } from 'vitest';
import { DEFAULT_BACKOFF_MS, parseUsage, Throttle, type WaitReason } from '../../src/insights/throttle.js';

function recorder() {
  const waits: { ms: number; why: WaitReason }[] = [];
  return { waits, sleep: async (ms: number, why: WaitReason) => void waits.push({ ms, why }) };
}

describe('usage headers', () => {
  it('takes the highest share of either header and the regain estimate', () => {
    const usage = parseUsage({
      'x-app-usage': '{"call_count":12,"total_cputime":3,"total_time":40}',
      'x-business-use-case-usage': JSON.stringify({
        '178414': [{ type: 'social', call_count: 85, total_cputime: 10, total_time: 20, estimated_time_to_regain_access: 0 }],
      }),
    });
    expect(usage).toEqual({ percent: 85, source: 'X-Business-Use-Case-Usage', regainMinutes: 0 });
    expect(parseUsage({ 'x-business-use-case-usage': '{"1":[{"call_count":100,"estimated_time_to_regain_access":7}]}' }).regainMinutes).toBe(7);
  });

  it('treats a missing or broken header as unknown, not zero', () => {
    expect(parseUsage({})).toEqual({ percent: undefined, source: undefined, regainMinutes: undefined });
    expect(parseUsage({ 'x-app-usage': 'not json' }).percent).toBeUndefined();
  });
});

describe('Throttle', () => {
  it('backs off 60 s doubling per retry by default, or the regain estimate when longer', async () => {
    const { waits, sleep } = recorder();
    const throttle = new Throttle({ sleep });
    expect(throttle.backoffMs).toBe(DEFAULT_BACKOFF_MS);
    expect(throttle.maxRetries).toBe(3);
    expect([0, 1, 2].map((attempt) => throttle.backoff(attempt))).toEqual([60_000, 120_000, 240_000]);
    const none = parseUsage({});
    expect(throttle.retryDelay(0, none)).toBe(60_000);
    expect(throttle.retryDelay(1, { ...none, regainMinutes: 5 })).toBe(300_000);
    await throttle.waitToRetry(2, none, 17);
    expect(waits).toEqual([{ ms: 240_000, why: { reason: 'throttled', attempt: 3, maxRetries: 3, code: 17 } }]);
  });

  it('warns once from 80 % and paces the next calls, up to the whole back-off at 100 %', async () => {
    const { waits, sleep } = recorder();
    const warnings: string[] = [];
    const throttle = new Throttle({ sleep, backoffMs: 1000, onWarn: (m) => warnings.push(m) });
    const at = (percent: number, regainMinutes?: number) => ({ percent, source: 'X-App-Usage', regainMinutes });
    throttle.observe(at(50));
    await throttle.beforeRequest();
    expect(waits).toEqual([]);
    throttle.observe(at(80));
    await throttle.beforeRequest();
    throttle.observe(at(90));
    await throttle.beforeRequest();
    throttle.observe(at(100));
    await throttle.beforeRequest();
    throttle.observe(at(100, 3));
    await throttle.beforeRequest();
    expect(waits.map((w) => w.ms)).toEqual([500, 1000, 3000]);
    expect(waits[0]!.why).toEqual({ reason: 'pacing', percent: 90 });
    expect(warnings).toEqual(['graph API usage is at 80% of the rate limit (X-App-Usage); slowing down to stay under it']);
    // Pacing is spent once.
    await throttle.beforeRequest();
    expect(waits).toHaveLength(3);
    expect(throttle.waitedMs).toBe(4500);
  });

  it('ignores responses without usage headers', async () => {
    const { waits, sleep } = recorder();
    const throttle = new Throttle({ sleep });
    throttle.observe(parseUsage({}));
    await throttle.beforeRequest();
    expect(waits).toEqual([]);
  });
});
