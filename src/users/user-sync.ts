/**
 * `miniapp users sync` without the rendering: reads a file of sync requests
 * (sync-file.ts), sends them over SyncUsers, and hands over each result in
 * the order of the file, as soon as it is known. A line that is no request
 * is a failure in its place and is not sent.
 */
import type { UserServiceClient, UserSyncResponse } from './client.js';
import { readSyncFile, type SyncOp } from './sync-file.js';
import type { UserMessage } from './proto.js';

export interface SyncResult {
  ref: string;
  line: number;
  /** null for a line that was not sent. */
  op: SyncOp | null;
  ok: boolean;
  user: UserMessage | null;
  /** OK, or the status name of the failure. */
  status: string;
  message: string;
}

export async function syncUsers(
  client: UserServiceClient,
  input: AsyncIterable<Buffer | string>,
  onResult: (result: SyncResult) => void,
): Promise<{ applied: number; failed: number }> {
  const counts = { applied: 0, failed: 0 };
  const emit = (result: SyncResult) => {
    if (result.ok) counts.applied++;
    else counts.failed++;
    onResult(result);
  };
  // Everything of the input in order: lines not sent wait for the answers to the lines before them.
  const order: ({ sent: true; ref: string; line: number; op: SyncOp } | { sent: false; result: SyncResult })[] = [];
  const flushLocal = () => {
    while (order[0] && !order[0].sent) emit((order.shift() as { result: SyncResult }).result);
  };
  const requests = (async function* () {
    for await (const item of readSyncFile(input)) {
      if ('problem' in item) {
        order.push({
          sent: false,
          result: { ref: item.ref, line: item.line, op: null, ok: false, user: null, status: 'INVALID_ARGUMENT', message: `not sent: ${item.problem}` },
        });
        flushLocal();
        continue;
      }
      order.push({ sent: true, ref: item.request.client_ref, line: item.line, op: item.op });
      yield item.request;
    }
  })();
  await client.sync(requests, (response: UserSyncResponse) => {
    flushLocal();
    const head = order.shift();
    const sent = head?.sent ? head : { ref: response.client_ref, line: 0, op: null };
    const ok = response.result === 'user';
    emit({
      ref: response.client_ref || sent.ref,
      line: sent.line,
      op: sent.op,
      ok,
      user: ok ? (response.user ?? null) : null,
      status: ok ? 'OK' : (response.failure?.status ?? 'UNKNOWN'),
      message: ok ? '' : (response.failure?.message ?? 'no result'),
    });
  });
  flushLocal();
  return counts;
}
