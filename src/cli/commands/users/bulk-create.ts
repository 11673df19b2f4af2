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
  // Ctrl-C stops the sending at once, and the import ends when serve has answered every row sent: the counts printed
  // are then what serve did. A second Ctrl-C cancels the call without that answer, and says what is not known.
  const stop = new AbortController();
  const cancel = new AbortController();
  let signal: string | undefined;
  let cancelled = false;
  let latest = { answered: 0, created: 0, failed: 0, sent: 0 };
  let refusedByServer = 0;
  // With --skip-existing, rows whose user is already there are skipped, not failed: counted and said apart.
  let skippedSoFar = 0;
  const where = file === '-' ? 'stdin' : file;
  const again = {
    hint: `to go on, run it again with --skip-existing: rows already created are skipped, not failed (miniapp users bulk-create ${file === '-' ? '-' : file} --skip-existing)`,
  };
  const report = await withClient(cc, flags, async (client) => {
    const input = await openInput(file, cc.io.stdin, { what: 'users' });
    await client.ready();
    const progress = await fileProgress(cc, file, { unit: 'rows', verb: 'importing', count: countImportRows });
    let fallback = false;
    const counts = (): Record<string, number> => ({
      ...(fallback ? { sent: latest.sent } : {}),
      created: latest.created,
      ...(flags.skipExisting ? { skipped: skippedSoFar } : {}),
      failed: latest.failed - skippedSoFar,
    });
    const draw = (force = false) => {
      const waiting = latest.sent - latest.created - refusedByServer;
      const note = signal === undefined ? undefined : `stopping: ${waiting} answer${waiting === 1 ? '' : 's'} to come`;
      progress.update({ done: latest.answered, counts: counts(), note }, force);
    };
    let finished = false;
    void cc.waitForShutdown().then((name) => {
      if (finished) return;
      signal = name;
      stop.abort();
      progress.log(`stopping (${name}): nothing more is sent; waiting for serve's answer to the rows sent (Ctrl-C again to stop without it)`);
      draw(true);
      void cc.waitForShutdown().then(() => {
        if (finished) return;
        cancelled = true;
        cancel.abort();
      });
    });
    try {
      return await importUsers(
        client,
        input,
        {
          onProgress: (now) => {
            latest = now;
            draw();
          },
          onFailure: (failure) => {
            if (failure.index !== null) refusedByServer++;
            if (flags.skipExisting && failure.status === 'ALREADY_EXISTS') {
              skippedSoFar++;
              return;
            }
            if (progress.live) progress.log(cc.out.errColor.red(`line ${failure.line}: ${failure.status}: ${failure.message}`));
          },
          onFallback: () => {
            fallback = true;
            progress.log(
              `${cc.out.errColor.yellow('warning:')} the server has no ImportUsers (an older miniapp serve): sending with BulkCreateUsers, ` +
                'which answers only once every row is in',
            );
          },
        },
        { stop: stop.signal, cancel: cancel.signal },
      );
    } catch (error) {
      if (!cancelled) throw error;
      // Cancelled: the call's end says nothing more than the counts below.
      return undefined;
    } finally {
      finished = true;
      progress.finish();
    }
  });
  if (signal !== undefined) {
    const rows = (n: number) => `${n} row${n === 1 ? '' : 's'}`;
    const skippedPart = flags.skipExisting ? `, ${skippedSoFar} skipped already there` : '';
    const sent = `${rows(latest.sent)} sent, ${latest.created} created${skippedPart}, ${latest.failed - skippedSoFar} failed`;
    const unanswered = Math.max(0, latest.sent - latest.created - refusedByServer);
    throw new InterruptedError(
      cancelled && unanswered > 0
        ? `interrupted (${signal}, then cancelled): ${sent}; ${rows(unanswered)} sent had no answer when the call was cancelled, and serve may have created some of them; the rest of ${where} was not sent`
        : `interrupted (${signal}): ${sent}, as serve answered for every row sent; the rest of ${where} was not sent`,
      again,
    );
  }
  if (!report) throw new Error('bulk-create ended without a report');
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
