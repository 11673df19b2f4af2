/**
 * ListUsers (user.v1): one page of users in id order, or every user, with
 * what a client needs to page on in the call's initial metadata (total,
 * page size, next page token: proto.ts's headers).
 *
 * Pages are found by page token (AIP-158, page-token.ts: keyset, after the
 * last id shown) or, as before tokens, by number (an OFFSET). Every user
 * (page_size 0, the reference's behaviour) is read and sent in batches, as
 * fast as the client takes them: a client that stops reading holds the
 * server at the next write, and one that cancels stops the reading.
 *
 * Each user goes out as the caller may see it (visibility.ts), as the
 * caller is at that moment: a long list of every user follows a token
 * whose roles change while it runs.
 */
import { once } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { RpcError } from '../grpc/status.js';
import { MAX_PAGE_TOKEN_LENGTH, pageToken, pageTokenStart } from './page-token.js';
import type { Principal } from '../auth/tokens.js';
import { LIST_NEXT_PAGE_TOKEN_HEADER, LIST_PAGE_SIZE_HEADER, LIST_TOTAL_HEADER, type UserMessage } from './proto.js';
import { searchesEmails, userFor } from './visibility.js';
import type { UserSearch } from './user-search.js';
import { checkMaxLength, type UserStore } from './user-store.js';

const { status: Status } = grpc;

/** The most users a page holds; a larger page_size is clamped to it. */
const MAX_PAGE_SIZE = 100;
/** Users read at a time when every user is asked for: what the server holds of them at once. */
export const LIST_BATCH = 500;

interface ListUsersRequest {
  page: number;
  page_size: number;
  filter: string;
  page_token: string;
}

export type ListUsersCall = grpc.ServerWritableStream<ListUsersRequest, UserMessage>;

/** Answers one ListUsers call for `viewer` (who the caller is now); throws what the call should end with. */
export async function listUsers(call: ListUsersCall, users: UserStore, viewer: () => Principal): Promise<void> {
  const { page, page_size: pageSize, filter } = call.request;
  const token = call.request.page_token ?? '';
  if (page < 0) throw new RpcError(Status.INVALID_ARGUMENT, 'page must not be negative');
  if (pageSize < 0) throw new RpcError(Status.INVALID_ARGUMENT, 'page_size must not be negative');
  checkMaxLength('page_token', token, MAX_PAGE_TOKEN_LENGTH);
  if (token && page > 1) {
    throw new RpcError(
      Status.INVALID_ARGUMENT,
      'page and page_token both say where the page starts: send page_token alone (page 0), or page without page_token',
    );
  }
  const search = users.search(filter ?? '', searchesEmails(viewer()) ? 'all' : 'public');
  const afterId = token ? pageTokenStart(token, search.filter) : 0;
  const size = pageSize === 0 ? undefined : Math.min(pageSize, MAX_PAGE_SIZE);
  const metadata = new grpc.Metadata();
  metadata.set(LIST_TOTAL_HEADER, String(await search.count()));
  metadata.set(LIST_PAGE_SIZE_HEADER, String(size ?? 0));
  if (size === undefined) {
    call.sendMetadata(metadata);
    await sendEveryUser(call, search, afterId, viewer);
    return;
  }
  // One user more than the page: whether there is a next page is known before the metadata goes.
  const read = await search.page({ afterId, offset: token ? 0 : (Math.max(page, 1) - 1) * size, limit: size + 1 });
  const shown = read.slice(0, size);
  if (read.length > size) metadata.set(LIST_NEXT_PAGE_TOKEN_HEADER, pageToken(shown.at(-1)!.id, search.filter));
  call.sendMetadata(metadata);
  for (const user of shown) call.write(userFor(viewer(), user));
  call.end();
}

/** Every user of `search` after `afterId`, a batch at a time, each batch read once the client has taken the last. */
async function sendEveryUser(call: ListUsersCall, search: UserSearch, afterId: number, viewer: () => Principal): Promise<void> {
  let gone = call.cancelled;
  const leave = () => {
    gone = true;
  };
  call.once('cancelled', leave);
  try {
    for (let after = afterId; !gone; ) {
      const batch = await search.page({ afterId: after, offset: 0, limit: LIST_BATCH });
      for (const user of batch) {
        if (gone) return;
        if (!call.write(userFor(viewer(), user))) await drained(call);
      }
      if (batch.length < LIST_BATCH) break;
      after = batch.at(-1)!.id;
    }
    if (!gone) call.end();
  } finally {
    call.removeListener('cancelled', leave);
  }
}

/** Resolves when the call can take more (its buffer drained), or will take none (cancelled, closed). */
async function drained(call: ListUsersCall): Promise<void> {
  const waiting = new AbortController();
  const { signal } = waiting;
  await Promise.race(['drain', 'cancelled', 'close'].map((event) => once(call, event, { signal }).catch(() => undefined)));
  waiting.abort();
}
