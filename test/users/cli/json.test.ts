/**
 * Every `miniapp users` command that prints honours --json, also on a
 * terminal: exact JSON on stdout (an object, an array, or one object a line
 * for the streams), nothing for people on stderr, and a failure as one
 * JSON object on stderr.
 */
import { describe, expect, it } from 'vitest';
import { rawClient, runLive, waitFor, useUsersCli } from './harness.js';
import { BACKENDS } from '../../helpers/postgres.js';

describe.each(BACKENDS)('on %s', (backend) => {
  const cli = useUsersCli(backend);

  function users(argv: string[], options: { stdin?: string; env?: Record<string, string> } = {}) {
    return cli.sb.run(['users', ...argv, '--json'], {
      env: { ...cli.server.env, ...options.env },
      stdin: options.stdin,
      tty: true,
      stdinTTY: options.stdin === undefined,
    });
  }

  const userShape = {
    id: expect.any(Number),
    username: expect.any(String),
    email: expect.any(String),
    full_name: expect.any(String),
    is_active: expect.any(Boolean),
    roles: expect.any(Array),
    created_at: expect.stringMatching(/Z$/),
  };

  function jsonLines(text: string): unknown[] {
    return text
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as unknown);
  }

  describe('--json on every users command', () => {
    it('prints exact JSON on stdout and nothing else, on a terminal too', async () => {
      const created = await users(['create', '--username', 'ann', '--email', 'ann@example.com', '--password', 'correct-horse']);
      expect([created.code, created.stderr]).toEqual([0, '']);
      expect(JSON.parse(created.stdout)).toEqual({ ...userShape, id: 1, username: 'ann' });

      const got = await users(['get', '1']);
      expect([got.code, got.stderr, JSON.parse(got.stdout)]).toEqual([0, '', { ...userShape, id: 1 }]);

      const updated = await users(['update', '1', '--full-name', 'Ann A']);
      expect([updated.code, updated.stderr]).toEqual([0, '']);
      expect(JSON.parse(updated.stdout)).toMatchObject({ full_name: 'Ann A' });

      const listed = await users(['list']);
      expect([listed.code, listed.stderr]).toEqual([0, '']);
      expect(JSON.parse(listed.stdout)).toEqual([{ ...userShape, full_name: 'Ann A' }]);

      const bulk = await users(['bulk-create', '-'], { stdin: '{"username":"ben","email":"ben@example.com","password":"correct-horse"}\n' });
      expect([bulk.code, bulk.stderr, JSON.parse(bulk.stdout)]).toEqual([0, '', { created: 1, failed: 0, failures: [] }]);

      const sync = await users(['sync', '-'], { stdin: '{"ref":"x","delete":2}\n' });
      expect([sync.code, sync.stderr]).toEqual([0, '']);
      expect(jsonLines(sync.stdout)).toEqual([{ ref: 'x', line: 1, op: 'delete', ok: true, user: { ...userShape, id: 2, username: 'ben' } }]);

      const watch = runLive(cli.sb, ['users', 'watch', '--count', '1', '--json'], cli.server.env, { tty: true });
      await waitFor(() => cli.server.running.users.watcherCount() === 1, 'the watcher');
      const other = await users(['create', '--username', 'cid', '--email', 'cid@example.com', '--password', 'correct-horse']);
      expect(other.code).toBe(0);
      expect(await watch.done).toBe(0);
      expect(jsonLines(watch.stdout.text)).toEqual([
        { sequence: expect.any(Number), type: 'CREATED', user: { ...userShape, username: 'cid' }, timestamp: expect.stringMatching(/Z$/) },
      ]);
      expect(watch.stderr.text).toBe('');

      const deleted = await users(['delete', '1']);
      expect([deleted.code, deleted.stderr, JSON.parse(deleted.stdout)]).toEqual([0, '', { id: 1, deleted: true }]);

      const chat = runLive(cli.sb, ['users', 'chat', '--room', 'r', '--json'], cli.server.env, { tty: true });
      await waitFor(() => cli.server.running.users.chatParticipantCount() === 1, 'the chat to join');
      const raw = rawClient(cli.server.address);
      try {
        const metadata = new (await import('@grpc/grpc-js')).Metadata();
        metadata.set('authorization', `Bearer ${cli.server.token}`);
        const stream = (raw.UserChat as (md: unknown) => { write(m: object): void; on(e: string, f: () => void): void; cancel(): void })(metadata);
        stream.on('error', () => {});
        stream.write({ room: 'r', sender: 'bot', text: 'hi' });
        await waitFor(() => chat.stdout.text.includes('hi'), 'the message');
        stream.cancel();
      } finally {
        raw.close();
      }
      chat.stdin.end();
      expect(await chat.done).toBe(0);
      expect(jsonLines(chat.stdout.text)).toEqual([{ room: 'r', sender: 'bot', text: 'hi', sent_at: expect.stringMatching(/Z$/) }]);
      expect(chat.stderr.text).toBe('');
    });

    it('reports each failure as one JSON object on stderr', async () => {
      const failures: [string[], string | undefined, number][] = [
        [['create', '--username', 'x', '--email', 'x@example.com', '--password', 'correct-horse'], undefined, 1],
        [['get', '9'], undefined, 1],
        [['update', '9', '--full-name', 'N'], undefined, 1],
        [['delete', 'nine'], undefined, 2],
        [['list', '--page', '0'], undefined, 2],
        [['watch', '--types', 'renamed'], undefined, 2],
        [['bulk-create', '-'], '{"username":"x"}\n', 1],
        [['sync', '-'], '{"ref":"a","delete":9}\n', 1],
        [['chat', '--room', ' '], 'hi\n', 2],
      ];
      for (const [argv, stdin, code] of failures) {
        const result = await users(argv, { stdin });
        expect(result.code, `${argv.join(' ')}: ${result.stderr}`).toBe(code);
        const lines = result.stderr.trimEnd().split('\n');
        expect(lines, argv.join(' ')).toHaveLength(1);
        expect(JSON.parse(lines[0]!), argv.join(' ')).toEqual({
          error: {
            code: expect.any(String),
            exitCode: code,
            message: expect.any(String),
            ...(JSON.parse(lines[0]!).error.hint ? { hint: expect.any(String) } : {}),
          },
        });
      }
    });
  });
});
