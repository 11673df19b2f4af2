/**
 * ListOrders' page tokens (AIP-158): where the next page starts (the last
 * order shown, by created_at then id: the list's order, so orders placed
 * meanwhile never move a page's start) and a fingerprint of the filter the
 * list was made under (status, user_id). A token is good for its own list
 * only: with another filter it would start a page of that list at a place
 * found in another, skipping or repeating orders without a word, so it is
 * refused (INVALID_ARGUMENT naming page_token); page_size may change, as
 * AIP-158 allows.
 */
import { createHash } from 'node:crypto';
import { invalid } from '../kernel/common.js';

/** The filter a page was listed under, as applied: a status ('' for all) and the user_id asked for (0: the caller's or everyone's). */
export interface OrderFilter {
  status: string;
  userId: number;
}

function fingerprint(filter: OrderFilter): string {
  return createHash('sha256')
    .update(`order.v1.ListOrders\u0000status\u0000${filter.status}\u0000user_id\u0000${filter.userId}`)
    .digest('base64url')
    .slice(0, 11);
}

/** The token of the page after the order (`createdAt`, `id`) in the list of `filter`. */
export function orderPageToken(createdAt: string, id: string, filter: OrderFilter): string {
  return Buffer.from(JSON.stringify([createdAt, id, fingerprint(filter)])).toString('base64url');
}

const START_AGAIN = 'start again without page_token';

/** Where the page of `token` starts, for a request with `filter`; a token not of this server, or of another filter's list, is refused. */
export function orderPageStart(token: string, filter: OrderFilter): [createdAt: string, id: string] {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    // answered below
  }
  const parts = Array.isArray(value) && value.every((part) => typeof part === 'string') ? (value as string[]) : [];
  if (parts.length !== 2 && parts.length !== 3) {
    throw invalid(`page_token is not one this server gave: pass next_page_token of the previous page as it came, or ${START_AGAIN}`);
  }
  const [createdAt, id, made] = parts;
  // Tokens of the earlier form (no fingerprint), given before an upgrade, still continue their list.
  if (made !== undefined && made !== fingerprint(filter)) {
    throw invalid(`page_token belongs to a list with another filter (status, user_id): send the filter of the page it came with, or ${START_AGAIN}`);
  }
  return [createdAt!, id!];
}
