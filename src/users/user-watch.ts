/**
 * WatchUserChanges (user.v1): the changes of the change feed a watcher may
 * see (visibility.ts: a user token its own, the admin everyone's), each as
 * the watcher is now, written only as fast as the client reads
 * (StreamOutbox: 1,000 unread changes, or a minute in which the client read
 * nothing while changes waited, end the watch RESOURCE_EXHAUSTED, with the
 * resume_after to go on from), a catch-up read from the log a page
 * at a time, and at most so many watches per account and in all
 * (StreamQuota).
 */
import * as grpc from '@grpc/grpc-js';
import type { Principal } from '../auth/tokens.js';
import type { CallAuth } from '../grpc/call-auth.js';
import { failStream as endStream, RpcError } from '../grpc/status.js';
import { DEFAULT_MAX_STALL_MS, StreamOutbox } from '../grpc/stream-outbox.js';
import { QuotaExceeded, type StreamQuota } from '../grpc/stream-quota.js';
import type { UserChange } from './change-log.js';
import { ResumeOutOfRange, type UserChangeFeed } from './change-feed.js';
import { toTimestamp, watchPositionHeaders, type EventTypeName, type UserMessage } from './proto.js';
import { REQUEST_LIMITS, toStatus, userIdOf } from './rpc-common.js';
import { EVENT_TYPES } from './user-record.js';
import { checkMaxEntries } from './user-store.js';
import { seesWhole, userFor, watchesEveryone } from './visibility.js';

const { status: Status } = grpc;

interface UserEventMessage {
  type: EventTypeName;
  user: UserMessage;
  timestamp: ReturnType<typeof toTimestamp>;
  /** The change's number in the log (int64 as a string). */
  sequence: string;
}

function eventMessage(change: UserChange, user: UserMessage): UserEventMessage {
  return { type: change.type, user, timestamp: toTimestamp(new Date(change.at)), sequence: String(change.seq) };
}

export type WatchCall = grpc.ServerWritableStream<{ user_id: string; types: EventTypeName[]; resume_after?: string }, UserEventMessage>;

export interface WatchDeps {
  auth: CallAuth;
  changes: UserChangeFeed;
  quota: StreamQuota;
  /** The service's streams that end only at shutdown: the watch is in it while it lives. */
  open: Set<{ emit(event: 'error', error: grpc.ServerErrorResponse): boolean }>;
  /** How long a watcher may read nothing while changes wait for it (DEFAULT_MAX_STALL_MS when absent). */
  maxStallMs?: number | undefined;
}

function failStream(call: { emit(event: 'error', error: grpc.ServerErrorResponse): boolean }, error: unknown): void {
  endStream(call, toStatus(error));
}

export async function watchUserChanges(call: WatchCall, deps: WatchDeps): Promise<void> {
  let after: number | undefined;
  let userId: number;
  try {
    checkMaxEntries('types', call.request.types ?? [], REQUEST_LIMITS.watchTypes);
    // A filter no change can match would wait in silence for ever: refused at once, as GetUser refuses the same id.
    for (const type of call.request.types ?? []) {
      if (!(EVENT_TYPES as readonly string[]).includes(type))
        throw new RpcError(Status.INVALID_ARGUMENT, `types: ${String(type)} is not an event type (${EVENT_TYPES.join(', ')})`);
    }
    userId = call.request.user_id !== undefined && Number(call.request.user_id) !== 0 ? userIdOf(call.request.user_id) : 0;
    // Present only when the client set it (proto3 optional): 0 resumes from the first change, unset from now on.
    if (call.request.resume_after !== undefined) {
      after = Number(call.request.resume_after);
      if (!Number.isSafeInteger(after) || after < 0)
        throw new RpcError(Status.INVALID_ARGUMENT, `resume_after must be a change's sequence (0 or more); got ${call.request.resume_after}`);
    }
  } catch (error) {
    failStream(call, error);
    return;
  }
  const types = new Set(call.request.types ?? []);
  // Others' whole records need the admin role: without it, a watch of everyone (user_id 0) is a watch of oneself.
  const watched = (principal: Principal) => (userId === 0 && !watchesEveryone(principal) ? principal.userId : userId);
  let release = () => {};
  const open = await openStream(deps.auth, call, {
    require: (principal) => {
      if (userId !== 0 && !seesWhole(principal, userId)) throw new RpcError(Status.PERMISSION_DENIED, "watching another user's changes needs the admin role");
    },
    end: (status) => {
      release();
      endStream(call, status);
    },
  });
  if (!open || call.cancelled) return;
  let giveBack: () => void;
  try {
    giveBack = deps.quota.acquire(open.principal);
  } catch (error) {
    if (!(error instanceof QuotaExceeded)) throw error;
    endStream(call, error.status);
    return;
  }
  let wrote = false;
  let lastSent = after ?? 0;
  const maxStallMs = deps.maxStallMs ?? DEFAULT_MAX_STALL_MS;
  const outbox = new StreamOutbox<UserEventMessage>(call, {
    maxStallMs,
    onOverflow: (reason) => {
      release();
      const why =
        reason === 'unread' ? `${outbox.maxUnread} changes waited to be read` : `nothing was read for ${Math.round(maxStallMs / 1000)} s while changes waited`;
      endStream(call, {
        code: Status.RESOURCE_EXHAUSTED,
        details: `${why}: a watcher that does not read is disconnected; watch again with resume_after ${lastSent} to go on from there`,
      });
    },
  });
  const listener = (change: UserChange) => {
    if (call.writableEnded || call.destroyed || outbox.closed) return;
    const principal = open.principal;
    const only = watched(principal);
    if (only && change.user.id !== only) return;
    if (types.size > 0 && !types.has(change.type)) return;
    wrote = true;
    if (outbox.write(eventMessage(change, userFor(principal, change.user)))) lastSent = change.seq;
  };
  const watcher = deps.changes.watch(listener, { after, room: () => outbox.room(), only: () => watched(open.principal) || undefined });
  deps.open.add(call);
  let released = false;
  release = () => {
    if (released) return;
    released = true;
    watcher.release();
    outbox.close();
    giveBack();
    deps.open.delete(call);
  };
  call.once('cancelled', release);
  call.once('close', release);
  call.once('error', release);
  call.once('finish', release);
  try {
    const position = await watcher.live;
    // Where the watch starts, at once: a client whose stream breaks before its first change resumes after it.
    if (!wrote && !call.writableEnded && !call.destroyed && !call.cancelled) call.sendMetadata(watchPositionHeaders(position));
  } catch (error) {
    release();
    failStream(call, error instanceof ResumeOutOfRange ? new RpcError(Status.OUT_OF_RANGE, error.message) : error);
  }
}

async function openStream(
  auth: CallAuth,
  call: WatchCall,
  options: Parameters<CallAuth['open']>[1],
): Promise<Awaited<ReturnType<CallAuth['open']>> | undefined> {
  try {
    return await auth.open(call, options);
  } catch (error) {
    failStream(call, error);
    return undefined;
  }
}
