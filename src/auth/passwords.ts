/**
 * Password hashes: scrypt (node:crypto, off the main thread), stored as
 * `scrypt$<log2 N>$<r>$<p>$<salt>$<hash>` so the cost can rise later
 * without breaking old hashes. Verification compares in constant time.
 */
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { channel } from 'node:diagnostics_channel';

/** Each scrypt derivation's cost (`{ cost, lane }`, log2 N) as it starts: what a login costs, observable without a clock. */
export const scryptChannel = channel('miniapp:password-scrypt');

/** log2 of scrypt's N. 14 is Node's own default (16 MiB, about 30 ms here); tests lower it. */
export const DEFAULT_HASH_COST = 14;
const R = 8;
const P = 1;
const KEY_BYTES = 32;

/**
 * How many derivations run at once: libuv's thread pool (UV_THREADPOOL_SIZE,
 * 4 by default) less one thread, which stays free for the disk. scrypt runs
 * on that pool, and so do the store's flushes and file reads: a bulk import
 * that queued its 256 rows' hashes there made every read that waits for a
 * flush (GetUser among them) wait behind seconds of hashing.
 */
export const AT_ONCE = Math.max(1, (Number(process.env.UV_THREADPOOL_SIZE) || 4) - 1);
let running = 0;
/** Waiting derivations: a login's or a single account's first, then a bulk import's rows. */
const waiting: { now: (() => void)[]; bulk: (() => void)[] } = { now: [], bulk: [] };

function next(): void {
  const start = waiting.now.shift() ?? waiting.bulk.shift();
  if (start) start();
  else running--;
}

async function turn(lane: keyof typeof waiting): Promise<void> {
  if (running < AT_ONCE) {
    running++;
    return;
  }
  // The finishing derivation hands its place over (`next`), so `running` stays as it was.
  await new Promise<void>((resolve) => waiting[lane].push(resolve));
}

async function derive(password: string, salt: Buffer, log2N: number, r: number, p: number, lane: keyof typeof waiting = 'now'): Promise<Buffer> {
  await turn(lane);
  try {
    if (scryptChannel.hasSubscribers) scryptChannel.publish({ cost: log2N, lane });
    return await new Promise((resolve, reject) => {
      scrypt(password, salt, KEY_BYTES, { N: 2 ** log2N, r, p, maxmem: 256 * 2 ** log2N * r + 1024 * 1024 }, (error, key) =>
        error ? reject(error) : resolve(key),
      );
    });
  } finally {
    next();
  }
}

/** A new hash; `bulk` (the rows of an import) waits behind logins and single accounts. */
export async function hashPassword(password: string, cost = DEFAULT_HASH_COST, options: { bulk?: boolean } = {}): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, cost, R, P, options.bulk ? 'bulk' : 'now');
  return `scrypt$${cost}$${R}$${P}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, cost, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !cost || !r || !p || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64');
  const key = await derive(password, Buffer.from(salt, 'base64'), Number(cost), Number(r), Number(p));
  return key.length === expected.length && timingSafeEqual(key, expected);
}
