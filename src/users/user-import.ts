/**
 * `miniapp users bulk-create` without the rendering: reads a file of users
 * (import-file.ts), sends its rows over ImportUsers, and reports each row's
 * outcome as it is known, with the file's line. Rows that cannot be read
 * are failures at once and are not sent.
 */
import type { ImportControl, RowResult, UserServiceClient } from './client.js';
import { readImportFile, type ImportFormat } from './import-file.js';
import type { UserMessage } from './proto.js';

export interface RowFailure {
  /** The line of the file the row starts on. */
  line: number;
  /** 0-based position in the stream sent; null for a row not sent. */
  index: number | null;
  status: string;
  message: string;
}

/** What is known so far; `answered` counts rows whose outcome is final (created, refused, or not sent). */
interface ImportProgress {
  answered: number;
  created: number;
  failed: number;
  /** Rows sent to the server (ahead of `answered` while the server hashes). */
  sent: number;
}

export interface ImportHandlers {
  onProgress?(progress: ImportProgress): void;
  /** Each failure as it is known. */
  onFailure?(failure: RowFailure): void;
  /** Each user as the server stored it (ImportUsers only). */
  onCreated?(user: UserMessage, line: number): void;
  /** The server has no ImportUsers: the rows go through BulkCreateUsers, answered only at the end. */
  onFallback?(): void;
}

export interface ImportReport {
  created: number;
  /** Every failure, in file order. */
  failures: RowFailure[];
  format: ImportFormat;
  method: 'ImportUsers' | 'BulkCreateUsers';
}

/** `control.stop`: nothing more is sent, the rows sent are answered, and the report says what they became. */
export async function importUsers(
  client: UserServiceClient,
  input: AsyncIterable<Buffer | string>,
  handlers: ImportHandlers = {},
  control: ImportControl = {},
): Promise<ImportReport> {
  const file = readImportFile(input);
  const lineOfIndex: number[] = [];
  const failures: RowFailure[] = [];
  const progress: ImportProgress = { answered: 0, created: 0, failed: 0, sent: 0 };
  const report = () => handlers.onProgress?.({ ...progress });
  const fail = (failure: RowFailure) => {
    failures.push(failure);
    progress.answered++;
    progress.failed++;
    handlers.onFailure?.(failure);
    report();
  };
  const rows = (async function* () {
    for await (const item of file.items) {
      if ('problem' in item) {
        fail({ line: item.line, index: null, status: 'INVALID_ARGUMENT', message: `not sent: ${item.problem}` });
        continue;
      }
      lineOfIndex.push(item.line);
      yield item.request;
    }
  })();
  const method = await client.importUsers(
    rows,
    {
      onResult: (result: RowResult) => {
        const line = lineOfIndex[result.index] ?? 0;
        if ('failure' in result) {
          fail({ line, index: result.index, status: result.failure.status, message: result.failure.message });
          return;
        }
        progress.answered++;
        progress.created++;
        if (result.user) handlers.onCreated?.(result.user, line);
        report();
      },
      onSent: (count) => {
        progress.sent = count;
        report();
      },
      onFallback: () => handlers.onFallback?.(),
    },
    control,
  );
  failures.sort((a, b) => a.line - b.line);
  return { created: progress.created, failures, format: file.format(), method };
}
