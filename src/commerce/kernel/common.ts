/**
 * What the three commerce services (inventory, payment, order) share: their
 * typed failures (each a gRPC status by name, mapped in one place), ids,
 * the checks of the fields they all take, money, and who is calling.
 *
 * Domain module: nothing here prints, reads the environment or knows gRPC.
 */
import { createHash, randomBytes } from 'node:crypto';

export type CommerceCode = 'INVALID_ARGUMENT' | 'NOT_FOUND' | 'FAILED_PRECONDITION' | 'PERMISSION_DENIED' | 'ABORTED' | 'UNAVAILABLE';

/** A refusal of a commerce call, with the gRPC status it is answered with. */
export class CommerceError extends Error {
  constructor(
    readonly code: CommerceCode,
    message: string,
  ) {
    super(message);
  }
}

export const invalid = (message: string) => new CommerceError('INVALID_ARGUMENT', message);
export const notFound = (message: string) => new CommerceError('NOT_FOUND', message);
export const precondition = (message: string) => new CommerceError('FAILED_PRECONDITION', message);

/** A record's id that the request must name: left empty, it is INVALID_ARGUMENT (a field missing), not NOT_FOUND. */
export function requiredId(field: string, value: string | undefined): string {
  if (!value) throw invalid(`${field} is required`);
  return value;
}

/** Who calls: the admin token (any order, any payment) or a user (their own). */
export interface Caller {
  isAdmin: boolean;
  /** The user behind a user token; null for the admin token. */
  userId: number | null;
}

/** The owner of idempotency keys and the actor of ledger lines: "admin" or "user:ID". */
export function actorOf(caller: Caller): string {
  return caller.isAdmin ? 'admin' : `user:${caller.userId}`;
}

/** Whether the caller may see a record of `userId` (null: the admin's own). */
export function mayAccess(caller: Caller, userId: number | null): boolean {
  return caller.isAdmin || (userId !== null && userId === caller.userId);
}

/**
 * "ord_", "pay_", ... then 22 characters: the second it was made (8) and 80
 * random bits (14): not guessable, not counting, and in the order they were
 * made, as UUIDv7 and ULID are. Random ids land anywhere in the indexes they
 * key (orders, payments, reservations, their items, the provider's books):
 * each insert wrote a page of its own, where ids made one after another fill
 * the last pages of each index together. On SQLite a checkout wrote fewer
 * pages to the log and ran 14% faster (bench/RESULTS.md, 2026-11-28, "ids
 * in the order they are made"). Seconds, not ms, keep the ids as short as
 * they were (a list's id column fits a narrow terminal); ids of one second
 * share the few last pages all the same.
 */
export function newId(prefix: 'ord' | 'pay' | 'res' | 'ref' | 'sbx'): string {
  if (idOffset + ID_BYTES > idPool.length) {
    idPool = randomBytes(ID_POOL_BYTES);
    idOffset = 0;
  }
  idOffset += ID_BYTES;
  return `${prefix}_${timePrefix(Math.floor(Date.now() / 1000))}${idPool.toString('base64url', idOffset - ID_BYTES, idOffset)}`;
}

/**
 * `second` (since 1970) in 8 characters of 0-9 a-v (5 bits each, 40 bits:
 * until the year 36811), which sort as the times do under any collation
 * (digits before lower-case letters), PostgreSQL's locales included, not
 * only bytewise.
 */
function timePrefix(second: number): string {
  return second.toString(32).padStart(8, '0');
}

// The CSPRNG's bytes for ids, drawn 4 KiB at a time (409 ids), each byte used once: a system call for every id cost a
// checkout, which makes five, about 5% of its CPU on SQLite (as crypto.randomUUID keeps a cache of its own).
const ID_BYTES = 10;
const ID_POOL_BYTES = 4096;
let idPool = Buffer.alloc(0);
let idOffset = 0;

export const DEFAULT_CURRENCY = 'KRW';
export const MAX_AMOUNT = 1_000_000_000_000;
const MAX_QUANTITY = 1_000_000;
const MAX_ITEMS = 100;
const MAX_REASON = 200;
/** Toss keeps an Idempotency-Key 15 days (Stripe 24 hours); so do we. */
export const IDEMPOTENCY_TTL_MS = 15 * 24 * 3_600_000;
/** A reservation holds its units this long unless committed or released. */
export const DEFAULT_RESERVATION_TTL_MS = 15 * 60_000;

const SKU = /^[A-Za-z0-9._-]{1,64}$/;
const KEY = /^[A-Za-z0-9:._-]{1,64}$/;
const CURRENCY = /^[A-Z]{3}$/;

/** An int64 field as proto-loader gives it (a decimal string) or a number, as a safe integer; INVALID_ARGUMENT naming the field otherwise. */
export function integer(field: string, value: string | number | undefined | null, min: number, max: number): number {
  const number = Number(value ?? 0);
  if (!Number.isSafeInteger(number) || number < min || number > max) {
    throw invalid(`${field} must be a whole number from ${min.toLocaleString('en-US')} to ${max.toLocaleString('en-US')}; got ${String(value)}`);
  }
  return number;
}

export function checkSku(sku: string | undefined, field = 'sku'): string {
  if (!sku || !SKU.test(sku)) throw invalid(`${field} must be 1 to 64 letters, digits, ".", "_" or "-"; got "${sku ?? ''}"`);
  return sku;
}

export function checkKey(key: string | undefined): string {
  if (!key) throw invalid('idempotency_key is required: 1 to 64 letters, digits, "-", "_", ":" or "."; reuse it to retry safely');
  if (!KEY.test(key)) throw invalid(`idempotency_key must be 1 to 64 letters, digits, "-", "_", ":" or "."; got "${key.slice(0, 80)}"`);
  return key;
}

export function checkCurrency(currency: string | undefined, fallback: string): string {
  if (!currency) return fallback;
  if (!CURRENCY.test(currency)) throw invalid(`currency must be an ISO 4217 code, three capital letters (KRW, USD, ...); got "${currency.slice(0, 20)}"`);
  return currency;
}

export function checkText(field: string, value: string | undefined, options: { required?: boolean; max?: number } = {}): string {
  const text = value ?? '';
  const max = options.max ?? MAX_REASON;
  if (options.required && text.trim() === '') throw invalid(`${field} is required (1 to ${max} characters)`);
  if ([...text].length > max) throw invalid(`${field} must be at most ${max} characters`);
  if (text.includes('\u0000')) throw invalid(`${field} must not contain NUL (U+0000)`);
  return text;
}

export interface Quantity {
  sku: string;
  quantity: number;
}

/** 1 to 100 items, each SKU once, each quantity 1 to 1,000,000. */
export function checkItems(items: readonly { sku?: string; quantity?: string | number }[] | undefined): Quantity[] {
  const list = items ?? [];
  if (list.length === 0) throw invalid('items must name at least one SKU and quantity');
  if (list.length > MAX_ITEMS) throw invalid(`items must have at most ${MAX_ITEMS} entries; got ${list.length}`);
  const seen = new Set<string>();
  return list.map((item, i) => {
    const sku = checkSku(item.sku, `items[${i}].sku`);
    if (seen.has(sku)) throw invalid(`items names SKU ${sku} twice; give it once with the total quantity`);
    seen.add(sku);
    return { sku, quantity: integer(`items[${i}].quantity`, item.quantity, 1, MAX_QUANTITY) };
  });
}

/** A stable digest of a request, to tell the same request from another under one idempotency key. */
export function requestHash(request: unknown): string {
  return createHash('sha256').update(JSON.stringify(request)).digest('hex');
}

/** Sorted copies of items, so that their order does not make a request different. */
export function sortedItems(items: readonly Quantity[]): Quantity[] {
  return [...items].sort((a, b) => (a.sku < b.sku ? -1 : a.sku > b.sku ? 1 : 0));
}

/** A row's integer column as a number (PostgreSQL BIGINT comes as a number already; SQLite may give a bigint). */
export const num = (value: unknown): number => Number(value);
