/**
 * Where and how a command's rows go: a table on the terminal, CSV or JSON
 * on stdout, or a file written whole (`--output FILE`) with a note on
 * stderr.
 */
import type { CommandContext } from '../context.js';
import type { Column } from '../render/output.js';
import { writeAtomically } from './files.js';
import { UsageError } from '../../errors.js';

/** `html`: one self-contained page of charts and tables (insights only; written by src/cli/views/insights-charts.ts). */
export type Format = 'table' | 'csv' | 'json' | 'html';

/** --json, else --format, else by the --output file's name (.json, .html or CSV), else a table. */
export function formatOf(cc: CommandContext, format: Format | undefined, output: string | undefined): Format {
  if (cc.out.json) {
    if (format !== undefined && format !== 'json') throw new UsageError(`--json and --format ${format} contradict each other; give one of them`);
    return 'json';
  }
  if (format !== undefined) {
    if (format === 'table' && output !== undefined) throw new UsageError('a table is for the terminal: use --format csv or json with --output');
    return format;
  }
  if (output !== undefined) return /\.json$/i.test(output) ? 'json' : /\.html?$/i.test(output) ? 'html' : 'csv';
  return 'table';
}

export interface Emit<Row> {
  format: Format;
  output: string | undefined;
  rows: readonly Row[];
  columns: readonly Column<Row>[];
  json: unknown;
  /** What the rows are, for the note: "media rows", "days". */
  what: string;
}

/** Data to stdout in the chosen format, or to --output with a one-line note on stderr. */
export async function emit<Row>(cc: CommandContext, { format, output, rows, columns, json, what }: Emit<Row>): Promise<void> {
  if (output !== undefined) {
    await writeAtomically(output, format === 'json' ? `${JSON.stringify(json, null, 2)}\n` : cc.out.csv(rows, columns));
    cc.out.info(`wrote ${rows.length} ${what} to ${output}`);
    return;
  }
  if (format === 'csv') cc.out.write(cc.out.csv(rows, columns));
  else if (format === 'json') cc.out.printJson(json);
  else cc.out.table(rows, columns, json);
}
