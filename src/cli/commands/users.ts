/**
 * `miniapp users ...`: the gRPC user service (user.v1.UserService) from
 * the command line. Commander wiring and rendering only: the client is
 * src/users/client.ts, reading import and sync files and running them is
 * src/users/user-import.ts and user-sync.ts, and every module that loads
 * gRPC is imported inside the actions, so that `miniapp users --help`
 * loads none.
 */
import type { Command } from 'commander';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import type { Column } from '../render/output.js';
import { ConfigError, MiniappError, UsageError } from '../../errors.js';
import { destroyInput, linesOf, openInput } from '../terminal/input.js';
import { connectionOf, withConnection, type ConnectionFlags } from '../connect/grpc-connection.js';
import { parseBoolean, parseId, parseList, parseWholeNumber } from '../flags.js';
import { grouped } from '../render/grouped.js';
import { isoOf, printUser, USER_COLUMNS, userJson, type UserJson } from '../views/grpc-user-view.js';
import type { ChatMessage, UpdatePath, UserEvent, UserServiceClient } from '../../users/client.js';
import type { EventTypeName, UserMessage } from '../../users/proto.js';
import type { RowFailure } from '../../users/user-import.js';
import type { SyncResult } from '../../users/user-sync.js';

const EVENT_TYPES: readonly EventTypeName[] = ['CREATED', 'UPDATED', 'DELETED'];

/** Users a page of `users list` shows on a terminal, as `gh issue list` shows 30 issues. */
const DEFAULT_PAGE_SIZE = 30;

const CONNECTION_HELP = `
Connection: --addr, else MINIAPP_GRPC_ADDR, else the profile's grpc-addr
(127.0.0.1:50051); the token from --token, else MINIAPP_GRPC_TOKEN, else
the profile's grpc-token (\`miniapp serve\` stores its admin token there).
Exit codes: 4 UNAUTHENTICATED; 5 UNAVAILABLE or DEADLINE_EXCEEDED; 1 any
other status, printed with its name (e.g. "NOT_FOUND: no user with id 9").`;

export function registerUsers(program: Command, bind: Bind): void {
  const users = program
    .command('users')
    .description(
      'Manage users of the gRPC user service (user.v1.UserService of `miniapp serve`): create, get, update, delete, ' +
        'list, watch changes, bulk-create from a file, sync, and chat. Keepalive pings every 10 s (3 s time-out, also ' +
        'without calls) and the round_robin policy, as the reference client.',
    )
    .addHelpText('after', CONNECTION_HELP);

  withConnection(
    users
      .command('create')
      .description('create a user (needs no token); prints the new user')
      .requiredOption('--username <name>', '3 to 20 letters, digits, ".", "_" or "-"')
      .requiredOption('--email <address>', 'e-mail address')
      .option('--password <password>', 'at least 8 characters; "-" reads it from piped stdin; without it, asked for (no echo) at a terminal')
      .option('--full-name <name>', 'full name', ''),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp users create --username alice --email alice@example.com          # asks for the password\n' +
        '  printf %s "$PW" | miniapp users create --username alice --email alice@example.com --password -\n' +
        '  miniapp users create --username bob --email bob@example.com --password "s3cret-pw" --full-name "Bob B" --json\n' +
        '\nWithout a terminal, or with CI set, nothing is asked: give --password, or --password - with the password piped.',
    )
    .action(bind(runCreate));

  withConnection(users.command('get').description('show one user').argument('<id>', 'user id')).action(bind(runGet));

  withConnection(
    users
      .command('update')
      .summary('change the given fields of a user, and only those')
      .description('change the given fields of a user, and only those (the update_mask lists exactly the flags given)')
      .argument('<id>', 'user id')
      .option('--username <name>', 'new username')
      .option('--email <address>', 'new e-mail address')
      .option('--full-name <name>', 'new full name ("" clears it)')
      .option('--active <true|false>', 'activate or deactivate (admin only)')
      .option('--roles <a,b>', 'replace the roles, comma-separated ("" removes all; admin only)'),
  )
    .addHelpText('after', '\nExamples:\n  miniapp users update 3 --full-name "Alice Liddell"\n  miniapp users update 3 --active false --roles editor,viewer')
    .action(bind(runUpdate));

  withConnection(users.command('delete').description('delete a user').argument('<id>', 'user id')).action(bind(runDelete));

  withConnection(
    users
      .command('list')
      .summary('list users: a page at a time on a terminal, all of them when piped or with --json')
      .description(
        `list users: on a terminal one page (${DEFAULT_PAGE_SIZE} users) with the total and how to get the next; ` +
          'piped, with --json or with --all, every user',
      )
      .option('--filter <text>', 'case-insensitive part of the username, e-mail or full name')
      .option('--page <n>', 'page number, from 1')
      .option('--page-size <n>', `users per page (default ${DEFAULT_PAGE_SIZE}; the server gives at most 100)`)
      .option('--all', 'every user, also on a terminal'),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp users list\n  miniapp users list --page 2\n  miniapp users list --all\n' +
        '  miniapp users list --filter example.com --page 2 --page-size 20 --json\n  miniapp users list | wc -l',
    )
    .action(bind(runList));

  withConnection(
    users
      .command('watch')
      .summary('print user changes as they happen; reconnects and resumes when the server restarts')
      .description(
        'print user changes as they happen (with --json one object a line: sequence, type CREATED, UPDATED or DELETED, ' +
          'the user and the timestamp); when the stream breaks (the server restarts, the load balancer moves it), ' +
          'reconnects with back-off and resumes after the last change printed: none is missed or printed twice; Ctrl-C stops',
      )
      .option('--user-id <id>', 'only this user\'s changes')
      .option('--types <list>', 'only these kinds: created,updated,deleted')
      .option('--count <n>', 'exit after this many events')
      .option('--resume-after <sequence>', 'start after this change (the sequence of the last one seen) instead of from now on'),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp users watch\n  miniapp users watch --types created,deleted --json | jq .user.username\n  miniapp users watch --user-id 3 --count 1\n' +
        '  miniapp users watch --json --resume-after "$(tail -1 changes.jsonl | jq .sequence)" >> changes.jsonl\n' +
        '\nReconnecting waits 250 ms, doubling to 10 s, and starts over after each successful connection.\n' +
        'The server keeps changes for an hour: resuming after an older one fails (exit 1, OUT_OF_RANGE); start a new watch then.\n' +
        'MINIAPP_GRPC_RECONNECT_MS sets the first wait (a test aid).',
    )
    .action(bind(runWatch));

  withConnection(
    users
      .command('bulk-create')
      .summary('create users from JSON lines or CSV (a file or -); exits 1 when any row failed')
      .description(
        'create users from a file ("-" for stdin): JSON lines ({"username","email","password","full_name"} a line) or ' +
          'CSV with a header row (username,email,password[,full_name]); streams the rows and prints the created and ' +
          'failed counts with every failure, by the line of the file. On a terminal a progress line shows the rows ' +
          'answered (of the total, for a file), created, failed, the rate and the time left, and each failure as it ' +
          'comes. Exits 1 when any row failed, so that scripts notice. Needs an admin token.',
      )
      .argument('<file>', 'the input file, or - for stdin'),
  )
    .addHelpText('after', '\nExamples:\n  miniapp users bulk-create users.jsonl\n  miniapp users bulk-create users.csv --json\n  generate-users | miniapp users bulk-create -')
    .action(bind(runBulkCreate));

  withConnection(
    users
      .command('sync')
      .summary('apply upserts and deletes from JSON lines (a file or -), answered in order')
      .description(
        'apply upserts and deletes from a file of JSON lines ("-" for stdin) over one stream; each is answered in ' +
          'order and printed as it comes (ref, op, ok or failed, the user or the status and message). An upsert ' +
          'without id creates (password required); with id it replaces the user as a whole (is_active defaults to ' +
          'true, roles to none). On a terminal a progress line shows the requests answered (of the total, for a ' +
          'file), applied, failed, the rate and the time left. Exits 1 when any request failed.',
      )
      .argument('<file>', 'the input file, or - for stdin'),
  )
    .addHelpText(
      'after',
      '\nInput, one JSON object a line:\n' +
        '  {"ref":"r1","upsert":{"username":"ann","email":"ann@example.com","password":"correct-horse","roles":["editor"]}}\n' +
        '  {"ref":"r2","upsert":{"id":7,"username":"ben","email":"ben@example.com","full_name":"Ben B","is_active":false}}\n' +
        '  {"ref":"r3","delete":9}\n' +
        '\nExample:\n  miniapp users sync changes.jsonl --json',
    )
    .action(bind(runSync));

  withConnection(
    users
      .command('chat')
      .summary('join a chat room: stdin lines out, the others\' messages in')
      .description('join a chat room: each line of stdin is a message; prints what the others say ([room] sender: text); ends with stdin or Ctrl-C')
      .option('--room <name>', 'the room', 'general'),
  )
    .addHelpText('after', '\nExamples:\n  miniapp users chat --room ops\n  echo "deploy done" | miniapp users chat --room ops')
    .action(bind(runChat));
}

// ------------------------------------------------------------------ connection

async function connect(cc: CommandContext, flags: ConnectionFlags, options: { needToken?: boolean } = {}): Promise<UserServiceClient> {
  const connection = await connectionOf(cc, flags, options);
  const [{ connectUserService }, { quietGrpcLogs }] = await Promise.all([import('../../users/client.js'), import('../connect/grpc-logging.js')]);
  await quietGrpcLogs(cc.env);
  return connectUserService(connection);
}

async function withClient<T>(cc: CommandContext, flags: ConnectionFlags, run: (client: UserServiceClient) => Promise<T>, needToken = true): Promise<T> {
  const client = await connect(cc, flags, { needToken });
  try {
    return await run(client);
  } finally {
    client.close();
  }
}

const plural = (count: number, one: string, many = `${one}s`) => `${grouped(count)} ${count === 1 ? one : many}`;

// ------------------------------------------------------------------ create, get, update, delete

async function runCreate(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags & { username: string; email: string; password?: string; fullName: string }>();
  const { secretOf } = await import('../terminal/secret-flag.js');
  const password = await secretOf(cc, flags.password, {
    flag: '--password',
    what: 'password',
    pipeExample: 'printf %s "$PW" | miniapp users create ... --password -',
  });
  const response = await withClient(
    cc,
    flags,
    (client) => client.createUser({ username: flags.username, email: flags.email, password, full_name: flags.fullName }),
    false,
  );
  if (!response.user) throw new MiniappError('the server answered CreateUser without a user');
  printUser(cc.out, response.user);
  if (!cc.out.json && response.message) cc.out.success(response.message);
}

async function runGet(cc: CommandContext, command: Command): Promise<void> {
  const id = parseId(command.processedArgs[0] as string);
  const flags = command.opts<ConnectionFlags>();
  const user = (await quickGetUser(cc, flags, id)) ?? (await withClient(cc, flags, (client) => client.getUser(id)));
  printUser(cc.out, user);
}

/**
 * GetUser without grpc-js, on a plain-text channel (see grpc/unary-call.ts):
 * the answer, or the server's status as the same typed error; undefined
 * when the call did not reach an answering server, for the grpc-js client
 * to try again and say why (GetUser changes nothing, so trying twice is safe).
 */
async function quickGetUser(cc: CommandContext, flags: ConnectionFlags, id: string): Promise<UserMessage | undefined> {
  const connection = await connectionOf(cc, flags);
  if (connection.tls) return undefined;
  const [{ unaryCall }, { decodeUser, encodeGetUserRequest }, { serviceCallError }] = await Promise.all([
    import('../../grpc/client/unary-call.js'),
    import('../../users/user-wire.js'),
    import('../../grpc/client/errors.js'),
  ]);
  const outcome = await unaryCall({
    address: connection.address,
    path: '/user.v1.UserService/GetUser',
    message: encodeGetUserRequest(id),
    token: connection.token,
    deadlineMs: connection.deadlineMs ?? 10_000,
  });
  if (outcome.kind === 'answer') return decodeUser(outcome.message);
  if (outcome.kind === 'status') {
    throw serviceCallError(outcome.error, { address: connection.address, deadlineMs: connection.deadlineMs ?? 10_000, tls: false });
  }
  return undefined;
}

async function runUpdate(cc: CommandContext, command: Command): Promise<void> {
  const id = parseId(command.processedArgs[0] as string);
  const flags = command.opts<ConnectionFlags & { username?: string; email?: string; fullName?: string; active?: string; roles?: string }>();
  const user: Partial<UserMessage> = {};
  const paths: UpdatePath[] = [];
  if (flags.username !== undefined) (user.username = flags.username, paths.push('username'));
  if (flags.email !== undefined) (user.email = flags.email, paths.push('email'));
  if (flags.fullName !== undefined) (user.full_name = flags.fullName, paths.push('full_name'));
  if (flags.active !== undefined) (user.is_active = parseBoolean(flags.active, '--active'), paths.push('is_active'));
  if (flags.roles !== undefined) (user.roles = parseList(flags.roles), paths.push('roles'));
  if (paths.length === 0) {
    throw new UsageError('nothing to update: give at least one of --username, --email, --full-name, --active, --roles');
  }
  const updated = await withClient(cc, flags, (client) => client.updateUser(id, user, paths));
  printUser(cc.out, updated);
  if (!cc.out.json) cc.out.success(`updated ${paths.join(', ')} of user ${id}`);
}

async function runDelete(cc: CommandContext, command: Command): Promise<void> {
  const id = parseId(command.processedArgs[0] as string);
  await withClient(cc, command.opts<ConnectionFlags>(), (client) => client.deleteUser(id));
  if (cc.out.json) cc.out.printJson({ id: Number(id), deleted: true });
  else cc.out.success(`deleted user ${id}`);
}

// ------------------------------------------------------------------ list

async function runList(cc: CommandContext, command: Command): Promise<void> {
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

// ------------------------------------------------------------------ watch

function typesOf(text: string): EventTypeName[] {
  const types = parseList(text).map((type) => type.toUpperCase());
  const unknown = types.filter((type) => !(EVENT_TYPES as readonly string[]).includes(type));
  if (types.length === 0 || unknown.length > 0) {
    throw new UsageError(`--types takes a comma-separated list of created, updated, deleted; got "${text}"`);
  }
  return [...new Set(types)] as EventTypeName[];
}

interface EventJson {
  /** The change's number in the server's log (null from a server that does not number changes). */
  sequence: number | null;
  type: EventTypeName;
  user: UserJson | null;
  timestamp: string | null;
}

function eventJson(event: UserEvent): EventJson {
  const sequence = Number(event.sequence);
  return { sequence: sequence > 0 ? sequence : null, type: event.type, user: event.user ? userJson(event.user) : null, timestamp: isoOf(event.timestamp) };
}

function reconnectBaseOf(cc: CommandContext): number | undefined {
  const text = cc.env.MINIAPP_GRPC_RECONNECT_MS?.trim();
  if (!text) return undefined;
  if (!/^\d+$/.test(text) || Number(text) < 1) throw new ConfigError(`MINIAPP_GRPC_RECONNECT_MS must be a positive number of milliseconds; got "${text}"`);
  return Number(text);
}

async function runWatch(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags & { userId?: string; types?: string; count?: string; resumeAfter?: string }>();
  const request = {
    user_id: flags.userId === undefined ? '0' : parseId(flags.userId, '--user-id'),
    types: flags.types === undefined ? [] : typesOf(flags.types),
    ...(flags.resumeAfter === undefined ? {} : { resume_after: String(parseWholeNumber(flags.resumeAfter, '--resume-after', 0)) }),
  };
  const count = flags.count === undefined ? undefined : parseWholeNumber(flags.count, '--count', 1);
  const baseDelayMs = reconnectBaseOf(cc);
  // Flags and settings are resolved once; each (re)connection is a fresh client built from them.
  const settings = await connectionOf(cc, flags);
  const { watchUserChanges, connectUserService, DEFAULT_DEADLINE_MS } = await import('../../users/client.js');
  await (await import('../connect/grpc-logging.js')).quietGrpcLogs(cc.env);

  const controller = new AbortController();
  void cc.waitForShutdown().then((signal) => {
    if (controller.signal.aborted) return;
    cc.out.info(`${signal}: stopping the watch`);
    controller.abort();
  });

  const human = cc.out.human;
  const c = cc.out.color;
  const paint: Record<EventTypeName, (text: string) => string> = { CREATED: c.green, UPDATED: c.yellow, DELETED: c.red };
  let seen = 0;
  const onEvent = (event: UserEvent) => {
    if (count !== undefined && seen >= count) return;
    seen++;
    const json = eventJson(event);
    if (cc.out.json) {
      cc.out.line(JSON.stringify(json));
    } else if (human) {
      const u = json.user;
      cc.out.line(
        `${String(json.sequence ?? '').padStart(8)}  ${(json.timestamp ?? '').padEnd(24)}  ${paint[json.type](json.type.padEnd(7))}  ${String(u?.id ?? '').padStart(6)}  ` +
          `${(u?.username ?? '').padEnd(20)}  ${u?.email ?? ''}${u && !u.is_active ? c.dim(' (inactive)') : ''}${u?.roles.length ? c.dim(` [${u.roles.join(',')}]`) : ''}`,
      );
    } else {
      const u = json.user;
      cc.out.line(
        // The sequence last: scripts that cut the older columns keep working.
        [json.timestamp ?? '', json.type, u?.id ?? '', u?.username ?? '', u?.email ?? '', u?.full_name ?? '', u?.is_active ?? '', u?.roles.join(',') ?? '', u?.created_at ?? '', json.sequence ?? '']
          .map((cell) => String(cell).replace(/[\t\r\n]+/g, ' '))
          .join('\t'),
      );
    }
    if (count !== undefined && seen >= count) controller.abort();
  };

  await watchUserChanges({
    connect: () => connectUserService(settings),
    request,
    signal: controller.signal,
    onEvent,
    baseDelayMs,
    connectTimeoutMs: settings.deadlineMs ?? DEFAULT_DEADLINE_MS,
    onConnected: ({ reconnected, resumedAfter }) => {
      if (reconnected) {
        cc.out.info(
          resumedAfter === undefined
            ? `reconnected to ${settings.address}; this server does not number its changes, so those made while disconnected are not replayed`
            : `reconnected to ${settings.address}; resuming after change ${resumedAfter}`,
        );
      } else if (human) {
        cc.out.info(cc.out.errColor.dim(`watching ${settings.address}${resumedAfter === undefined ? '' : ` from change ${resumedAfter + 1}`}; Ctrl-C stops`));
        cc.out.line(c.bold(`${'seq'.padStart(8)}  ${'time'.padEnd(24)}  ${'event'.padEnd(7)}  ${'id'.padStart(6)}  ${'username'.padEnd(20)}  email`));
      }
    },
    onRetry: ({ attempt, delayMs, reason }) => {
      if (attempt === 1) cc.out.warn(`watch lost (${reason}); reconnecting in ${delayMs} ms (attempt ${attempt})`);
      else cc.out.warn(`still not connected (${reason}); trying again in ${delayMs} ms (attempt ${attempt})`);
    },
  });
}

// ------------------------------------------------------------------ bulk-create

const FAILURE_COLUMNS: readonly Column<RowFailure>[] = [
  { header: 'line', value: (f) => f.line },
  { header: 'index', value: (f) => f.index },
  { header: 'status', value: (f) => f.status },
  { header: 'message', value: (f) => f.message, maxWidth: 80 },
];

async function runBulkCreate(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags>();
  const file = command.processedArgs[0] as string;
  const [{ importUsers }, { countImportRows }, { fileProgress }] = await Promise.all([
    import('../../users/user-import.js'),
    import('../../users/import-file.js'),
    import('../terminal/file-progress.js'),
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

// ------------------------------------------------------------------ sync

const SYNC_COLUMNS: readonly Column<SyncResult>[] = [
  { header: 'ref', value: (r) => r.ref },
  { header: 'op', value: (r) => r.op ?? '' },
  { header: 'result', value: (r) => (r.ok ? 'ok' : 'failed') },
  { header: 'id', value: (r) => (r.user ? userJson(r.user).id : undefined) },
  { header: 'username', value: (r) => r.user?.username },
  { header: 'status', value: (r) => r.status },
  { header: 'message', value: (r) => r.message, maxWidth: 70 },
];

function syncResultJson(result: SyncResult): Record<string, unknown> {
  return result.ok
    ? { ref: result.ref, line: result.line, op: result.op, ok: true, user: result.user ? userJson(result.user) : null }
    : { ref: result.ref, line: result.line, op: result.op, ok: false, status: result.status, message: result.message };
}

async function runSync(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags>();
  const file = command.processedArgs[0] as string;
  const [{ syncUsers }, { countSyncRequests }, { fileProgress }] = await Promise.all([
    import('../../users/user-sync.js'),
    import('../../users/sync-file.js'),
    import('../terminal/file-progress.js'),
  ]);
  const results: SyncResult[] = [];
  const counts = await withClient(cc, flags, async (client) => {
    const input = await openInput(file, cc.io.stdin, { what: 'sync requests' });
    await client.ready();
    const progress = await fileProgress(cc, file, { unit: 'requests', verb: 'syncing', count: countSyncRequests });
    const done = { applied: 0, failed: 0 };
    try {
      return await syncUsers(client, input, (result) => {
        if (result.ok) done.applied++;
        else done.failed++;
        if (cc.out.json) cc.out.line(JSON.stringify(syncResultJson(result)));
        else if (cc.out.isTTY) results.push(result);
        else cc.out.table([result], SYNC_COLUMNS);
        if (!result.ok && progress.live) progress.log(cc.out.errColor.red(`line ${result.line} (${result.ref}): ${result.status}: ${result.message}`));
        progress.update({ done: done.applied + done.failed, counts: { ...done } });
      });
    } finally {
      progress.finish();
    }
  });
  if (cc.out.isTTY && !cc.out.json) cc.out.table(results, SYNC_COLUMNS);
  if (counts.failed > 0) throw new MiniappError(`${counts.failed} sync request${counts.failed === 1 ? ' was' : 's were'} not applied`);
}

// ------------------------------------------------------------------ chat

async function runChat(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags & { room: string }>();
  const room = flags.room.trim();
  if (!room) throw new UsageError('--room must not be empty');
  const client = await connect(cc, flags);
  const controller = new AbortController();
  let stoppedBy: string | undefined;
  void cc.waitForShutdown().then((signal) => {
    stoppedBy = signal;
    controller.abort();
  });
  const lines = (async function* () {
    for await (const { text } of linesOf(cc.io.stdin)) {
      if (text.trim()) yield text;
    }
  })();
  try {
    await client.ready();
    if (cc.io.stdin.isTTY && !cc.out.json) cc.out.info(cc.out.errColor.dim(`joined [${room}] on ${client.address}; type a line to send it, Ctrl-D or Ctrl-C to leave`));
    await client.chat({
      room,
      lines,
      signal: controller.signal,
      onMessage: (message: ChatMessage) => {
        if (cc.out.json) {
          cc.out.line(JSON.stringify({ room: message.room, sender: message.sender, text: message.text, sent_at: isoOf(message.sent_at) }));
        } else {
          const c = cc.out.color;
          cc.out.line(`${c.dim(`[${message.room}]`)} ${c.bold(message.sender)}: ${message.text}`);
        }
      },
    });
  } finally {
    client.close();
    // A chat that ends before its input (the server left, Ctrl-C) must not wait on the terminal.
    destroyInput(cc.io.stdin);
    controller.abort();
  }
  if (stoppedBy) cc.out.info(`${stoppedBy}: left [${room}]`);
}
