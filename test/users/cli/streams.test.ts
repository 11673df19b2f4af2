/**
 * The streaming commands against a real `miniapp serve`: watch (with the
 * changes made meanwhile by another client, and across a server restart
 * on the same port), bulk-create from a file and from stdin, sync in
 * order, and chat with a raw grpc-js client in the same room.
 */
import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { plain } from '../../helpers/cli.js';
import { bearer, rawClient, rawUnary, runLive, startUserServer, waitFor, type RawClient, type UserServer, useUsersCli } from './harness.js';
import { BACKENDS } from '../../helpers/postgres.js';

describe.each(BACKENDS)('on %s', (backend) => {
  const cli = useUsersCli(backend);

  const users = cli.users;

  function client(address = cli.server.address): RawClient {
    const made = rawClient(address);
    cli.defer(() => made.close());
    return made;
  }

  interface User {
    id: string;
    username: string;
  }

  async function createRaw(raw: RawClient, name: string): Promise<User> {
    const response = await rawUnary<{ user: User }>(raw, 'CreateUser', {
      username: name,
      email: `${name}@example.com`,
      password: 'correct-horse',
      full_name: '',
    });
    return response.user;
  }

  function jsonLines(text: string): Record<string, unknown>[] {
    return text
      .split('\n')
      .filter((line) => line.trim())
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  describe('users watch', () => {
    it('--count 3 --json prints the CREATED, UPDATED and DELETED events made meanwhile, then exits 0', async () => {
      const watch = runLive(cli.sb, ['users', 'watch', '--count', '3', '--json'], cli.server.env);
      await waitFor(() => cli.server.running.users!.watcherCount() === 1, 'the watcher');
      const raw = client();
      const user = await createRaw(raw, 'walt');
      await rawUnary(raw, 'UpdateUser', { user_id: user.id, user: { full_name: 'Walt W' }, update_mask: { paths: ['full_name'] } }, cli.server.token);
      await rawUnary(raw, 'DeleteUser', { user_id: user.id }, cli.server.token);
      expect(await watch.done, watch.stderr.text).toBe(0);
      const events = jsonLines(watch.stdout.text);
      expect(events.map((e) => e.type)).toEqual(['CREATED', 'UPDATED', 'DELETED']);
      expect(events[1]).toMatchObject({ user: { id: Number(user.id), username: 'walt', full_name: 'Walt W' } });
      for (const event of events) expect(event.timestamp).toMatch(/^\d{4}-\d\d-\d\dT.*Z$/);
      // The call was cancelled cleanly: the server holds no listener any more.
      await waitFor(() => cli.server.running.users!.watcherCount() === 0, 'the watcher to leave');
    });

    it('filters by --types and --user-id, prints rows on a TTY, and stops on Ctrl-C', async () => {
      const raw = client();
      const first = await createRaw(raw, 'xena');
      const watch = runLive(cli.sb, ['users', 'watch', '--types', 'updated', '--user-id', first.id], cli.server.env, { tty: true });
      await waitFor(() => cli.server.running.users!.watcherCount() === 1, 'the watcher');
      await createRaw(raw, 'yuri');
      await rawUnary(raw, 'UpdateUser', { user_id: '2', user: { full_name: 'Other' }, update_mask: { paths: ['full_name'] } }, cli.server.token);
      await rawUnary(raw, 'UpdateUser', { user_id: first.id, user: { full_name: 'Xena X' }, update_mask: { paths: ['full_name'] } }, cli.server.token);
      await waitFor(() => watch.stdout.text.includes('UPDATED'), 'the update row');
      watch.interrupt();
      expect(await watch.done, watch.stderr.text).toBe(0);
      const text = plain(watch.stdout.text);
      expect(text.split('\n')[0]).toMatch(/^ +seq +time +event +id +username +email$/);
      // The update is the fourth change of the log: two creates and another update before it.
      expect(text).toMatch(/^ +4 +\S+Z +UPDATED +1 +xena +xena@example\.com/m);
      expect(text).not.toContain('yuri');
      expect(text).not.toContain('CREATED');
      expect(plain(watch.stderr.text)).toContain('SIGINT: stopping the watch');
      await waitFor(() => cli.server.running.users!.watcherCount() === 0, 'the watcher to leave');
    });

    it('prints tab-separated events when piped', async () => {
      const watch = runLive(cli.sb, ['users', 'watch', '--count', '1'], cli.server.env);
      await waitFor(() => cli.server.running.users!.watcherCount() === 1, 'the watcher');
      await createRaw(client(), 'zoe');
      expect(await watch.done).toBe(0);
      // The sequence comes last, so that the columns before it stay where scripts expect them.
      expect(watch.stdout.text).toMatch(/^\d{4}-\S+Z\tCREATED\t1\tzoe\tzoe@example\.com\t\ttrue\t\t\d{4}-\S+Z\t1\n$/);
    });

    it('rejects unknown --types (exit 2)', async () => {
      const result = await users(['watch', '--types', 'created,renamed']);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('--types');
    });

    it('reconnects with back-off after the server restarts on the same port', async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'miniapp-users-data-'));
      cli.defer(() => rmSync(dataDir, { recursive: true, force: true }));
      // A data dir (or the database) keeps the admin token across the restart; the port is the one port 0 gave.
      const kept = backend === 'sqlite' ? { dataDir } : { store: cli.store.location() };
      const before = await startUserServer(kept);
      let after: UserServer | undefined;
      cli.defer(async () => {
        await before.close();
        await after?.close();
      });
      const watch = runLive(cli.sb, ['users', 'watch', '--count', '2', '--json'], { ...before.env, MINIAPP_GRPC_RECONNECT_MS: '20' });
      await waitFor(() => before.running.users!.watcherCount() === 1, 'the watcher');
      await createRaw(client(before.address), 'before');
      await waitFor(() => watch.stdout.text.includes('"before"'), 'the first event');

      await before.close();
      await waitFor(() => watch.stderr.text.includes('reconnecting in'), 'a reconnect attempt');
      after = await startUserServer({ ...kept, port: before.port });
      expect(after.token).toBe(before.token);
      await waitFor(() => after!.running.users!.watcherCount() === 1, 'the watcher to come back', 15_000);
      await createRaw(client(after.address), 'after');

      expect(await watch.done, watch.stderr.text).toBe(0);
      expect(jsonLines(watch.stdout.text).map((e) => (e.user as User).username)).toEqual(['before', 'after']);
      expect(watch.stderr.text).toMatch(/watch lost \(.*\); reconnecting in 20 ms \(attempt 1\)/);
      expect(watch.stderr.text).toContain(`reconnected to ${before.address}`);
    });
  });

  describe('users bulk-create', () => {
    const good = (name: string) => JSON.stringify({ username: name, email: `${name}@example.com`, password: 'correct-horse', full_name: `${name} N` });

    it('creates the good rows of a JSON-lines file and reports the bad ones with their lines; exit 1', async () => {
      await createRaw(client(), 'taken');
      const file = join(cli.sb.root, 'users.jsonl');
      writeFileSync(
        file,
        `${[
          good('amy'),
          JSON.stringify({ username: 'shorty', email: 'shorty@example.com', password: 'short' }),
          '',
          '{"username": "broken", ',
          JSON.stringify({ username: 'taken', email: 'another@example.com', password: 'correct-horse' }),
          good('bea'),
          JSON.stringify({ username: 'typo', email: 'typo@example.com', password: 'correct-horse', fullname: 'T' }),
          good('amy').replace('amy@', 'amy2@'),
        ].join('\n')}\n`,
      );
      const result = await users(['bulk-create', file, '--json']);
      expect(result.code).toBe(1);
      const report = JSON.parse(result.stdout);
      expect(report).toMatchObject({ created: 2, failed: 5 });
      expect(report.failures).toEqual([
        { line: 2, index: 1, status: 'INVALID_ARGUMENT', message: 'password must be at least 8 characters' },
        { line: 4, index: null, status: 'INVALID_ARGUMENT', message: expect.stringMatching(/^not sent: not valid JSON/) },
        { line: 5, index: 2, status: 'ALREADY_EXISTS', message: expect.stringContaining('username') },
        { line: 7, index: null, status: 'INVALID_ARGUMENT', message: expect.stringContaining('unknown field "fullname"') },
        { line: 8, index: 4, status: 'ALREADY_EXISTS', message: expect.stringContaining('username') },
      ]);
      expect(result.stderr).toContain('5 of 7 users were not created');
      expect(result.stdout).not.toContain('correct-horse');
      const listed = JSON.parse((await users(['list', '--json'])).stdout) as { username: string; full_name: string }[];
      expect(listed.map((u) => u.username)).toEqual(['taken', 'amy', 'bea']);
      expect(listed[1]!.full_name).toBe('amy N');
    });

    it('reads JSON lines from stdin with "-", prints the summary and the failure rows; exit 0 when all went in', async () => {
      const ok = await users(['bulk-create', '-'], { stdin: `${good('cid')}\r\n${good('dot')}\r\n` });
      expect(ok.code, ok.stderr).toBe(0);
      expect(ok.stdout).toBe('');
      expect(ok.stderr).toContain('created 2, failed 0');

      const tty = await users(['bulk-create', '-'], { stdin: `${good('eli')}\nnot json\n`, tty: true });
      expect(tty.code).toBe(1);
      const text = plain(tty.stdout);
      expect(text).toContain('created 1, failed 1');
      // No failure has an index (they are lines of a JSON-lines file): the empty column is left out.
      expect(text).toMatch(/│ line +│ status +│ message +│/);
      expect(text).toMatch(/│ 2 +│ INVALID_ARGUMENT +│ not sent: not valid JSON/);
    });

    it('Ctrl-C says how many rows were sent and created (exit 130), and --skip-existing goes on from there', async () => {
      const live = runLive(cli.sb, ['users', 'bulk-create', '-'], cli.server.env);
      cli.defer(() => void live.stdin.end());
      live.stdin.write(`${good('rin')}\n${good('ron')}\n${good('rua')}\n`);
      // The rows are in; more would come, but the person presses Ctrl-C.
      const created = async () => ((await users(['list', '--json'])).stdout.match(/"username"/g) ?? []).length;
      for (let i = 0; i < 500 && (await created()) < 3; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      live.interrupt();
      expect(await live.done).toBe(130);
      const said = plain(live.stderr.text);
      expect(said).toContain(
        'error: interrupted (SIGINT): 3 rows sent, 3 created, 0 failed, as serve answered for every row sent; the rest of stdin was not sent',
      );
      expect(said).toContain('to go on, run it again with --skip-existing');

      const file = join(cli.sb.root, 'again.jsonl');
      writeFileSync(file, ['rin', 'ron', 'rua', 'sia', 'sol'].map(good).join('\n'));
      const plainRerun = await users(['bulk-create', file]);
      expect(plainRerun.code).toBe(1);
      expect(plainRerun.stderr).toContain('or with --skip-existing to pass over users already there');
      const rerun = await users(['bulk-create', file, '--skip-existing', '--json']);
      expect(rerun.code, rerun.stderr).toBe(0);
      // sia and sol went in with the plain rerun; everything is there now.
      expect(JSON.parse(rerun.stdout)).toEqual({ created: 0, failed: 0, skipped: 5, failures: [] });
      const fresh = join(cli.sb.root, 'more.jsonl');
      writeFileSync(fresh, ['rin', 'tam'].map(good).join('\n'));
      const more = await users(['bulk-create', fresh, '--skip-existing']);
      expect(more.code, more.stderr).toBe(0);
      expect(more.stderr).toContain('created 1, skipped 1 already there, failed 0');
    });

    it('reads CSV with a header row, quoted fields and a short row', async () => {
      const csv =
        'username,email,password,full_name\r\nfay,fay@example.com,correct-horse,"Fay, ""the"" First"\r\ngus,gus@example.com\r\nhal,hal@example.com,correct-horse,"two\r\nlines"\r\n';
      const result = await users(['bulk-create', '-', '--json'], { stdin: csv });
      expect(result.code).toBe(1);
      const report = JSON.parse(result.stdout);
      expect(report).toMatchObject({ created: 2, failed: 1 });
      expect(report.failures).toEqual([{ line: 3, index: null, status: 'INVALID_ARGUMENT', message: 'not sent: 2 fields where the header has 4' }]);
      const listed = JSON.parse((await users(['list', '--json'])).stdout) as { username: string; full_name: string }[];
      expect(listed.map((u) => [u.username, u.full_name])).toEqual([
        ['fay', 'Fay, "the" First'],
        ['hal', 'two\r\nlines'],
      ]);
    });

    it('refuses a CSV header with unknown or missing columns (exit 2), sending nothing', async () => {
      const unknown = await users(['bulk-create', '-'], { stdin: 'username,email,password,fullname\nxavi,x@example.com,correct-horse,X\n' });
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toContain('unknown: fullname');
      // A file without a header: its first row is no header, and its cells (a password) are not echoed.
      const headless = await users(['bulk-create', '-'], { stdin: 'yann,y@example.com,secret-pw-1,Y\n' });
      expect(headless.code).toBe(2);
      expect(headless.stderr).toContain('missing: username, email, password');
      expect(headless.stderr).not.toContain('secret-pw-1');
      const array = await users(['bulk-create', '-'], { stdin: '[{"username":"zed"}]' });
      expect(array.code).toBe(2);
      expect(array.stderr).toContain('JSON array');
      expect(JSON.parse((await users(['list', '--json'])).stdout)).toEqual([]);
    });

    it('streams 1,000 rows with back-pressure', async () => {
      const lines = Array.from({ length: 1000 }, (_, i) => good(`user${i}`)).join('\n');
      const result = await users(['bulk-create', '-', '--json'], { stdin: lines });
      expect(result.code, result.stderr).toBe(0);
      expect(JSON.parse(result.stdout)).toEqual({ created: 1000, failed: 0, failures: [] });
    }, 60_000);

    it('exits 4 with a wrong token', async () => {
      const result = await users(['bulk-create', '-'], { stdin: good('ida'), env: { MINIAPP_GRPC_TOKEN: 'mat_wrong' } });
      expect(result.code).toBe(4);
    });
  });

  describe('users sync', () => {
    it('applies upserts and deletes in order and prints each result in order', async () => {
      const raw = client();
      await createRaw(raw, 'old');
      const input = [
        { ref: 'c1', upsert: { username: 'new1', email: 'new1@example.com', password: 'correct-horse', roles: ['editor'] } },
        { ref: 'u1', upsert: { id: 1, username: 'old', email: 'old@changed.org', full_name: 'Old O', is_active: false } },
        { ref: 'd1', delete: 2 },
        { ref: 'd2', delete: 2 },
      ]
        .map((line) => JSON.stringify(line))
        .concat([
          '{"ref":"bad","upsert":{"username":5}}',
          JSON.stringify({ ref: 'c2', upsert: { username: 'new2', email: 'new2@example.com', password: 'correct-horse' } }),
        ])
        .join('\n');
      const result = await users(['sync', '-', '--json'], { stdin: input });
      expect(result.code).toBe(1);
      expect(result.stderr).toContain('2 sync requests were not applied');
      const results = jsonLines(result.stdout);
      expect(results.map((r) => [r.ref, r.op, r.ok])).toEqual([
        ['c1', 'create', true],
        ['u1', 'update', true],
        ['d1', 'delete', true],
        ['d2', 'delete', false],
        ['bad', null, false],
        ['c2', 'create', true],
      ]);
      expect(results[0]).toMatchObject({ user: { id: 2, username: 'new1', is_active: true, roles: ['editor'] } });
      expect(results[1]).toMatchObject({ user: { id: 1, email: 'old@changed.org', is_active: false, roles: [] } });
      expect(results[3]).toMatchObject({ status: 'NOT_FOUND', message: 'no user with id 2' });
      expect(results[4]).toMatchObject({ line: 5, status: 'INVALID_ARGUMENT', message: 'not sent: upsert.username must be a string' });
      const listed = JSON.parse((await users(['list', '--json'])).stdout) as { username: string }[];
      expect(listed.map((u) => u.username)).toEqual(['old', 'new2']);
    });

    it('prints a table on a TTY and tab-separated rows when piped; exit 0 when all applied', async () => {
      const file = join(cli.sb.root, 'sync.jsonl');
      writeFileSync(file, `${JSON.stringify({ ref: 'a', upsert: { username: 'sam', email: 'sam@example.com', password: 'correct-horse' } })}\n`);
      const tty = await users(['sync', file], { tty: true });
      expect(tty.code, tty.stderr).toBe(0);
      expect(plain(tty.stdout)).toMatch(/│ a +│ create +│ ok +│ 1 +│ sam +│ OK +│/);
      writeFileSync(file, `${JSON.stringify({ ref: 'b', delete: 1 })}\n`);
      const piped = await users(['sync', file]);
      expect(piped.code, piped.stderr).toBe(0);
      expect(piped.stdout).toBe('b\tdelete\tok\t1\tsam\tOK\t\n');
    });
  });

  describe('users chat', () => {
    function chatStream(raw: RawClient, token: string): grpc.ClientDuplexStream<unknown, { room: string; sender: string; text: string }> {
      const stream = (raw.UserChat as (md: grpc.Metadata) => grpc.ClientDuplexStream<unknown, { room: string; sender: string; text: string }>)(bearer(token));
      cli.defer(() => void stream.cancel());
      stream.on('error', () => {});
      return stream;
    }

    it('joins the room at once, sends each stdin line, prints what the others say, and ends with stdin', async () => {
      const chat = runLive(cli.sb, ['users', 'chat', '--room', 'ops'], cli.server.env);
      await waitFor(() => cli.server.running.users!.chatParticipantCount() === 1, 'the CLI to join');
      const other = chatStream(client(), cli.server.token);
      const received: { room: string; sender: string; text: string }[] = [];
      other.on('data', (message: { room: string; sender: string; text: string }) => received.push(message));
      other.write({ room: 'ops', text: '' });
      await waitFor(() => cli.server.running.users!.chatParticipantCount() === 2, 'the raw client to join');

      other.write({ room: 'ops', sender: 'raw', text: 'hello from raw' });
      await waitFor(() => chat.stdout.text.includes('hello from raw'), 'the CLI to print the message');
      expect(chat.stdout.text).toBe('[ops] raw: hello from raw\n');

      chat.stdin.write('first line\n\nsecond ');
      chat.stdin.write('line\n');
      await waitFor(() => received.length === 2, 'the raw client to receive both lines');
      expect(received.map((m) => [m.room, m.text])).toEqual([
        ['ops', 'first line'],
        ['ops', 'second line'],
      ]);
      chat.stdin.end();
      expect(await chat.done, chat.stderr.text).toBe(0);
      await waitFor(() => cli.server.running.users!.chatParticipantCount() === 1, 'the CLI to leave');
    });

    it('sends piped lines to the room (--json prints what others say as JSON lines) and leaves on Ctrl-C', async () => {
      const other = chatStream(client(), cli.server.token);
      const received: string[] = [];
      other.on('data', (message: { text: string }) => received.push(message.text));
      other.write({ room: 'dev', text: '' });
      await waitFor(() => cli.server.running.users!.chatParticipantCount() === 1, 'the raw client to join');

      const piped = await users(['chat', '--room', 'dev'], { stdin: 'one\ntwo\n' });
      expect(piped.code, piped.stderr).toBe(0);
      await waitFor(() => received.length === 2, 'the piped lines');
      expect(received).toEqual(['one', 'two']);

      const live = runLive(cli.sb, ['users', 'chat', '--room', 'dev', '--json'], cli.server.env);
      await waitFor(() => cli.server.running.users!.chatParticipantCount() === 2, 'the CLI to join');
      other.write({ room: 'dev', sender: 'bot', text: 'ping' });
      await waitFor(() => live.stdout.text.includes('ping'), 'the JSON line');
      expect(JSON.parse(live.stdout.text)).toMatchObject({ room: 'dev', sender: 'bot', text: 'ping', sent_at: expect.stringMatching(/Z$/) });
      live.interrupt();
      expect(await live.done).toBe(0);
      expect(live.stderr.text).toContain('SIGINT: left [dev]');
      await waitFor(() => cli.server.running.users!.chatParticipantCount() === 1, 'the CLI to leave');
    });
  });
});
