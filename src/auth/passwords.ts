/**
 * Password hashes: scrypt (node:crypto, off the main thread), stored as
 * `scrypt$<log2 N>$<r>$<p>$<salt>$<hash>` so the cost can rise later
 * without breaking old hashes. Verification compares in constant time.
 */
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { channel } from 'node:diagnostics_channel';

/** Each scrypt derivation's cost (`{ cost }`, log2 N) as it starts: what a login costs, observable without a clock. */
export const scryptChannel = channel('miniapp:password-scrypt');

/** log2 of scrypt's N. 14 is Node's own default (16 MiB, about 30 ms here); tests lower it. */
export const DEFAULT_HASH_COST = 14;
const R = 8;
const P = 1;
const KEY_BYTES = 32;

function derive(password: string, salt: Buffer, log2N: number, r: number, p: number): Promise<Buffer> {
  if (scryptChannel.hasSubscribers) scryptChannel.publish({ cost: log2N });
  return new Promise((resolve, reject) => {
    scrypt(password, salt, KEY_BYTES, { N: 2 ** log2N, r, p, maxmem: 256 * 2 ** log2N * r + 1024 * 1024 }, (error, key) =>
      error ? reject(error) : resolve(key),
    );
  });
}

export async function hashPassword(password: string, cost = DEFAULT_HASH_COST): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, cost, R, P);
  return `scrypt$${cost}$${R}$${P}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, cost, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !cost || !r || !p || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64');
  const key = await derive(password, Buffer.from(salt, 'base64'), Number(cost), Number(r), Number(p));
  return key.length === expected.length && timingSafeEqual(key, expected);
}
