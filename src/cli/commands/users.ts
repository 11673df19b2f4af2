/**
 * `miniapp users ...`: the gRPC user service (user.v1.UserService) from
 * the command line. Commander wiring and rendering only; the client lives
 * in src/users/client.ts and is imported inside the actions, so that
 * `miniapp users --help` loads no gRPC module.
 */
import type { Command } from 'commander';
import type { Bind } from '../main.js';
import type { CommandContext } from '../context.js';
import type { Column, InStream } from '../output.js';
import { AuthError, ConfigError, MiniappError, UsageError } from '../../errors.js';
import { parseDuration } from '../../duration.js';
import { destroyInput, linesOf, openInput } from '../input.js';
import { connectionOf, withConnection, type ConnectionFlags } from '../grpc-connection.js';
import type {
  BulkCreateFailure,
  ChatMessage,
  CreateUserRequest,
  SyncUser,
  UpdatePath,
  UserEvent,
  UserServiceClient,
  ConnectOptions,
  UserSyncRequest,
  UserSyncResponse,
} from '../../users/client.js';
import type { EventTypeName, Timestamp, UserMessage } from '../../users/proto.js';


const EVENT_TYPES: readonly EventTypeName[] = ['CREATED', 'UPDATED', 'DELETED'];

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
      .requiredOption('--password <password>', 'at least 8 characters; "-" reads it from stdin (keeps it out of shell history)')
      .option('--full-name <name>', 'full name', ''),
  )
    .addHelpText('after', '\nExamples:\n  miniapp users create --username alice --email alice@example.com --password - <<< "$PW"\n  miniapp users create --username bob --email bob@example.com --password "s3cret-pw" --full-name "Bob B" --json')
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
      .description('list users, a page at a time (page size 0 lists all)')
      .option('--filter <text>', 'case-insensitive part of the username, e-mail or full name')
      .option('--page <n>', 'page number, from 1', '1')
      .option('--page-size <n>', 'users per page (at most 100; 0 = all)', '0'),
  )
    .addHelpText('after', '\nExamples:\n  miniapp users list\n  miniapp users list --filter example.com --page 2 --page-size 20 --json')
    .action(bind(runList));

  withConnection(
    users
      .command('watch')
      .summary('print user changes as they happen; reconnects when the server restarts')
      .description(
        'print user changes as they happen (with --json one object a line: type CREATED, UPDATED or DELETED, the user ' +
          'and the timestamp); reconnects with back-off when the server restarts; Ctrl-C stops',
      )
      .option('--user-id <id>', 'only this user\'s changes')
      .option('--types <list>', 'only these kinds: created,updated,deleted')
      .option('--count <n>', 'exit after this many events'),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp users watch\n  miniapp users watch --types created,deleted --json | jq .user.username\n  miniapp users watch --user-id 3 --count 1\n' +
        '\nReconnecting waits 250 ms, doubling to 10 s, and starts over after each successful connection.\n' +
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
          'failed counts with every failure. Exits 1 when any row failed, so that scripts notice. Needs an admin token.',
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
          'true, roles to none). Exits 1 when any request failed.',
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
  const [{ connectUserService }, { quietGrpcLogs }] = await Promise.all([import('../../users/client.js'), import('../grpc-logging.js')]);
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

// ------------------------------------------------------------------ parsing flags

function idOf(text: string, what = 'ID'): string {
  const trimmed = text.trim();
  if (!/^\d+$/.test(trimmed) || !Number.isSafeInteger(Number(trimmed)) || Number(trimmed) < 1) {
    throw new UsageError(`${what} must be a positive whole number; got "${text}"`);
  }
  return String(Number(trimmed));
}

function wholeNumber(text: string, flag: string, min: number): number {
  const value = /^\d+$/.test(text.trim()) ? Number(text) : NaN;
  if (!Number.isSafeInteger(value) || value < min) throw new UsageError(`${flag} must be a whole number of at least ${min}; got "${text}"`);
  return value;
}

function booleanOf(text: string, flag: string): boolean {
  const lower = text.trim().toLowerCase();
  if (lower === 'true') return true;
  if (lower === 'false') return false;
  throw new UsageError(`${flag} must be true or false; got "${text}"`);
}

function rolesOf(text: string): string[] {
  return text
    .split(',')
    .map((role) => role.trim())
    .filter((role) => role !== '');
}

function typesOf(text: string): EventTypeName[] {
  const types = rolesOf(text).map((type) => type.toUpperCase());
  const unknown = types.filter((type) => !(EVENT_TYPES as readonly string[]).includes(type));
  if (types.length === 0 || unknown.length > 0) {
    throw new UsageError(`--types takes a comma-separated list of created, updated, deleted; got "${text}"`);
  }
  return [...new Set(types)] as EventTypeName[];
}

// ------------------------------------------------------------------ presenting users

function isoOf(ts: Timestamp | null | undefined): string | null {
  if (!ts) return null;
  const ms = Number(ts.seconds) * 1000 + Math.floor((ts.nanos ?? 0) / 1_000_000);
  return Number.isFinite(ms) ? new Date(ms).toISOString() : null;
}

/** A user as `--json` prints it: the proto's field names, the id as a number, created_at as ISO 8601. */
export interface UserJson {
  id: number | string;
  username: string;
  email: string;
  full_name: string;
  is_active: boolean;
  roles: string[];
  created_at: string | null;
}

function userJson(user: UserMessage): UserJson {
  const id = Number(user.id);
  return {
    id: Number.isSafeInteger(id) ? id : user.id,
    username: user.username,
    email: user.email,
    full_name: user.full_name,
    is_active: user.is_active,
    roles: [...(user.roles ?? [])],
    created_at: isoOf(user.created_at),
  };
}

const USER_COLUMNS: readonly Column<UserJson>[] = [
  { header: 'id', value: (u) => u.id },
  { header: 'username', value: (u) => u.username },
  { header: 'email', value: (u) => u.email, maxWidth: 40 },
  { header: 'full_name', value: (u) => u.full_name, maxWidth: 30 },
  { header: 'active', value: (u) => u.is_active },
  { header: 'roles', value: (u) => u.roles.join(',') },
  { header: 'created_at', value: (u) => u.created_at },
];

function printUser(cc: CommandContext, user: UserMessage): void {
  const json = userJson(user);
  cc.out.record(
    USER_COLUMNS.map((column) => [column.header, column.value(json)] as const),
    json,
  );
}

// ------------------------------------------------------------------ create, get, update, delete, list

async function readPasswordFromStdin(stdin: InStream): Promise<string> {
  if (stdin.isTTY) {
    throw new UsageError('--password - reads the password from stdin, but stdin is a terminal', {
      hint: 'pipe it: printf %s "$PW" | miniapp users create ... --password -',
    });
  }
  const { readInput } = await import('../input.js');
  const text = await readInput('-', stdin, { what: 'password', limit: 4096 });
  const password = text.split(/\r?\n/)[0] ?? '';
  if (!password) throw new UsageError('--password -: stdin held no password');
  return password;
}

async function runCreate(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags & { username: string; email: string; password: string; fullName: string }>();
  const password = flags.password === '-' ? await readPasswordFromStdin(cc.io.stdin) : flags.password;
  const response = await withClient(
    cc,
    flags,
    (client) => client.createUser({ username: flags.username, email: flags.email, password, full_name: flags.fullName }),
    false,
  );
  if (!response.user) throw new MiniappError('the server answered CreateUser without a user');
  printUser(cc, response.user);
  if (!cc.out.json && response.message) cc.out.success(response.message);
}

async function runGet(cc: CommandContext, command: Command): Promise<void> {
  const id = idOf(command.processedArgs[0] as string);
  const user = await withClient(cc, command.opts<ConnectionFlags>(), (client) => client.getUser(id));
  printUser(cc, user);
}

async function runUpdate(cc: CommandContext, command: Command): Promise<void> {
  const id = idOf(command.processedArgs[0] as string);
  const flags = command.opts<ConnectionFlags & { username?: string; email?: string; fullName?: string; active?: string; roles?: string }>();
  const user: Partial<UserMessage> = {};
  const paths: UpdatePath[] = [];
  if (flags.username !== undefined) (user.username = flags.username, paths.push('username'));
  if (flags.email !== undefined) (user.email = flags.email, paths.push('email'));
  if (flags.fullName !== undefined) (user.full_name = flags.fullName, paths.push('full_name'));
  if (flags.active !== undefined) (user.is_active = booleanOf(flags.active, '--active'), paths.push('is_active'));
  if (flags.roles !== undefined) (user.roles = rolesOf(flags.roles), paths.push('roles'));
  if (paths.length === 0) {
    throw new UsageError('nothing to update: give at least one of --username, --email, --full-name, --active, --roles');
  }
  const updated = await withClient(cc, flags, (client) => client.updateUser(id, user, paths));
  printUser(cc, updated);
  if (!cc.out.json) cc.out.success(`updated ${paths.join(', ')} of user ${id}`);
}

async function runDelete(cc: CommandContext, command: Command): Promise<void> {
  const id = idOf(command.processedArgs[0] as string);
  await withClient(cc, command.opts<ConnectionFlags>(), (client) => client.deleteUser(id));
  if (cc.out.json) cc.out.printJson({ id: Number(id), deleted: true });
  else cc.out.success(`deleted user ${id}`);
}

async function runList(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags & { filter?: string; page: string; pageSize: string }>();
  const page = wholeNumber(flags.page, '--page', 1);
  const pageSize = wholeNumber(flags.pageSize, '--page-size', 0);
  if (page > 1 && pageSize === 0) throw new UsageError('--page needs --page-size (with page size 0 every user is on page 1)');
  const users = await withClient(cc, flags, (client) => client.listUsers({ page, page_size: pageSize, filter: flags.filter ?? '' }));
  const rows = users.map(userJson);
  cc.out.table(rows, USER_COLUMNS);
  if (cc.out.human && rows.length > 0) {
    cc.out.info(cc.out.errColor.dim(`${rows.length} user${rows.length === 1 ? '' : 's'}${pageSize ? ` (page ${page}, ${pageSize} per page)` : ''}`));
  }
}

// ------------------------------------------------------------------ watch

interface EventJson {
  type: EventTypeName;
  user: UserJson | null;
  timestamp: string | null;
}

function eventJson(event: UserEvent): EventJson {
  return { type: event.type, user: event.user ? userJson(event.user) : null, timestamp: isoOf(event.timestamp) };
}

function reconnectBaseOf(cc: CommandContext): number | undefined {
  const text = cc.env.MINIAPP_GRPC_RECONNECT_MS?.trim();
  if (!text) return undefined;
  if (!/^\d+$/.test(text) || Number(text) < 1) throw new ConfigError(`MINIAPP_GRPC_RECONNECT_MS must be a positive number of milliseconds; got "${text}"`);
  return Number(text);
}

async function runWatch(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags & { userId?: string; types?: string; count?: string }>();
  const request = {
    user_id: flags.userId === undefined ? '0' : idOf(flags.userId, '--user-id'),
    types: flags.types === undefined ? [] : typesOf(flags.types),
  };
  const count = flags.count === undefined ? undefined : wholeNumber(flags.count, '--count', 1);
  const baseDelayMs = reconnectBaseOf(cc);
  // Flags and settings are resolved once; each (re)connection is a fresh client built from them.
  const settings = await connectionOf(cc, flags);
  const { watchUserChanges, connectUserService, DEFAULT_DEADLINE_MS } = await import('../../users/client.js');
  await (await import('../grpc-logging.js')).quietGrpcLogs(cc.env);

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
        `${(json.timestamp ?? '').padEnd(24)}  ${paint[json.type](json.type.padEnd(7))}  ${String(u?.id ?? '').padStart(6)}  ` +
          `${(u?.username ?? '').padEnd(20)}  ${u?.email ?? ''}${u && !u.is_active ? c.dim(' (inactive)') : ''}${u?.roles.length ? c.dim(` [${u.roles.join(',')}]`) : ''}`,
      );
    } else {
      const u = json.user;
      cc.out.line(
        [json.timestamp ?? '', json.type, u?.id ?? '', u?.username ?? '', u?.email ?? '', u?.full_name ?? '', u?.is_active ?? '', u?.roles.join(',') ?? '', u?.created_at ?? '']
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
    onConnected: ({ reconnected }) => {
      if (reconnected) {
        cc.out.info(`reconnected to ${settings.address}; changes made while disconnected are not replayed`);
      } else if (human) {
        cc.out.info(cc.out.errColor.dim(`watching ${settings.address}; Ctrl-C stops`));
        cc.out.line(c.bold(`${'time'.padEnd(24)}  ${'event'.padEnd(7)}  ${'id'.padStart(6)}  ${'username'.padEnd(20)}  email`));
      }
    },
    onRetry: ({ attempt, delayMs, reason }) => {
      if (attempt === 1) cc.out.warn(`watch lost (${reason}); reconnecting in ${delayMs} ms (attempt ${attempt})`);
      else cc.out.warn(`still not connected (${reason}); trying again in ${delayMs} ms (attempt ${attempt})`);
    },
  });
}

// ------------------------------------------------------------------ input files

/**
 * Looks at the input up to its first non-blank character, without
 * consuming it: `{` means JSON lines, anything else CSV.
 */
async function detectFormat(source: AsyncIterable<Buffer | string>): Promise<{ format: 'jsonl' | 'csv' | 'empty'; input: AsyncIterable<Buffer | string> }> {
  const iterator = source[Symbol.asyncIterator]();
  const buffered: (Buffer | string)[] = [];
  let format: 'jsonl' | 'csv' | 'empty' = 'empty';
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
      throw new UsageError('the input is a JSON array; give JSON lines (one object a line) or CSV', { hint: "turn an array into JSON lines with: jq -c '.[]' FILE" });
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
function jsonProblem(error: unknown): string {
  const position = /position (\d+)/.exec((error as Error).message)?.[1];
  return `not valid JSON${position ? ` (at character ${Number(position) + 1})` : ''}`;
}

function unknownKeys(object: Record<string, unknown>, allowed: readonly string[]): string[] {
  return Object.keys(object).filter((key) => !allowed.includes(key));
}

// ------------------------------------------------------------------ bulk-create

const CREATE_FIELDS = ['username', 'email', 'password', 'full_name'] as const;

interface RowFailure {
  line: number;
  index: number | null;
  status: string;
  message: string;
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
  if (unknown.length > 0) return `unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => JSON.stringify(k)).join(', ')}; expected ${CREATE_FIELDS.join(', ')}`;
  const request = { username: '', email: '', password: '', full_name: '' };
  for (const field of CREATE_FIELDS) {
    const value = object[field];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string') return `${field} must be a string`;
    request[field] = value;
  }
  return request;
}

interface ParsedRows {
  rows: AsyncIterable<CreateUserRequest>;
  /** Line of the row sent at each stream index. */
  lineOfIndex: number[];
  failures: RowFailure[];
  format: () => 'jsonl' | 'csv' | 'empty';
}

/** Rows to send, parsed as they are read; rows that cannot be parsed become failures and are not sent. */
function parseCreateRows(input: AsyncIterable<Buffer | string>): ParsedRows {
  const lineOfIndex: number[] = [];
  const failures: RowFailure[] = [];
  let format: 'jsonl' | 'csv' | 'empty' = 'empty';
  const rows = async function* (): AsyncGenerator<CreateUserRequest> {
    const detected = await detectFormat(input);
    format = detected.format;
    if (format === 'jsonl') {
      for await (const { text, line } of linesOf(detected.input)) {
        if (!text.trim()) continue;
        const request = createRequestOf(text);
        if (typeof request === 'string') {
          failures.push({ line, index: null, status: 'INVALID_ARGUMENT', message: `not sent: ${request}` });
          continue;
        }
        lineOfIndex.push(line);
        yield request;
      }
    } else if (format === 'csv') {
      yield* csvRows(detected.input, lineOfIndex, failures);
    }
  };
  return { rows: rows(), lineOfIndex, failures, format: () => format };
}

async function* csvRows(input: AsyncIterable<Buffer | string>, lineOfIndex: number[], failures: RowFailure[]): AsyncGenerator<CreateUserRequest> {
  const [{ parse }, { Readable }] = await Promise.all([import('csv-parse'), import('node:stream')]);
  const startLine = (endLine: number, raw: string | undefined, unterminated = false) => {
    const body = unterminated ? (raw ?? '') : (raw ?? '').replace(/\r?\n$|\r$/, '');
    return endLine - (body.match(/\n/g)?.length ?? 0);
  };
  const parser = Readable.from(input).pipe(
    parse({
      bom: true,
      skip_empty_lines: true,
      record_delimiter: ['\r\n', '\n'],
      info: true,
      raw: true,
      skip_records_with_error: true,
      on_skip: (error, raw) => {
        if (!error) return undefined;
        const line = startLine(Number((error as { lines?: unknown }).lines ?? 0), raw, error.code === 'CSV_QUOTE_NOT_CLOSED');
        // csv-parse's messages name the rule and the line, and quote at most one character of the row.
        failures.push({ line, index: null, status: 'INVALID_ARGUMENT', message: `not sent: ${error.message.replace(/\s*(at|on) line \d+/, '')}` });
        return undefined;
      },
    }),
  );
  let columns: string[] | undefined;
  for await (const item of parser as AsyncIterable<{ record: string[]; raw: string; info: { lines: number } }>) {
    const line = startLine(item.info.lines, item.raw);
    if (!columns) {
      columns = item.record.map((name) => name.trim().toLowerCase());
      const unknown = columns.filter((name) => !(CREATE_FIELDS as readonly string[]).includes(name));
      const missing = ['username', 'email', 'password'].filter((name) => !columns!.includes(name));
      const repeated = columns.filter((name, i) => columns!.indexOf(name) !== i);
      if (unknown.length || missing.length || repeated.length) {
        parser.destroy();
        // Without the required names the first line may be a data row (a password among it): name no cell then.
        const detail = missing.length
          ? `; missing: ${missing.join(', ')}`
          : `${unknown.length ? `; unknown: ${unknown.join(', ')}` : ''}${repeated.length ? `; repeated: ${repeated.join(', ')}` : ''}`;
        throw new UsageError(`the CSV header (line ${line}) must name the columns username, email, password and optionally full_name${detail}`, {
          hint: 'the first line of a CSV file is its header, e.g. username,email,password,full_name',
        });
      }
      continue;
    }
    const request = { username: '', email: '', password: '', full_name: '' };
    columns.forEach((name, i) => {
      request[name as (typeof CREATE_FIELDS)[number]] = item.record[i] ?? '';
    });
    lineOfIndex.push(line);
    yield request;
  }
}

const FAILURE_COLUMNS: readonly Column<RowFailure>[] = [
  { header: 'line', value: (f) => f.line },
  { header: 'index', value: (f) => f.index },
  { header: 'status', value: (f) => f.status },
  { header: 'message', value: (f) => f.message, maxWidth: 80 },
];

async function runBulkCreate(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags>();
  const file = command.processedArgs[0] as string;
  const client = await connect(cc, flags);
  try {
    const input = await openInput(file, cc.io.stdin, { what: 'users' });
    await client.ready();
    const parsed = parseCreateRows(input);
    const spinner = await cc.out.spinner('sending users');
    let response;
    try {
      let lastShown = 0;
      response = await client.bulkCreate(parsed.rows, (sent) => {
        const now = Date.now();
        if (now - lastShown >= 100) {
          lastShown = now;
          spinner.text(`sent ${sent} user${sent === 1 ? '' : 's'}`);
        }
      });
      spinner.stop();
    } catch (error) {
      spinner.fail('bulk create failed');
      throw error;
    }
    const serverFailures = response.failures.map((f: BulkCreateFailure) => ({
      line: parsed.lineOfIndex[f.index] ?? 0,
      index: f.index,
      status: f.status,
      message: f.message,
    }));
    const failures = [...parsed.failures, ...serverFailures].sort((a, b) => a.line - b.line);
    const created = response.created_count;
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
    if (parsed.format() === 'empty') cc.out.warn(`${file === '-' ? 'stdin' : file} held no users`);
    if (failures.length > 0) {
      throw new MiniappError(`${failures.length} of ${total} user${total === 1 ? '' : 's'} were not created`, {
        hint: 'fix the rows listed and run bulk-create again with just those',
      });
    }
  } finally {
    client.close();
  }
}

// ------------------------------------------------------------------ sync

const SYNC_KEYS = ['ref', 'upsert', 'delete'] as const;
const UPSERT_KEYS = ['id', 'username', 'email', 'full_name', 'is_active', 'roles', 'password'] as const;

interface SyncResult {
  ref: string;
  line: number;
  op: 'create' | 'update' | 'delete' | '';
  ok: boolean;
  user: UserJson | null;
  status: string;
  message: string;
}

function positiveIdOf(value: unknown): string | undefined {
  const text = typeof value === 'number' ? String(value) : typeof value === 'string' ? value.trim() : '';
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text)) || Number(text) < 1) return undefined;
  return String(Number(text));
}

/** A JSON line as a sync request, or why it is not one. */
function syncRequestOf(text: string, line: number): { request: UserSyncRequest; op: SyncResult['op'] } | { ref: string; problem: string } {
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
  if (unknownFields.length > 0) return fail(`unknown upsert field ${unknownFields.map((k) => JSON.stringify(k)).join(', ')}; expected ${UPSERT_KEYS.join(', ')}`);
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

const SYNC_COLUMNS: readonly Column<SyncResult>[] = [
  { header: 'ref', value: (r) => r.ref },
  { header: 'op', value: (r) => r.op },
  { header: 'result', value: (r) => (r.ok ? 'ok' : 'failed') },
  { header: 'id', value: (r) => r.user?.id },
  { header: 'username', value: (r) => r.user?.username },
  { header: 'status', value: (r) => r.status },
  { header: 'message', value: (r) => r.message, maxWidth: 70 },
];

function syncResultJson(result: SyncResult): Record<string, unknown> {
  return result.ok
    ? { ref: result.ref, line: result.line, op: result.op, ok: true, user: result.user }
    : { ref: result.ref, line: result.line, op: result.op || null, ok: false, status: result.status, message: result.message };
}

async function runSync(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags>();
  const file = command.processedArgs[0] as string;
  const client = await connect(cc, flags);
  const results: SyncResult[] = [];
  let failed = 0;
  const emit = (result: SyncResult) => {
    if (!result.ok) failed++;
    if (cc.out.json) cc.out.line(JSON.stringify(syncResultJson(result)));
    else if (cc.out.isTTY) results.push(result);
    else cc.out.table([result], SYNC_COLUMNS);
  };
  // Everything of the input in order: lines not sent wait for the answers to the lines before them.
  const order: ({ sent: true; ref: string; line: number; op: SyncResult['op'] } | { sent: false; result: SyncResult })[] = [];
  const flushLocal = () => {
    while (order[0] && !order[0].sent) emit((order.shift() as { result: SyncResult }).result);
  };
  try {
    const input = await openInput(file, cc.io.stdin, { what: 'sync requests' });
    await client.ready();
    const requests = (async function* () {
      for await (const { text, line } of linesOf(input)) {
        if (!text.trim()) continue;
        const parsed = syncRequestOf(text, line);
        if ('problem' in parsed) {
          order.push({ sent: false, result: { ref: parsed.ref, line, op: '', ok: false, user: null, status: 'INVALID_ARGUMENT', message: `not sent: ${parsed.problem}` } });
          flushLocal();
          continue;
        }
        order.push({ sent: true, ref: parsed.request.client_ref, line, op: parsed.op });
        yield parsed.request;
      }
    })();
    await client.sync(requests, (response: UserSyncResponse) => {
      flushLocal();
      const head = order.shift();
      const sent = head && head.sent ? head : { ref: response.client_ref, line: 0, op: '' as const };
      const user = response.result === 'user' && response.user ? userJson(response.user) : null;
      emit({
        ref: response.client_ref || sent.ref,
        line: sent.line,
        op: sent.op,
        ok: response.result === 'user',
        user,
        status: response.result === 'user' ? 'OK' : (response.failure?.status ?? 'UNKNOWN'),
        message: response.result === 'user' ? '' : (response.failure?.message ?? 'no result'),
      });
    });
    flushLocal();
  } finally {
    client.close();
  }
  if (cc.out.isTTY && !cc.out.json) cc.out.table(results, SYNC_COLUMNS);
  if (failed > 0) throw new MiniappError(`${failed} sync request${failed === 1 ? ' was' : 's were'} not applied`);
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
