/**
 * The signatures of a delivery, and their checks in constant time (what a
 * receiver runs; `miniapp webhooks verify` and the tests use them):
 *
 * - X-Webhook-Signature, the spec's: `sha256=` and the hex HMAC-SHA256 of the
 *   exact bytes sent, made with the secret the receivers share. It signs the
 *   body alone, the same on every attempt: it proves who sent the body, not
 *   when nor which delivery.
 * - webhook-signature, Standard Webhooks' (standardwebhooks.com, what its
 *   libraries verify): `v1,` and the base64 HMAC-SHA256 of
 *   `{webhook-id}.{webhook-timestamp}.{body}`, so the delivery's id and each
 *   attempt's own time are signed with the body, and a receiver refuses a
 *   replay or a stale copy. Its key is the secret's UTF-8 bytes, or, for a
 *   secret written as those libraries write theirs (`whsec_` and base64),
 *   the bytes that base64 stands for.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { ConfigError } from '../errors.js';

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

/** Standard Webhooks' form of a secret: `whsec_` and the key in base64. */
const STANDARD_SECRET_PREFIX = 'whsec_';
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * The HMAC key of webhook-signature for `secret`: the bytes after `whsec_` in base64 when it is written so, else its
 * UTF-8 bytes (a receiver then gives its library `whsec_` and their base64). A `whsec_` secret whose rest is not
 * base64 is refused: no library could take it.
 */
export function standardKey(secret: string): Buffer {
  if (!secret.startsWith(STANDARD_SECRET_PREFIX)) return Buffer.from(secret, 'utf8');
  const rest = secret.slice(STANDARD_SECRET_PREFIX.length);
  if (rest === '' || !BASE64.test(rest)) {
    throw new ConfigError("the webhook secret starts with whsec_, Standard Webhooks' form of a key in base64, but the rest is not base64", {
      hint: 'give the key as whsec_ and its base64 (as Standard Webhooks libraries write it), or a secret without that prefix',
    });
  }
  return Buffer.from(rest, 'base64');
}

/** What a Standard Webhooks library is given to verify what a secret signs: `whsec_` and the key in base64. */
export function standardSecret(secret: string): string {
  return `${STANDARD_SECRET_PREFIX}${standardKey(secret).toString('base64')}`;
}

/** `v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`: the webhook-signature header of one attempt. */
export function signStandard(id: string, timestamp: number, body: string | Buffer | Uint8Array, secret: string): string {
  const hmac = createHmac('sha256', standardKey(secret));
  hmac.update(`${id}.${timestamp}.`, 'utf8').update(bytesOf(body));
  return `v1,${hmac.digest('base64')}`;
}

/** The v1 signatures of a webhook-signature header (space-separated `v1,<base64>`; other versions are not ours), as bytes. */
export function parseStandardSignatures(header: string): Buffer[] {
  if (typeof header !== 'string') return [];
  return header
    .trim()
    .split(/\s+/)
    .filter((entry) => entry.startsWith('v1,') && BASE64.test(entry.slice(3)) && entry.length > 3)
    .map((entry) => Buffer.from(entry.slice(3), 'base64'))
    .filter((bytes) => bytes.length === 32);
}

/**
 * Whether one of the v1 signatures of `header` (webhook-signature) was made over `{id}.{timestamp}.{body}` with
 * this secret. Compares in constant time; never throws. The timestamp's freshness is the receiver's to judge.
 */
export function verifyStandard(body: string | Buffer | Uint8Array, secret: string, id: string, timestamp: string | number, header: string): boolean {
  try {
    // Read as the libraries read it (an integer of seconds), so that both sign the same text.
    if (typeof secret !== 'string' || typeof id !== 'string' || id === '' || !/^\d{1,15}$/.test(String(timestamp))) return false;
    const expected = Buffer.from(signStandard(id, Number(timestamp), body, secret).slice(3), 'base64');
    return parseStandardSignatures(header).some((given) => timingSafeEqual(given, expected));
  } catch {
    return false;
  }
}
