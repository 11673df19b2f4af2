/**
 * `webhooks resend --wait`: follows deliveries in the outbox while serve
 * (another process, or none yet) sends them, with a progress line on a
 * terminal, until each is delivered or given up on, or Ctrl-C.
 */
import type { CommandContext } from '../context.js';
import type { Delivery } from '../../webhooks/delivery.js';
import type { WebhookOutbox } from '../../webhooks/outbox.js';
import { formatDuration } from '../../duration.js';

/** How often the outbox is read: attempts take up to seconds, and serve on SQLite looks at least every 30 s, so this is plenty. */
const POLL_MS = 250;

export interface Waited {
  deliveries: Delivery[];
  /** Whether Ctrl-C (or SIGTERM) ended the wait before every delivery was finished. */
  interrupted: boolean;
}

export async function waitForDeliveries(cc: CommandContext, outbox: WebhookOutbox, ids: readonly number[]): Promise<Waited> {
  const progress = cc.out.progress({ unit: 'deliveries', total: ids.length, label: 'resending' });
  let interrupted = false;
  let wake: (() => void) | undefined;
  void cc.waitForShutdown().then(() => {
    interrupted = true;
    wake?.();
  });
  let first = true;
  for (;;) {
    const deliveries = (await Promise.all(ids.map((id) => outbox.get(id)))).filter((d): d is Delivery => d !== undefined);
    const pending = deliveries.filter((d) => d.state === 'pending');
    const count = (state: Delivery['state']) => deliveries.filter((d) => d.state === state).length;
    const counts: Record<string, number> = { delivered: count('delivered'), failed: count('failed') };
    for (const state of ['held', 'cancelled'] as const) if (count(state) > 0) counts[state] = count(state);
    progress.update({ done: deliveries.length - pending.length, counts, note: noteOf(pending, cc.now()) }, first);
    first = false;
    if (pending.length === 0 || interrupted) {
      progress.finish();
      return { deliveries, interrupted: interrupted && pending.length > 0 };
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, POLL_MS);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    wake = undefined;
  }
}

/** What the pending ones wait for: serve's first look, or their next retry. */
function noteOf(pending: readonly Delivery[], now: Date): string | undefined {
  if (pending.length === 0) return undefined;
  const retrying = pending.filter((d) => d.attemptCount > 0 && d.nextAttemptAt !== null);
  // serve on PostgreSQL is told at once, on SQLite it looks within 30 s; a serve that is not running never will.
  if (retrying.length === 0) return 'waiting for serve to send them';
  const next = Math.min(...retrying.map((d) => Date.parse(d.nextAttemptAt!)));
  return `${retrying.length} to retry, the next in ${formatDuration(Math.max(0, next - now.getTime()))}`;
}
