/**
 * Files of users to create (`miniapp users bulk-create`): JSON lines, one
 * {"username","email","password","full_name"} object a line, or CSV with a
 * header row naming those columns. Read as they stream in, each row with
 * the line of the file it starts on; a row that cannot be read becomes a
 * problem at its line and is never sent. Messages never quote a row (it
 * holds a password).
 */
import { UsageError } from '../errors.js';
import { csvRecords } from '../csv-records.js';
import { linesOf } from '../lines.js';
import type { CreateUserRequest } from './proto.js';

const CREATE_FIELDS = ['username', 'email', 'password', 'full_name'] as const;

export type ImportFormat = 'jsonl' | 'csv' | 'empty';

/** One row of the file, in file order: a request to send, or why it cannot be sent. */
export type ImportItem = { line: number; request: CreateUserRequest } | { line: number; problem: string };

export interface ImportFile {
  items: AsyncIterable<ImportItem>;
  /** What the input turned out to be; known once the first item (or the end) has been read. */
  format(): ImportFormat;
}

/**
 * Looks at the input up to its first non-blank character, without
 * consuming it: `{` means JSON lines, anything else CSV.
 */
async function detectFormat(source: AsyncIterable<Buffer | string>): Promise<{ format: ImportFormat; input: AsyncIterable<Buffer | string> }> {
  const iterator = source[Symbol.asyncIterator]();
  const buffered: (Buffer | string)[] = [];
  let format: ImportFormat = 'empty';
  let done = false;
  let head = '';
  while (format === 'empty') {
    const next = await iterator.next();
    if (next.done) {
      done = true;
      break;
    }
    buffered.push(next.value);
    // latin1 keeps one character per byte: enough to find the first ASCII character after a UTF-8 BOM.
    head += typeof next.value === 'string' ? next.value : next.value.toString('latin1');
    const start = head.replace(/^(\u00ef\u00bb\u00bf|\uFEFF)/, '').trimStart();
    if (start.startsWith('[')) {
      throw new UsageError('the input is a JSON array; give JSON lines (one object a line) or CSV', {
        hint: "turn an array into JSON lines with: jq -c '.[]' FILE",
      });
    }
    if (start) format = start.startsWith('{') ? 'jsonl' : 'csv';
  }
  const input = (async function* () {
    yield* buffered;
    if (done) return;
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
  })();
  return { format, input };
}

/** JSON.parse's complaint without the text it quotes (a line may hold a password). */
export function jsonProblem(error: unknown): string {
  const position = /position (\d+)/.exec((error as Error).message)?.[1];
  return `not valid JSON${position ? ` (at character ${Number(position) + 1})` : ''}`;
}

export function unknownKeys(object: Record<string, unknown>, allowed: readonly string[]): string[] {
  return Object.keys(object).filter((key) => !allowed.includes(key));
}

/** A JSON line as a CreateUserRequest, or why it is not one. */
function createRequestOf(text: string): CreateUserRequest | string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return jsonProblem(error);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return 'not a JSON object';
  const object = parsed as Record<string, unknown>;
  const unknown = unknownKeys(object, CREATE_FIELDS);
  if (unknown.length > 0)
    return `unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => JSON.stringify(k)).join(', ')}; expected ${CREATE_FIELDS.join(', ')}`;
  const request = { username: '', email: '', password: '', full_name: '' };
  for (const field of CREATE_FIELDS) {
    const value = object[field];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string') return `${field} must be a string`;
    request[field] = value;
  }
  return request;
}

/** The rows of a JSON-lines or CSV input, parsed as they are read. */
export function readImportFile(input: AsyncIterable<Buffer | string>): ImportFile {
  let format: ImportFormat = 'empty';
  const items = async function* (): AsyncGenerator<ImportItem> {
    const detected = await detectFormat(input);
    format = detected.format;
    if (format === 'jsonl') yield* jsonRows(detected.input);
    else if (format === 'csv') yield* csvRows(detected.input);
  };
  return { items: items(), format: () => format };
}

/** How many rows (good or not) the input holds, by the same reading as `readImportFile`. */
export async function countImportRows(input: AsyncIterable<Buffer | string>): Promise<number> {
  let rows = 0;
  for await (const _item of readImportFile(input).items) rows++;
  return rows;
}

async function* jsonRows(input: AsyncIterable<Buffer | string>): AsyncGenerator<ImportItem> {
  for await (const { text, line } of linesOf(input)) {
    if (!text.trim()) continue;
    const request = createRequestOf(text);
    yield typeof request === 'string' ? { line, problem: request } : { line, request };
  }
}

async function* csvRows(input: AsyncIterable<Buffer | string>): AsyncGenerator<ImportItem> {
  let columns: string[] | undefined;
  for await (const record of csvRecords(input)) {
    if (!columns) {
      if ('error' in record) throw headerError(record.line, `: ${record.error}`);
      columns = checkHeader(record.fields, record.line);
      continue;
    }
    if ('error' in record) {
      yield { line: record.line, problem: record.error };
      continue;
    }
    if (record.fields.length !== columns.length) {
      yield { line: record.line, problem: `${record.fields.length} field${record.fields.length === 1 ? '' : 's'} where the header has ${columns.length}` };
      continue;
    }
    const request = { username: '', email: '', password: '', full_name: '' };
    columns.forEach((name, i) => {
      request[name as (typeof CREATE_FIELDS)[number]] = record.fields[i]!;
    });
    yield { line: record.line, request };
  }
}

function headerError(line: number, detail: string): UsageError {
  return new UsageError(`the CSV header (line ${line}) must name the columns username, email, password and optionally full_name${detail}`, {
    hint: 'the first line of a CSV file is its header, e.g. username,email,password,full_name',
  });
}

function checkHeader(fields: string[], line: number): string[] {
  const columns = fields.map((name) => name.trim().toLowerCase());
  const unknown = columns.filter((name) => !(CREATE_FIELDS as readonly string[]).includes(name));
  const missing = ['username', 'email', 'password'].filter((name) => !columns.includes(name));
  const repeated = columns.filter((name, i) => columns.indexOf(name) !== i);
  if (unknown.length || missing.length || repeated.length) {
    // Without the required names the first line may be a data row (a password among it): name no cell then.
    const detail = missing.length
      ? `; missing: ${missing.join(', ')}`
      : `${unknown.length ? `; unknown: ${unknown.join(', ')}` : ''}${repeated.length ? `; repeated: ${repeated.join(', ')}` : ''}`;
    throw headerError(line, detail);
  }
  return columns;
}
