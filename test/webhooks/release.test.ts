/**
 * A dispatcher that stops (serve draining for a rolling restart) leaves no
 * lease behind: it claims nothing more, lets attempts in flight finish until
 * its deadline, and cuts the rest short, giving their claims back, due at
 * once, so that another instance delivers them now rather than when the
 * two-minute lease would have ended.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { WebhookDispatcher, type Timers } from '../../src/webhooks/dispatcher.js';
import { BACKENDS } from '../helpers/postgres.js';
import { webhookDatabase, type WebhookTestDatabase } from './backend.js';

const URL = 'http://127.0.0.1:9/hook';

/** Timers the test fires by hand: the stop's deadline among them. */
function manualTimers(): Timers & { fire(): void; pending(): number } {
  const waiting = new Map<number, () => void>();
  let next = 0;
  return {
    setTimeout: (callback) => {
      const id = next++;
      waiting.set(id, callback);
      return id;
    },
    clearTimeout: (handle) => void waiting.delete(handle as number),
    fire: () => {
      const due = [...waiting.values()];
      waiting.clear();
      for (const callback of due) callback();
    },
    pending: () => waiting.size,
  };
}

describe.each(BACKENDS)('a stopping dispatcher on %s', (backend) => {
  let database: WebhookTestDatabase | undefined;
  afterEach(async () => {
    await database?.dispose();
    database = undefined;
  });

  async function storeOf(): Promise<{ first: Store; second: Store }> {
    database = await webhookDatabase(backend);
    const first = await database.open();
    return { first, second: await database.instance(first) };
  }

  it('cuts an attempt still running at its deadline short and releases its claim: another instance delivers it at once', async () => {
    const { first, second } = await storeOf();
    const now = () => new Date('2026-11-25T10:00:00Z');
    const timers = manualTimers();
    const started: string[] = [];
    let cutShort = 0;
    // A receiver that does not answer: the send ends only when the dispatcher cuts it short.
    const hanging = new WebhookDispatcher({
      store: first,
      secret: 's',
      now,
      version: 't',
      timers,
      urls: [URL],
      send: (_url, _headers, body, signal) =>
        new Promise((_resolve, reject) => {
          started.push(body);
          signal?.addEventListener('abort', () => {
            cutShort++;
            reject(signal.reason as Error);
          });
        }),
    });
    const [id] = await hanging.outbox.enqueue('post.created', { id: 1 }, [URL]);
    const running = hanging.runDue();
    while (started.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const claimed = await hanging.outbox.get(id!);
    // Claimed: due again only when the lease ends, two minutes on.
    expect(new Date(claimed!.nextAttemptAt!).getTime()).toBeGreaterThan(now().getTime());

    const stopping = hanging.stop({ deadlineMs: 1_000 });
    // Before the deadline the attempt keeps going.
    expect(cutShort).toBe(0);
    timers.fire();
    await stopping;
    await running;
    expect(cutShort).toBe(1);

    const released = await hanging.outbox.get(id!);
    // Pending, due now, no attempt counted (the receiver did not fail; serve stopped).
    expect(released).toMatchObject({ state: 'pending', attemptCount: 0 });
    expect(new Date(released!.nextAttemptAt!).getTime()).toBe(now().getTime());

    const delivered: string[] = [];
    const other = new WebhookDispatcher({
      store: second,
      secret: 's',
      now,
      version: 't',
      urls: [URL],
      send: async (_url, _headers, body) => {
        delivered.push(body);
        return { status: 204 };
      },
    });
    expect(await other.runDue()).toBe(1);
    expect(delivered).toEqual(started);
    expect(await other.outbox.get(id!)).toMatchObject({ state: 'delivered', attemptCount: 1 });
  });

  it('finishes an attempt that answers before the deadline, records it, and claims nothing more', async () => {
    const { first } = await storeOf();
    const now = () => new Date('2026-11-25T10:00:00Z');
    const timers = manualTimers();
    let answer!: () => void;
    const sent: string[] = [];
    const dispatcher = new WebhookDispatcher({
      store: first,
      secret: 's',
      now,
      version: 't',
      timers,
      urls: [URL],
      concurrency: 1,
      send: (_url, _headers, body) =>
        new Promise((resolve) => {
          sent.push(body);
          answer = () => resolve({ status: 204 });
        }),
    });
    const ids = await dispatcher.outbox.enqueue('post.created', { id: 1 }, [URL]);
    const [later] = await dispatcher.outbox.enqueue('post.created', { id: 2 }, [URL]);
    const running = dispatcher.runDue();
    while (sent.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const stopping = dispatcher.stop({ deadlineMs: 1_000 });
    answer();
    await stopping;
    expect(await running).toBe(1);
    expect(sent).toHaveLength(1);
    expect(await dispatcher.outbox.get(ids[0]!)).toMatchObject({ state: 'delivered', attemptCount: 1 });
    // The second was never claimed: due now, for whichever instance looks first.
    const untouched = await dispatcher.outbox.get(later!);
    expect(untouched).toMatchObject({ state: 'pending', attemptCount: 0 });
    expect(new Date(untouched!.nextAttemptAt!).getTime()).toBe(now().getTime());
    // The deadline's timer went with the stop.
    expect(timers.pending()).toBe(0);
  });
});
