/**
 * The X-Webhook-Signature of a delivery: `sha256=` and the hex HMAC-SHA256
 * of the exact bytes sent, made with the secret the receivers share, and
 * its check in constant time (what a receiver runs; `miniapp webhooks
 * verify` and the tests use it).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

const SIGNATURE = /^sha256=([0-9a-f]{64})$/;

function bytesOf(body: string | Buffer | Uint8Array): Buffer {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.isBuffer(body) ? body : Buffer.from(body);
}

function digest(body: string | Buffer | Uint8Array, secret: string): Buffer {
  return createHmac('sha256', secret).update(bytesOf(body)).digest();
}

/** `sha256=` and the hex HMAC-SHA256 of the body's bytes (a string is taken as UTF-8). */
export function signBody(body: string | Buffer | Uint8Array, secret: string): string {
  return `sha256=${digest(body, secret).toString('hex')}`;
}

/**
 * The 32 bytes of a `sha256=<64 hex>` signature, or undefined when it does
 * not have that shape. Upper-case hex (and prefix) and surrounding
 * whitespace are tolerated; a bare hex digest without `sha256=` is not.
 */
export function parseSignature(signature: string): Buffer | undefined {
  if (typeof signature !== 'string') return undefined;
  const match = SIGNATURE.exec(signature.trim().toLowerCase());
  return match ? Buffer.from(match[1]!, 'hex') : undefined;
}

/**
 * Whether `signature` (the X-Webhook-Signature header) was made over these
 * exact bytes with this secret. Compares in constant time; never throws.
 * Verify the raw body as received: re-serialised JSON has other bytes.
 */
export function verifySignature(body: string | Buffer | Uint8Array, secret: string, signature: string): boolean {
  try {
    const given = parseSignature(signature);
    if (!given || typeof secret !== 'string') return false;
    const expected = digest(body, secret);
    return given.length === expected.length && timingSafeEqual(given, expected);
  } catch {
    return false;
  }
}
