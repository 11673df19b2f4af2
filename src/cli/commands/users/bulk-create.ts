/** `miniapp users bulk-create`: a file of users over ImportUsers, with a progress line and every failure by its line. */
import type { Command } from 'commander';
import type { CommandContext } from '../../context.js';
import type { ConnectionFlags } from '../../connect/grpc-connection.js';
import { InterruptedError, MiniappError } from '../../../errors.js';
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
  const flags = command.opts<ConnectionFlags & { skipExisting?: boolean }>();
  const file = command.processedArgs[0] as string;
  const [{ importUsers }, { countImportRows }, { fileProgress }] = await Promise.all([
    import('../../../users/user-import.js'),
    import('../../../users/import-file.js'),
    import('../../terminal/file-progress.js'),
  ]);
  // Ctrl-C stops the import rather than the process: what was sent and created is said before it ends.
  const stopped = cc.waitForShutdown();
  let latest = { answered: 0, created: 0, failed: 0, sent: 0 };
  let refusedByServer = 0;
  const report = await withClient(cc, flags, async (client) => {
    const input = await openInput(file, cc.io.stdin, { what: 'users' });
    await client.ready();
    const progress = await fileProgress(cc, file, { unit: 'rows', verb: 'importing', count: countImportRows });
    let fallback = false;
    try {
      const work = importUsers(client, input, {
        onProgress: (now) => {
          latest = now;
          progress.update({ done: now.answered, counts: fallback ? { sent: now.sent, created: now.created, failed: now.failed } : { created: now.created, failed: now.failed } });
        },
        onFailure: (failure) => {
          if (failure.index !== null) refusedByServer++;
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
      const outcome = await Promise.race([work.then((done) => ({ done })), stopped.then((signal) => ({ signal }))]);
      if ('done' in outcome) return outcome.done;
      // The stream is cancelled when the client closes; what it says after that is of no interest.
      work.catch(() => undefined);
      progress.finish();
      const unanswered = Math.max(0, latest.sent - latest.created - refusedByServer);
      throw new InterruptedError(
        `interrupted (${outcome.signal}): ${latest.sent} row${latest.sent === 1 ? '' : 's'} sent, ${latest.created} created, ${latest.failed} failed` +
          `${unanswered > 0 ? `, ${unanswered} sent without an answer (they may have been created)` : ''}; the rest of ${file === '-' ? 'stdin' : file} was not sent`,
        { hint: `to go on, run it again with --skip-existing: rows already created are skipped, not failed (miniapp users bulk-create ${file === '-' ? '-' : file} --skip-existing)` },
      );
    } finally {
      progress.finish();
    }
  });
  const skipped = flags.skipExisting ? report.failures.filter((f) => f.status === 'ALREADY_EXISTS') : [];
  const failures = flags.skipExisting ? report.failures.filter((f) => f.status !== 'ALREADY_EXISTS') : report.failures;
  const { created } = report;
  const total = created + failures.length;
  if (cc.out.json) {
    cc.out.printJson({ created, failed: failures.length, ...(flags.skipExisting ? { skipped: skipped.length } : {}), failures });
  } else {
    const summary = `created ${created}${flags.skipExisting ? `, skipped ${skipped.length} already there` : ''}, failed ${failures.length}`;
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
      hint: failures.some((f) => f.status === 'ALREADY_EXISTS')
        ? 'fix the rows listed and run bulk-create again with just those, or with --skip-existing to pass over users already there'
        : 'fix the rows listed and run bulk-create again with just those',
    });
  }
}
