/**
 * ListUsers' page tokens (AIP-158). The list is in id order, so a token
 * says where the next page starts, the last id shown (keyset pagination:
 * users created or deleted meanwhile never move a page's start, so a walk
 * never shows a user twice nor skips one that was there throughout), and
 * carries a fingerprint of the request fields that must stay the same from
 * page to page: the filter (page_size may change, as AIP-158 allows).
 *
 * 21 bytes, base64url (28 characters): a version, the id (8 bytes), the
 * filter's fingerprint (8 bytes of a SHA-256) and a check (4 bytes of a
 * SHA-256 of the rest), which tells a token damaged in copying, or edited,
 * from one this server gave. The check is not a secret: a token grants
 * nothing, since anyone who may list may start a list anywhere, so a token
 * made by hand with the right check is only a list started there.
 */
import { createHash } from 'node:crypto';
import { checkMaxLength, UserValidationError } from './user-store.js';

/** The bound of ListUsersRequest.page_token: our tokens are 28 characters; the rest is room for a later format. */
export const MAX_PAGE_TOKEN_LENGTH = 128;

const VERSION = 1;
const BYTES = 21;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest();

function fingerprint(filter: string): Buffer {
  return sha256(`user.v1.ListUsers\u0000filter\u0000${filter}`).subarray(0, 8);
}

/** The token of the page after `lastId` in the list of `filter` (as applied: trimmed). */
export function pageToken(lastId: number, filter: string): string {
  const token = Buffer.alloc(BYTES);
  token.writeUInt8(VERSION, 0);
  token.writeBigUInt64BE(BigInt(lastId), 1);
  fingerprint(filter).copy(token, 9);
  sha256(token.subarray(0, 17)).copy(token, 17, 0, 4);
  return token.toString('base64url');
}

const START_AGAIN = 'start again without page_token';

/**
 * The last id shown before the page `token` starts, for a request with
 * `filter`; a token that is not one of ours, or one of another filter's
 * list, is refused (INVALID_ARGUMENT), saying how to go on.
 */
export function pageTokenStart(token: string, filter: string): number {
  checkMaxLength('page_token', token, MAX_PAGE_TOKEN_LENGTH);
  const bytes = BASE64URL.test(token) ? Buffer.from(token, 'base64url') : undefined;
  const foreign = new UserValidationError(
    'page_token',
    `page_token is not a token of this list (damaged, cut short or made by hand): pass the next page token exactly as it came, or ${START_AGAIN}`,
  );
  if (!bytes || bytes.length !== BYTES || bytes.toString('base64url') !== token || bytes.readUInt8(0) !== VERSION) throw foreign;
  if (!sha256(bytes.subarray(0, 17)).subarray(0, 4).equals(bytes.subarray(17))) throw foreign;
  const id = bytes.readBigUInt64BE(1);
  if (id < 1n || id > BigInt(Number.MAX_SAFE_INTEGER)) throw foreign;
  if (!fingerprint(filter).equals(bytes.subarray(9, 17))) {
    throw new UserValidationError(
      'page_token',
      `page_token belongs to a list with another filter: send the filter of the page it came with, or ${START_AGAIN}`,
    );
  }
  return Number(id);
}
