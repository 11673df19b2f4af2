/**
 * The messages of a long stream that act on the store, counted against the
 * same request rates as unary calls (auth/request-rates.ts): a SyncUsers
 * stream counted once at its start applied 5,000 upserts at 1,031 a second
 * under a limit of 200. Each message takes one request from the bucket of
 * the stream's token; past it the stream is paced, not ended: it is not
 * read further (pause) until the bucket has room again, so HTTP/2 flow
 * control holds the client's writes back and nothing piles up in serve.
 */
import type * as grpc from '@grpc/grpc-js';
import type { RequestRates } from '../auth/request-rates.js';
import { addressOf } from './request-check.js';

interface PacedCall {
  metadata: grpc.Metadata;
  getPeer(): string;
  pause(): unknown;
  resume(): unknown;
  readonly cancelled: boolean;
}

/**
 * Takes one request for a message just read: undefined when it may go now; else the stream is paused and the
 * promise resolves (the stream resumed) once the bucket allows it, or at once should the client leave.
 */
export function pace(rates: RequestRates | undefined, call: PacedCall): Promise<void> | undefined {
  if (!rates) return undefined;
  const authorization = call.metadata.get('authorization')[0];
  const key = rates.keyOf(typeof authorization === 'string' ? authorization : undefined, addressOf(call.getPeer()));
  const waitMs = rates.take(key);
  if (waitMs === 0) return undefined;
  call.pause();
  return new Promise<void>((resolve) => {
    const retry = (ms: number) =>
      setTimeout(() => {
        const more = call.cancelled ? 0 : rates.take(key);
        if (more > 0) {
          retry(more);
          return;
        }
        call.resume();
        resolve();
      }, ms).unref();
    retry(waitMs);
  });
}
