/**
 * What every graph sandbox route shares: the error the sandbox answers with,
 * who the caller is (token and version), the query's parameters and times,
 * the `fields` list, and cursor paging with Meta's `paging.next` links.
 */
import type { FastifyRequest } from 'fastify';
import { DAY_MS, MAIN_ACCOUNT_ID, SANDBOX_GRAPH_TOKENS, type GraphData } from './data.js';
import { FieldSyntaxError, parseFields, type FieldRequest } from './fields.js';
import { isKnownOrOlder, servingVersion, versionNumber } from '../../insights/versions.js';
import type { GraphMount } from './metric-schedule.js';

export interface GraphErrorBody {
  message: string;
  type: string;
  code: number;
  error_subcode?: number;
  error_user_title?: string;
  error_user_msg?: string;
  is_transient?: boolean;
}

/** A graph error the sandbox answers with. */
export class GraphFailure extends Error {
  constructor(
    readonly body: GraphErrorBody,
    readonly status = 400,
  ) {
    super(body.message);
  }
}

export const oauth = (code: number, message: string, extra: Partial<GraphErrorBody> = {}) =>
  new GraphFailure({ message, type: 'OAuthException', code, ...extra });

const MAX_LIMIT = 100;
const DEFAULT_LIMIT = 25;

export interface Caller {
  token: string;
  /** Accounts the token reaches: one for a page token, all for the user token. */
  accounts: readonly string[];
  version: number;
  versionText: string;
  /** The mount the call came to: which retirement schedule applies (metric-schedule.ts). */
  mount: GraphMount;
}

export type Query = Record<string, string | string[] | undefined>;

export function param(query: Query, name: string): string | undefined {
  const value = query[name];
  return Array.isArray(value) ? value[0] : value;
}

export function nonexistingObject(id: string): GraphFailure {
  return new GraphFailure({
    message: `Unsupported get request. Object with ID '${id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation.`,
    type: 'GraphMethodException',
    code: 100,
    error_subcode: 33,
  });
}

export function fieldsOf(query: Query): FieldRequest[] {
  try {
    return parseFields(param(query, 'fields') ?? 'id');
  } catch (error) {
    if (error instanceof FieldSyntaxError) throw oauth(100, `(#100) Syntax error in fields: ${error.message}`);
    throw error;
  }
}

/** Unix seconds, or anything Date.parse reads, to ms. */
export function instant(query: Query, name: string): number | undefined {
  const text = param(query, name);
  if (text === undefined || text === '') return undefined;
  const ms = /^\d+$/.test(text) ? Number(text) * 1000 : Date.parse(text);
  if (!Number.isFinite(ms)) throw oauth(100, `(#100) The parameter ${name} is not a valid time: ${text}`);
  return ms;
}

const encodeCursor = (index: number) => Buffer.from(`sandbox-cursor:${index}`).toString('base64url');

function decodeCursor(cursor: string): number {
  const match = /^sandbox-cursor:(\d+)$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match) throw oauth(100, '(#100) The cursor is invalid');
  return Number(match[1]);
}

/** The request's own URL with some query parameters replaced: how paging links are built. */
export function linkTo(request: FastifyRequest, changes: Record<string, string | undefined>): string {
  // Empty path segments collapsed: `//x` would read as a host.
  const [path, query = ''] = request.url.split('?') as [string, string?];
  const url = new URL(`${path.replace(/\/{2,}/g, '/')}${query ? `?${query}` : ''}`, `${request.protocol}://${request.headers.host ?? '127.0.0.1'}`);
  for (const [name, value] of Object.entries(changes)) {
    if (value === undefined) url.searchParams.delete(name);
    else url.searchParams.set(name, value);
  }
  return url.href;
}

export function page<T>(request: FastifyRequest, items: readonly T[], render: (item: T) => unknown): unknown {
  const query = request.query as Query;
  const limitText = param(query, 'limit');
  let limit = DEFAULT_LIMIT;
  if (limitText !== undefined) {
    limit = Number(limitText);
    if (!Number.isInteger(limit) || limit < 1) throw oauth(100, '(#100) The parameter limit must be a positive integer');
    limit = Math.min(limit, MAX_LIMIT);
  }
  const after = param(query, 'after');
  const before = param(query, 'before');
  let start = 0;
  if (after !== undefined) start = decodeCursor(after) + 1;
  else if (before !== undefined) start = Math.max(0, decodeCursor(before) - limit);
  const end = before !== undefined && after === undefined ? Math.min(decodeCursor(before), start + limit) : start + limit;
  const slice = items.slice(start, end);
  if (slice.length === 0) return { data: [] };
  const data = slice.map(render);
  const last = start + slice.length - 1;
  const paging: Record<string, unknown> = { cursors: { before: encodeCursor(start), after: encodeCursor(last) } };
  if (last < items.length - 1) paging.next = linkTo(request, { after: encodeCursor(last), before: undefined });
  if (start > 0) paging.previous = linkTo(request, { before: encodeCursor(start), after: undefined });
  return { data, paging };
}

export function callerOf(request: FastifyRequest, versionText: string | undefined, now: number, data: GraphData, mount: GraphMount = 'spec'): Caller {
  const token = param(request.query as Query, 'access_token');
  if (versionText !== undefined && !isKnownOrOlder(versionText)) throw oauth(2500, `Unknown path components: /${versionText}`);
  // A retired version, or none at all, is served at the oldest usable one, as Meta's Graph API does.
  const served = servingVersion(versionText, now);
  const version = Math.floor(versionNumber(served)!);
  const base = { version, versionText: served, mount };
  if (token === undefined || token === '') {
    throw oauth(2500, 'An active access token must be used to query information about the current user.');
  }
  switch (token) {
    case SANDBOX_GRAPH_TOKENS.page:
    case SANDBOX_GRAPH_TOKENS.noPermission:
    case SANDBOX_GRAPH_TOKENS.personal:
      return { token, accounts: [MAIN_ACCOUNT_ID], ...base };
    case SANDBOX_GRAPH_TOKENS.user:
      return { token, accounts: data.accounts.map((account) => account.id), ...base };
    case SANDBOX_GRAPH_TOKENS.expired: {
      const expired = new Date(now - DAY_MS).toUTCString();
      throw oauth(190, `Error validating access token: Session has expired on ${expired}. The current time is ${new Date(now).toUTCString()}.`, {
        error_subcode: 463,
      });
    }
    default:
      throw oauth(190, 'Invalid OAuth access token - Cannot parse access token');
  }
}
