/**
 * Files of sync requests (`miniapp users sync`): JSON lines such as
 * {"ref":"r1","upsert":{...}} or {"ref":"r3","delete":9}, read as they
 * stream in, each with its line. A line that is no request becomes a
 * problem at its line (with the ref when it has one) and is never sent.
 */
import { linesOf } from '../lines.js';
import { jsonProblem, unknownKeys } from './import-file.js';
import type { SyncUser, UserSyncRequest } from './client.js';

const SYNC_KEYS = ['ref', 'upsert', 'delete'] as const;
const UPSERT_KEYS = ['id', 'username', 'email', 'full_name', 'is_active', 'roles', 'password'] as const;

export type SyncOp = 'create' | 'update' | 'delete';

/** One line of the file, in file order: a request to send, or why it cannot be sent. */
export type SyncItem = { line: number; request: UserSyncRequest; op: SyncOp } | { line: number; ref: string; problem: string };

function positiveIdOf(value: unknown): string | undefined {
  const text = typeof value === 'number' ? String(value) : typeof value === 'string' ? value.trim() : '';
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text)) || Number(text) < 1) return undefined;
  return String(Number(text));
}

/** A JSON line as a sync request, or why it is not one (with the line's ref, else "line N"). */
function syncRequestOf(text: string, line: number): { request: UserSyncRequest; op: SyncOp } | { ref: string; problem: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return { ref: `line ${line}`, problem: jsonProblem(error) };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return { ref: `line ${line}`, problem: 'not a JSON object' };
  const object = parsed as Record<string, unknown>;
  const ref = typeof object.ref === 'string' || typeof object.ref === 'number' ? String(object.ref) : `line ${line}`;
  const fail = (problem: string) => ({ ref, problem });
  if (object.ref !== undefined && typeof object.ref !== 'string' && typeof object.ref !== 'number') return fail('ref must be a string');
  const unknown = unknownKeys(object, SYNC_KEYS);
  if (unknown.length > 0) return fail(`unknown field ${unknown.map((k) => JSON.stringify(k)).join(', ')}; expected ref and one of upsert, delete`);
  if ((object.upsert === undefined) === (object.delete === undefined)) return fail('each line needs exactly one of "upsert" and "delete"');
  if (object.delete !== undefined) {
    const id = positiveIdOf(object.delete);
    if (!id) return fail('delete must be a positive user id');
    return { request: { client_ref: ref, delete_user_id: id }, op: 'delete' };
  }
  const upsert = object.upsert;
  if (typeof upsert !== 'object' || upsert === null || Array.isArray(upsert)) return fail('upsert must be an object');
  const fields = upsert as Record<string, unknown>;
  const unknownFields = unknownKeys(fields, UPSERT_KEYS);
  if (unknownFields.length > 0)
    return fail(`unknown upsert field ${unknownFields.map((k) => JSON.stringify(k)).join(', ')}; expected ${UPSERT_KEYS.join(', ')}`);
  let id = '0';
  if (fields.id !== undefined && fields.id !== null && fields.id !== 0 && fields.id !== '0') {
    const parsedId = positiveIdOf(fields.id);
    if (!parsedId) return fail('upsert.id must be a positive user id');
    id = parsedId;
  }
  const strings: Record<string, string> = {};
  for (const field of ['username', 'email', 'full_name', 'password'] as const) {
    const value = fields[field];
    if (value !== undefined && value !== null && typeof value !== 'string') return fail(`upsert.${field} must be a string`);
    strings[field] = (value as string | undefined) ?? '';
  }
  if (fields.is_active !== undefined && typeof fields.is_active !== 'boolean') return fail('upsert.is_active must be true or false');
  if (fields.roles !== undefined && (!Array.isArray(fields.roles) || fields.roles.some((r) => typeof r !== 'string'))) {
    return fail('upsert.roles must be a list of strings');
  }
  const user: SyncUser = {
    id,
    username: strings.username!,
    email: strings.email!,
    full_name: strings.full_name!,
    // The server replaces the whole user: an absent is_active would otherwise deactivate.
    is_active: (fields.is_active as boolean | undefined) ?? true,
    roles: (fields.roles as string[] | undefined) ?? [],
  };
  return { request: { client_ref: ref, upsert: { user, password: strings.password! } }, op: id === '0' ? 'create' : 'update' };
}

/** The requests of a sync input, parsed as they are read; blank lines are skipped. */
export async function* readSyncFile(input: AsyncIterable<Buffer | string>): AsyncGenerator<SyncItem> {
  for await (const { text, line } of linesOf(input)) {
    if (!text.trim()) continue;
    const parsed = syncRequestOf(text, line);
    yield 'problem' in parsed ? { line, ref: parsed.ref, problem: parsed.problem } : { line, request: parsed.request, op: parsed.op };
  }
}

/** How many requests (good or not) the input holds. */
export async function countSyncRequests(input: AsyncIterable<Buffer | string>): Promise<number> {
  let requests = 0;
  for await (const { text } of linesOf(input)) if (text.trim()) requests++;
  return requests;
}
