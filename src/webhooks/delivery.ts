/**
 * A webhook delivery as operators and receivers see it: its states, its
 * attempts, the payload the spec defines, the X-Webhook-Delivery key that
 * every attempt and resend shares, the retry schedule, and the URLs serve
 * may send to. The outbox (outbox.ts) stores them; the dispatcher
 * (dispatcher.ts) sends them.
 */
import { randomBytes } from 'node:crypto';
import { ConfigError } from '../errors.js';

/** The waits after the 1st, 2nd and 3rd failure; one more failure and the delivery is failed. */
export const RETRY_DELAYS_MS: readonly number[] = [60_000, 5 * 60_000, 30 * 60_000];
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;

/** Checks a webhook URL (for `serve --webhook-url`): absolute http or https. */
export function checkWebhookUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text.trim());
  } catch {
    throw new ConfigError(`a webhook URL must be absolute, such as https://hooks.example.com/blog; got "${text}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(`a webhook URL must use http or https; got ${url.protocol.replace(':', '')} in "${text}"`);
  }
  if (url.username || url.password) {
    throw new ConfigError('a webhook URL must not carry credentials: receivers check the X-Webhook-Signature instead');
  }
  return url.href;
}

/**
 * pending: due now or at nextAttemptAt. delivered: a 2xx came back. failed: no attempts left.
 * cancelled: an operator stopped it. held: serve no longer sends to its URL; resumed when it does again.
 */
export type DeliveryState = 'pending' | 'delivered' | 'failed' | 'cancelled' | 'held';

export interface DeliveryAttempt {
  /** When the request was started (ISO 8601). */
  at: string;
  /** The receiver's HTTP status, or null when none came back. */
  statusCode: number | null;
  /** Why no status came back (network error, time-out), else null. */
  error: string | null;
}

export interface Delivery {
  id: number;
  event: string;
  url: string;
  /** The exact bytes sent (UTF-8), identical on every attempt. */
  body: string;
  state: DeliveryState;
  /** How many attempts were made; equals `attempts.length`. */
  attemptCount: number;
  /** When the next attempt is due (ISO 8601); null unless pending. */
  nextAttemptAt: string | null;
  createdAt: string;
  updatedAt: string;
  /** For a resend, the delivery it repeats (the first of the line), whose key it sends as X-Webhook-Delivery; else null. */
  originalId: number | null;
  /**
   * What X-Webhook-Delivery carries: a UUIDv7 made when the delivery was
   * enqueued, kept by every attempt and every resend of it, and unique across
   * databases (ids are not: a rebuilt database or another environment counts
   * from 1 again). Null only in a database not migrated yet, read as it is.
   */
  key: string | null;
  /** Oldest first. */
  attempts: DeliveryAttempt[];
}

/** The X-Webhook-Delivery of a delivery: the same for every attempt and every resend of it. */
export function deliveryKey(delivery: Pick<Delivery, 'id'> & { key?: string | null | undefined; originalId?: number | null | undefined }): string {
  return delivery.key ?? String(delivery.originalId ?? delivery.id);
}

/**
 * A new X-Webhook-Delivery key: a UUIDv7 (RFC 9562), the time in
 * milliseconds then 74 random bits, so keys are unique wherever they are
 * made and sort by when.
 */
export function newDeliveryKey(now: Date): string {
  const bytes = randomBytes(16);
  const ms = BigInt(now.getTime());
  for (let i = 0; i < 6; i++) bytes[i] = Number((ms >> BigInt(8 * (5 - i))) & 0xffn);
  bytes[6] = (bytes[6]! & 0x0f) | 0x70;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The spec's webhook payload: event, timestamp (ISO 8601) and data (a PostSchema for post.created). */
export interface WebhookPayload<T = unknown> {
  event: string;
  timestamp: string;
  data: T;
}
export interface ListFilter {
  state?: DeliveryState | undefined;
  url?: string | undefined;
  /** Only the most recent N (still listed oldest first). */
  limit?: number | undefined;
}

/** Why a delivery was left as it was by `cancel` or `resend`. */
export interface Refusal {
  id: number;
  reason: string;
}

export interface Outcome {
  /** The deliveries cancelled, or the new deliveries queued by a resend. */
  done: Delivery[];
  refused: Refusal[];
  /** The ids asked for that were already as asked (a cancel of a cancelled delivery): neither done nor refused. */
  already?: number[];
}
/** A delivery taken for one attempt, and the number of that claim, which its outcome is recorded against. */
export interface Claim {
  delivery: Delivery;
  claim: number;
  /** The trace the delivery was made in (when tracing was on), for the attempt's span to link to. */
  traceparent?: string | null | undefined;
}
