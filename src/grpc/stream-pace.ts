/**
 * The messages of a long stream that act on the store, counted against the
 * same request rates as unary calls (auth/request-rates.ts): a SyncUsers
 * stream counted once at its start applied 5,000 upserts at 1,031 a second
 * under a limit of 200. Each message takes one request from the bucket of
 * the stream's token; past it the stream is paced, not ended: its next
 * message waits until the bucket has room again. The handler reads only a
 * bounded number of messages ahead of its answers, so HTTP/2 flow control
 * then holds the client's writes back and nothing piles up in serve.
 */
import type * as grpc from '@grpc/grpc-js';
import type { RequestRates } from '../auth/request-rates.js';
import { callRateKey } from './request-check.js';

interface PacedCall {
  metadata: grpc.Metadata;
  getPeer(): string;
  readonly cancelled: boolean;
}

/**
 * Takes one request for the message about to be handled: undefined when it may go now; else a promise that
 * resolves once the bucket allows it, or at once should the client leave. Called for one message at a time, in
 * order (the handler's queue), so that waiting messages take the bucket's room in the order they came.
 */
export function pace(rates: RequestRates | undefined, call: PacedCall): Promise<void> | undefined {
  if (!rates) return undefined;
  const key = callRateKey(rates, call.metadata, () => call.getPeer());
  const waitMs = rates.take(key);
  if (waitMs === 0) return undefined;
  return new Promise<void>((resolve) => {
    const retry = (ms: number) =>
      setTimeout(() => {
        const more = call.cancelled ? 0 : rates.take(key);
        if (more > 0) {
          retry(more);
          return;
        }
        resolve();
      }, ms).unref();
    retry(waitMs);
  });
}
