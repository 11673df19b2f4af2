/** `miniapp users sync`: upserts and deletes over one stream, each result printed as it comes. */
import type { Command } from 'commander';
import type { CommandContext } from '../../context.js';
import type { ConnectionFlags } from '../../connect/grpc-connection.js';
import { MiniappError } from '../../../errors.js';
import type { Column } from '../../render/output.js';
import { openInput } from '../../terminal/input.js';
import { userJson } from '../../views/grpc-user-view.js';
import type { SyncResult } from '../../../users/user-sync.js';
import { withClient } from './shared.js';

const SYNC_COLUMNS: readonly Column<SyncResult>[] = [
  { header: 'ref', value: (r) => r.ref },
  { header: 'op', value: (r) => r.op ?? '' },
  { header: 'result', value: (r) => (r.ok ? 'ok' : 'failed') },
  { header: 'id', value: (r) => (r.user ? userJson(r.user).id : undefined) },
  { header: 'username', value: (r) => r.user?.username },
  { header: 'status', value: (r) => r.status },
  { header: 'message', value: (r) => r.message, maxWidth: 70 },
];

function syncResultJson(result: SyncResult): Record<string, unknown> {
  return result.ok
    ? { ref: result.ref, line: result.line, op: result.op, ok: true, user: result.user ? userJson(result.user) : null }
    : { ref: result.ref, line: result.line, op: result.op, ok: false, status: result.status, message: result.message };
}

export async function runSync(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags>();
  const file = command.processedArgs[0] as string;
  const [{ syncUsers }, { countSyncRequests }, { fileProgress }] = await Promise.all([
    import('../../../users/user-sync.js'),
    import('../../../users/sync-file.js'),
    import('../../terminal/file-progress.js'),
  ]);
  const results: SyncResult[] = [];
  const counts = await withClient(cc, flags, async (client) => {
    const input = await openInput(file, cc.io.stdin, { what: 'sync requests' });
    await client.ready();
    const progress = await fileProgress(cc, file, { unit: 'requests', verb: 'syncing', count: countSyncRequests });
    const done = { applied: 0, failed: 0 };
    try {
      return await syncUsers(client, input, (result) => {
        if (result.ok) done.applied++;
        else done.failed++;
        if (cc.out.json) cc.out.line(JSON.stringify(syncResultJson(result)));
        else if (cc.out.isTTY) results.push(result);
        else cc.out.table([result], SYNC_COLUMNS);
        if (!result.ok && progress.live) progress.log(cc.out.errColor.red(`line ${result.line} (${result.ref}): ${result.status}: ${result.message}`));
        progress.update({ done: done.applied + done.failed, counts: { ...done } });
      });
    } finally {
      progress.finish();
    }
  });
  if (cc.out.isTTY && !cc.out.json) cc.out.table(results, SYNC_COLUMNS);
  if (counts.failed > 0) throw new MiniappError(`${counts.failed} sync request${counts.failed === 1 ? ' was' : 's were'} not applied`);
}
