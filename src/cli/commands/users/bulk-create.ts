/** `miniapp users bulk-create`: a file of users over ImportUsers, with a progress line and every failure by its line. */
import type { Command } from 'commander';
import type { CommandContext } from '../../context.js';
import type { ConnectionFlags } from '../../connect/grpc-connection.js';
import { MiniappError } from '../../../errors.js';
import type { Column } from '../../render/output.js';
import { openInput } from '../../terminal/input.js';
import type { RowFailure } from '../../../users/user-import.js';
import { withClient } from './shared.js';

const FAILURE_COLUMNS: readonly Column<RowFailure>[] = [
  { header: 'line', value: (f) => f.line },
  { header: 'index', value: (f) => f.index },
  { header: 'status', value: (f) => f.status },
  { header: 'message', value: (f) => f.message, maxWidth: 80 },
];

export async function runBulkCreate(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags>();
  const file = command.processedArgs[0] as string;
  const [{ importUsers }, { countImportRows }, { fileProgress }] = await Promise.all([
    import('../../../users/user-import.js'),
    import('../../../users/import-file.js'),
    import('../../terminal/file-progress.js'),
  ]);
  const report = await withClient(cc, flags, async (client) => {
    const input = await openInput(file, cc.io.stdin, { what: 'users' });
    await client.ready();
    const progress = await fileProgress(cc, file, { unit: 'rows', verb: 'importing', count: countImportRows });
    let fallback = false;
    try {
      return await importUsers(client, input, {
        onProgress: ({ answered, created, failed, sent }) =>
          progress.update({ done: answered, counts: fallback ? { sent, created, failed } : { created, failed } }),
        onFailure: (failure) => {
          if (progress.live) progress.log(cc.out.errColor.red(`line ${failure.line}: ${failure.status}: ${failure.message}`));
        },
        onFallback: () => {
          fallback = true;
          progress.log(
            `${cc.out.errColor.yellow('warning:')} the server has no ImportUsers (an older miniapp serve): sending with BulkCreateUsers, ` +
              'which answers only once every row is in',
          );
        },
      });
    } finally {
      progress.finish();
    }
  });
  const { created, failures } = report;
  const total = created + failures.length;
  if (cc.out.json) {
    cc.out.printJson({ created, failed: failures.length, failures });
  } else {
    const summary = `created ${created}, failed ${failures.length}`;
    if (cc.out.isTTY) {
      cc.out.line(failures.length ? cc.out.color.bold(summary) : summary);
      if (failures.length) cc.out.table(failures, FAILURE_COLUMNS);
    } else {
      // Piped: stdout holds only the failure rows; the summary is for the person.
      cc.out.info(summary);
      cc.out.table(failures, FAILURE_COLUMNS);
    }
  }
  if (report.format === 'empty') cc.out.warn(`${file === '-' ? 'stdin' : file} held no users`);
  if (failures.length > 0) {
    throw new MiniappError(`${failures.length} of ${total} user${total === 1 ? '' : 's'} were not created`, {
      hint: 'fix the rows listed and run bulk-create again with just those',
    });
  }
}
