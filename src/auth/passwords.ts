/**
 * Password hashes: scrypt (node:crypto, off the main thread), stored as
 * `scrypt$<log2 N>$<r>$<p>$<salt>$<hash>` so the cost can rise later
 * without breaking old hashes. Verification compares in constant time.
 */
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { channel } from 'node:diagnostics_channel';

/**
 * Each scrypt derivation as it starts (`{ cost, lane, waited, waiting }`: log2 N, its lane, whether it waited for a
 * place, and how many of each lane wait then): what a login costs and what it waits behind, observable without a clock.
 */
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
/**
 * Sign-ups (anyone's, from the public CreateUser and POST /users) run at most this many at once: one place less
 * than AT_ONCE, so a login always finds a thread that no sign-up holds (996 sign-ups from one address raised a
 * login's p50 from 51 ms to 1,043 ms, each login queued behind them). With a pool of 2 (AT_ONCE 1) they share it.
 */
export const SIGNUP_AT_ONCE = Math.max(1, AT_ONCE - 1);
/**
 * Sign-ups that may wait for a thread at the default cost (about half a second of hashing on the sign-up lane);
 * past it a sign-up is refused at once (HashingBusy), never queued. The bound is of work, not of count: at a cost
 * one lower twice as many wait (a hash costs half as much), so at a cost of 10 it is 512.
 */
export const SIGNUP_QUEUE = 32;
const SIGNUP_QUEUE_WORK = SIGNUP_QUEUE * 2 ** DEFAULT_HASH_COST;
/** The work (2^cost each) of the sign-ups waiting. */
let signupWorkWaiting = 0;

/** A sign-up refused because sign-ups enough already wait to be hashed: try again in `retryAfterSeconds`. */
export class HashingBusy extends Error {
  readonly retryAfterSeconds = 1;
  constructor(waitingNow: number) {
    super(`${waitingNow} sign-ups are waiting for their password to be hashed already: try again in 1 s`);
  }
}

type Lane = 'now' | 'signup' | 'bulk';
let running = 0;
let signupsRunning = 0;
/**
 * Waiting derivations, taken in this order: a login's or a single account an admin makes; then sign-ups (at most
 * SIGNUP_AT_ONCE of them running); then a bulk import's rows. A login waits only for derivations already running,
 * never behind sign-ups or rows that wait.
 */
const waiting: Record<Lane, (() => void)[]> = { now: [], signup: [], bulk: [] };

/** Whether a sign-up would be refused now (its lane's queue is full), checked before anything is counted for it. */
export function signupLaneFull(): boolean {
  return signupWorkWaiting >= SIGNUP_QUEUE_WORK;
}

/** A HashingBusy naming how many sign-ups wait, for a sign-up refused before it is counted. */
export const hashingBusy = () => new HashingBusy(waiting.signup.length);

function next(finished: Lane): void {
  if (finished === 'signup') signupsRunning--;
  const lane: Lane | undefined =
    waiting.now.length > 0 ? 'now' : waiting.signup.length > 0 && signupsRunning < SIGNUP_AT_ONCE ? 'signup' : waiting.bulk.length > 0 ? 'bulk' : undefined;
  if (lane === undefined) {
    running--;
    return;
  }
  // The finishing derivation hands its place over, so `running` stays as it was.
  if (lane === 'signup') signupsRunning++;
  waiting[lane].shift()!();
}

/** Takes a place (at once, or once one is handed over); whether it had to wait for it. */
async function turn(lane: Lane, log2N: number): Promise<boolean> {
  if (running < AT_ONCE && (lane !== 'signup' || signupsRunning < SIGNUP_AT_ONCE)) {
    running++;
    if (lane === 'signup') signupsRunning++;
    return false;
  }
  if (lane !== 'signup') {
    await new Promise<void>((resolve) => waiting[lane].push(resolve));
    return true;
  }
  // One may always wait, whatever its cost.
  const work = 2 ** log2N;
  if (waiting.signup.length > 0 && signupWorkWaiting + work > SIGNUP_QUEUE_WORK) throw new HashingBusy(waiting.signup.length);
  signupWorkWaiting += work;
  await new Promise<void>((resolve) => waiting.signup.push(resolve));
  signupWorkWaiting -= work;
  return true;
}

async function derive(password: string, salt: Buffer, log2N: number, r: number, p: number, lane: Lane = 'now'): Promise<Buffer> {
  const waited = await turn(lane, log2N);
  try {
    // `waited`: whether it waited for a place; `waiting`: how many derivations of each lane wait as it starts.
    if (scryptChannel.hasSubscribers) {
      scryptChannel.publish({ cost: log2N, lane, waited, waiting: { now: waiting.now.length, signup: waiting.signup.length, bulk: waiting.bulk.length } });
    }
    return await new Promise((resolve, reject) => {
      scrypt(password, salt, KEY_BYTES, { N: 2 ** log2N, r, p, maxmem: 256 * 2 ** log2N * r + 1024 * 1024 }, (error, key) =>
        error ? reject(error) : resolve(key),
      );
    });
  } finally {
    next(lane);
  }
}

/**
 * A new hash. `signup` (an account anyone may ask for) runs on the sign-up lane, bounded in threads and queue
 * (HashingBusy past it); `bulk` (the rows of an import) waits behind logins, single accounts and sign-ups.
 */
export async function hashPassword(password: string, cost = DEFAULT_HASH_COST, options: { bulk?: boolean; signup?: boolean } = {}): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, cost, R, P, options.signup ? 'signup' : options.bulk ? 'bulk' : 'now');
  return `scrypt$${cost}$${R}$${P}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, cost, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !cost || !r || !p || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64');
  const key = await derive(password, Buffer.from(salt, 'base64'), Number(cost), Number(r), Number(p));
  return key.length === expected.length && timingSafeEqual(key, expected);
}
