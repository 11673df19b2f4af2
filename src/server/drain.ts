/**
 * How `miniapp serve` stops without dropping anything, as Envoy and
 * Kubernetes do it (drain, then stop): first it stops being ready (the
 * HTTP readiness 503, gRPC health NOT_SERVING) while it goes on answering
 * everything, for a drain period in which load balancers see it and send
 * new work elsewhere; then it stops accepting, finishes what is in flight,
 * ends its streams with UNAVAILABLE (clients reconnect elsewhere) and
 * releases its webhook claims (see RunningServe.close).
 */

/** The default drain period: a few health checks of a load balancer that asks every second or two. */
export const DEFAULT_DRAIN_MS = 5_000;
/** The longest drain period `--drain` takes. */
export const MAX_DRAIN_MS = 10 * 60_000;

export interface Drainable {
  drain(): void;
  close(): Promise<void>;
}

export type DrainStep = { step: 'draining'; ms: number } | { step: 'drain-skipped' } | { step: 'stopping' } | { step: 'stopped' };

export interface DrainOptions {
  /** How long to keep answering while not ready; 0 stops at once (still finishing what is in flight). */
  drainMs: number;
  /** The drain period's wait (default: a timer). Tests pass a wait they end themselves. */
  wait?: (ms: number) => { done: Promise<void>; cancel(): void };
  /** Ends the wait early (an operator's second signal). */
  skip?: Promise<unknown> | undefined;
  /** Told of each step, for the operator. */
  onStep?: (step: DrainStep) => void;
}

function timer(ms: number): { done: Promise<void>; cancel(): void } {
  let handle: NodeJS.Timeout | undefined;
  const done = new Promise<void>((resolve) => {
    handle = setTimeout(resolve, ms);
  });
  return { done, cancel: () => clearTimeout(handle) };
}

/** Drains `target` for `drainMs` (or until `skip`), then closes it. */
export async function drainAndClose(target: Drainable, options: DrainOptions): Promise<void> {
  const onStep = options.onStep ?? (() => undefined);
  // Not ready at once: the load balancers' next health check already sees it.
  target.drain();
  if (options.drainMs > 0) {
    onStep({ step: 'draining', ms: options.drainMs });
    const wait = (options.wait ?? timer)(options.drainMs);
    const skipped = await Promise.race([wait.done.then(() => false), ...(options.skip ? [options.skip.then(() => true)] : [])]);
    wait.cancel();
    if (skipped) onStep({ step: 'drain-skipped' });
  }
  onStep({ step: 'stopping' });
  await target.close();
  onStep({ step: 'stopped' });
}
