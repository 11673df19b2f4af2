/**
 * `miniapp users ...`: the gRPC user service (user.v1.UserService) from
 * the command line. This file is the group's commander wiring; each
 * command is a file of its own beside it (create.ts, list.ts, watch.ts,
 * ...), loaded when its action runs, so that `miniapp users --help` loads
 * none of them and no gRPC module. The client is src/users/client.ts;
 * reading import and sync files and running them is src/users/.
 */
import type { Command } from 'commander';
import type { Bind, Handler } from '../../command.js';
import { withConnection } from '../../connect/grpc-connection.js';
import { DEFAULT_PAGE_SIZE } from './shared.js';

const CONNECTION_HELP = `
Connection: --addr, else MINIAPP_GRPC_ADDR, else the profile's grpc-addr
(127.0.0.1:50051); the token from --token, else MINIAPP_GRPC_TOKEN, else
the profile's grpc-token (\`miniapp serve\` stores its admin token there).
Exit codes: 4 UNAUTHENTICATED; 5 UNAVAILABLE or DEADLINE_EXCEEDED; 1 any
other status, printed with its name (e.g. "NOT_FOUND: no user with id 9").`;

/** A command's action, its file loaded when it runs (so that the group's help loads none of them). */
const lazy = (bind: Bind, load: () => Promise<Handler>) => bind(async (cc, command) => (await load())(cc, command));

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
    .action(lazy(bind, () => import('./create.js').then((m) => m.runCreate)));

  withConnection(users.command('get').description('show one user').argument('<id>', 'user id')).action(
    lazy(bind, () => import('./get.js').then((m) => m.runGet)),
  );

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
    .action(lazy(bind, () => import('./update.js').then((m) => m.runUpdate)));

  withConnection(users.command('delete').description('delete a user').argument('<id>', 'user id')).action(
    lazy(bind, () => import('./delete.js').then((m) => m.runDelete)),
  );

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
      .option(
        '--page-token <token>',
        'the page after the one that gave this token (the footer\'s next page command; next_page_token with --json); "" for the first page',
      )
      .option('--all', 'every user, also on a terminal'),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp users list\n  miniapp users list --page 2\n  miniapp users list --all\n' +
        '  miniapp users list --filter example.com --page 2 --page-size 20 --json\n  miniapp users list | wc -l\n' +
        '  miniapp users list --page-size 100 --page-token "" --json    # {"users": [...], "next_page_token": "..."}\n' +
        '\nA page token starts the page right after the last user of the page that gave it, whatever was created or deleted\n' +
        'since: following tokens shows every user once. Give the same --filter with it; --page-size may change.',
    )
    .action(lazy(bind, () => import('./list.js').then((m) => m.runList)));

  withConnection(
    users
      .command('watch')
      .summary('print user changes as they happen; reconnects and resumes when the server restarts')
      .description(
        'print user changes as they happen (with --json one object a line: sequence, type CREATED, UPDATED or DELETED, ' +
          'the user and the timestamp); when the stream breaks (the server restarts, the load balancer moves it), ' +
          'reconnects with back-off and resumes after the last change printed: none is missed or printed twice; Ctrl-C stops',
      )
      .option('--user-id <id>', "only this user's changes")
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
    .action(lazy(bind, () => import('./watch.js').then((m) => m.runWatch)));

  withConnection(
    users
      .command('bulk-create')
      .summary('create users from JSON lines or CSV (a file or -); exits 1 when any row failed')
      .description(
        'create users from a file ("-" for stdin): JSON lines ({"username","email","password","full_name"} a line) or ' +
          'CSV with a header row (username,email,password[,full_name]); streams the rows and prints the created and ' +
          'failed counts with every failure, by the line of the file. On a terminal a progress line shows the rows ' +
          'answered (of the total, for a file), created, failed, the rate and the time left, and each failure as it ' +
          'comes. Exits 1 when any row failed, so that scripts notice. Ctrl-C stops it and says how many rows were sent ' +
          'and created (exit 130); run it again with --skip-existing to go on. Needs an admin token.',
      )
      .argument('<file>', 'the input file, or - for stdin')
      .option('--skip-existing', 'a row whose username or e-mail is taken (ALREADY_EXISTS) is skipped, not failed: to go on after an interrupted run'),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp users bulk-create users.jsonl\n  miniapp users bulk-create users.csv --json\n  generate-users | miniapp users bulk-create -\n  miniapp users bulk-create users.jsonl --skip-existing   # after Ctrl-C: the rest',
    )
    .action(lazy(bind, () => import('./bulk-create.js').then((m) => m.runBulkCreate)));

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
    .action(lazy(bind, () => import('./sync.js').then((m) => m.runSync)));

  withConnection(
    users
      .command('chat')
      .summary("join a chat room: stdin lines out, the others' messages in")
      .description('join a chat room: each line of stdin is a message; prints what the others say ([room] sender: text); ends with stdin or Ctrl-C')
      .option('--room <name>', 'the room', 'general'),
  )
    .addHelpText('after', '\nExamples:\n  miniapp users chat --room ops\n  echo "deploy done" | miniapp users chat --room ops')
    .action(lazy(bind, () => import('./chat.js').then((m) => m.runChat)));
}
