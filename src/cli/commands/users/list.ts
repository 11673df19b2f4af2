/** `miniapp users list`: a page at a time on a terminal, every user for scripts. */
import type { Command } from 'commander';
import type { CommandContext } from '../../context.js';
import type { ConnectionFlags } from '../../connect/grpc-connection.js';
import { UsageError } from '../../../errors.js';
import { parseWholeNumber } from '../../flags.js';
import { grouped } from '../../render/grouped.js';
import { USER_COLUMNS, userJson } from '../../views/grpc-user-view.js';
import { DEFAULT_PAGE_SIZE, lightRead } from './shared.js';
import type { UserMessage } from '../../../users/proto.js';
import { LIST_NEXT_PAGE_TOKEN_HEADER, LIST_PAGE_SIZE_HEADER, LIST_TOTAL_HEADER } from '../../../users/user-wire.js';
import type { UserPage } from '../../../users/client.js';
import type { LightAnswer } from '../../../grpc/client/light-call.js';

const plural = (count: number, one: string, many = `${one}s`) => `${grouped(count)} ${count === 1 ? one : many}`;

type ListFlags = ConnectionFlags & { filter?: string; page?: string; pageSize?: string; pageToken?: string; all?: boolean };

export async function runList(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ListFlags>();
  if (flags.all && (flags.page !== undefined || flags.pageSize !== undefined)) {
    throw new UsageError('--all lists every user: leave out --page and --page-size');
  }
  if (flags.all && flags.pageToken !== undefined) throw new UsageError('--all lists every user from the first: leave out --page-token');
  if (flags.page !== undefined && flags.pageToken !== undefined) {
    throw new UsageError('--page and --page-token both say where the page starts: give one of them');
  }
  const askedSize = flags.pageSize === undefined ? undefined : parseWholeNumber(flags.pageSize, '--page-size', 0);
  const page = flags.page === undefined ? 1 : parseWholeNumber(flags.page, '--page', 1);
  const token = flags.pageToken ?? '';
  // A person at a terminal gets a page; scripts (a pipe, --json) get every user unless they ask for a page.
  const paged = !flags.all && askedSize !== 0 && (flags.page !== undefined || askedSize !== undefined || flags.pageToken !== undefined || cc.out.human);
  if (page > 1 && !paged) throw new UsageError('--page needs a page size: with --page-size 0 every user is on page 1');
  const pageSize = paged ? (askedSize ?? DEFAULT_PAGE_SIZE) : 0;
  const request = { page, page_size: pageSize, filter: flags.filter ?? '', page_token: token };
  const result = await lightRead<UserMessage, UserPage>(cc, flags, { path: '/user.v1.UserService/ListUsers', request }, pageOf, (client) =>
    client.listUsers(request),
  );
  const size = result.pageSize ?? pageSize;
  if (paged && size < pageSize) cc.out.warn(`--page-size ${pageSize} is more than the server gives at once: ${size} users a page`);
  const rows = result.users.map(userJson);
  // Asked by token (an empty one for the first page), a page comes with the token of the next one.
  cc.out.table(rows, USER_COLUMNS, flags.pageToken === undefined ? rows : { users: rows, next_page_token: result.nextPageToken });
  // No users at all: the table has already said "(nothing to show)".
  if (cc.out.human && (result.users.length > 0 || (result.total ?? 0) > 0)) {
    const next = result.nextPageToken ? nextCommand(command, result.nextPageToken) : undefined;
    const where = { shown: result.users.length, total: result.total, page, size: paged ? size : 0, next };
    const footer = token ? tokenPageFooter(where) : listFooter(where);
    // The next page's command is typed as it stands: whole, on a line of its own when the footer does not fit.
    const at = next === undefined ? -1 : footer.lastIndexOf(next);
    if (at > 0) cc.out.note(footer.slice(0, at).trimEnd(), next);
    else cc.out.note(footer);
  }
}

/** A count the server sent in the response headers, if it sent one (as the grpc-js client reads it). */
function countOf(headers: LightAnswer<UserMessage>['headers'], name: string): number | undefined {
  const text = String([headers[name]].flat()[0] ?? '');
  return /^\d+$/.test(text) ? Number(text) : undefined;
}

/** ListUsers' answer on the light path as the grpc-js client gives it (users/client.ts listUsers). */
function pageOf({ messages, headers }: LightAnswer<UserMessage>): UserPage {
  return {
    users: messages,
    total: countOf(headers, LIST_TOTAL_HEADER),
    pageSize: countOf(headers, LIST_PAGE_SIZE_HEADER),
    nextPageToken: String([headers[LIST_NEXT_PAGE_TOKEN_HEADER]].flat()[0] ?? ''),
  };
}

interface Where {
  shown: number;
  total: number | undefined;
  page: number;
  size: number;
  /** The command that shows the next page, when the server gave its token. */
  next: string | undefined;
}

/** Where this page lies among all users, and how to see the rest. */
function listFooter({ shown, total, page, size, next }: Where): string {
  if (size === 0) return plural(total ?? shown, 'user');
  const first = (page - 1) * size + 1;
  // A server without page tokens: the next page by its number.
  const then = next ? `--all for every user; next page: ${next}` : `--page ${page + 1} for the next page, --all for every user`;
  if (total === undefined) {
    // A server that does not send the total: a full page may have more after it.
    return `${plural(shown, 'user')} (page ${page})${next || shown === size ? `; ${then}` : ''}`;
  }
  const pages = Math.max(1, Math.ceil(total / size));
  if (shown === 0) return `page ${page} is past the end: ${plural(total, 'user')} make ${plural(pages, 'page')} of ${size}`;
  if (pages === 1 && !next) return plural(total, 'user');
  const range = `${grouped(first)}-${grouped(first + shown - 1)} of ${plural(total, 'user')} (page ${page} of ${grouped(pages)})`;
  return next || page < pages ? `${range}; ${then}` : `${range}; --all for every user`;
}

/** A page asked by token: its place is not known, only what it holds and what follows. */
function tokenPageFooter({ shown, total, next }: Where): string {
  const all = total === undefined ? '' : ` of ${plural(total, 'user')}`;
  if (shown === 0) return `no more users${all ? ` (${grouped(total!)} in all)` : ''}; --all for every user`;
  return next ? `${grouped(shown)} more${all}; --all for every user; next page: ${next}` : `${grouped(shown)} more${all}, the last page; --all for every user`;
}

/** Flags of this command that the next page needs again (never --token, a secret; --page-token is the new one). */
const REPEATED: readonly [key: keyof ListFlags, flag: string][] = [
  ['filter', '--filter'],
  ['pageSize', '--page-size'],
  ['addr', '--addr'],
  ['deadline', '--deadline'],
  ['tls', '--tls'],
  ['ca', '--ca'],
];

/** `miniapp users list` with the flags given on the command line that shape the list and the connection, and the token. */
function nextCommand(command: Command, token: string): string {
  const flags = command.opts<ListFlags>();
  const words = ['miniapp', 'users', 'list'];
  for (const [key, flag] of REPEATED) {
    const value = flags[key];
    if (command.getOptionValueSource(key) !== 'cli' || value === undefined) continue;
    // A CA given as PEM text is too long to repeat: a file name, the grpc-ca setting or the profile can say it.
    if (key === 'ca' && String(value).includes('\n')) continue;
    words.push(...(value === true ? [flag] : [flag, shellWord(String(value))]));
  }
  words.push('--page-token', token);
  return words.join(' ');
}

/** A word as a POSIX shell reads it back: bare when it holds nothing special, else single-quoted. */
function shellWord(text: string): string {
  return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replace(/'/g, "'\\''")}'`;
}
