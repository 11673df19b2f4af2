/** `miniapp users list`: a page at a time on a terminal, every user for scripts. */
import type { Command } from 'commander';
import type { CommandContext } from '../../context.js';
import type { ConnectionFlags } from '../../connect/grpc-connection.js';
import { UsageError } from '../../../errors.js';
import { parseWholeNumber } from '../../flags.js';
import { grouped } from '../../render/grouped.js';
import { USER_COLUMNS, userJson } from '../../views/grpc-user-view.js';
import { DEFAULT_PAGE_SIZE, withClient } from './shared.js';

const plural = (count: number, one: string, many = `${one}s`) => `${grouped(count)} ${count === 1 ? one : many}`;

export async function runList(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags & { filter?: string; page?: string; pageSize?: string; all?: boolean }>();
  if (flags.all && (flags.page !== undefined || flags.pageSize !== undefined)) {
    throw new UsageError('--all lists every user: leave out --page and --page-size');
  }
  const askedSize = flags.pageSize === undefined ? undefined : parseWholeNumber(flags.pageSize, '--page-size', 0);
  const page = flags.page === undefined ? 1 : parseWholeNumber(flags.page, '--page', 1);
  // A person at a terminal gets a page; scripts (a pipe, --json) get every user unless they ask for a page.
  const paged = !flags.all && askedSize !== 0 && (flags.page !== undefined || askedSize !== undefined || cc.out.human);
  if (page > 1 && !paged) throw new UsageError('--page needs a page size: with --page-size 0 every user is on page 1');
  const pageSize = paged ? (askedSize ?? DEFAULT_PAGE_SIZE) : 0;
  const result = await withClient(cc, flags, (client) => client.listUsers({ page, page_size: pageSize, filter: flags.filter ?? '' }));
  const size = result.pageSize ?? pageSize;
  if (paged && size < pageSize) cc.out.warn(`--page-size ${pageSize} is more than the server gives at once: ${size} users a page`);
  cc.out.table(result.users.map(userJson), USER_COLUMNS);
  // No users at all: the table has already said "(nothing to show)".
  if (cc.out.human && (result.users.length > 0 || (result.total ?? 0) > 0)) {
    cc.out.info(cc.out.errColor.dim(listFooter({ shown: result.users.length, total: result.total, page, size: paged ? size : 0 })));
  }
}

/** Where this page lies among all users, and how to see the rest. */
function listFooter({ shown, total, page, size }: { shown: number; total: number | undefined; page: number; size: number }): string {
  if (size === 0) return plural(total ?? shown, 'user');
  const first = (page - 1) * size + 1;
  if (total === undefined) {
    // A server that does not send the total: a full page may have more after it.
    return `${plural(shown, 'user')} (page ${page})${shown === size ? `; --page ${page + 1} for the next page, --all for every user` : ''}`;
  }
  const pages = Math.max(1, Math.ceil(total / size));
  if (shown === 0) return `page ${page} is past the end: ${plural(total, 'user')} make ${plural(pages, 'page')} of ${size}`;
  if (pages === 1) return plural(total, 'user');
  const range = `${grouped(first)}-${grouped(first + shown - 1)} of ${plural(total, 'user')} (page ${page} of ${grouped(pages)})`;
  return page < pages ? `${range}; --page ${page + 1} for the next page, --all for every user` : `${range}; --all for every user`;
}
