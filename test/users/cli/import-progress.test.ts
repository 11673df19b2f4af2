/**
 * `miniapp users bulk-create` and `users sync` against a real `miniapp
 * serve`: on a terminal a progress line that counts the server's answers
 * (not the rows sent ahead of them) of the file's total, with created (or
 * applied) and failed, and each failure as it comes; failures reported at
 * the file's own lines; and an older server without ImportUsers still
 * served, through BulkCreateUsers, with a warning.
 */
import { describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { plain } from '../../helpers/cli.js';
import { userServiceDefinition } from '../../../src/users/proto.js';
import { useUsersCli } from './harness.js';
import { BACKENDS } from '../../helpers/postgres.js';

describe.each(BACKENDS)('on %s', (backend) => {
  const cli = useUsersCli(backend);

  const users = cli.users;

  const good = (name: string) => JSON.stringify({ username: name, email: `${name}@example.com`, password: 'correct-horse' });

  /** The frames a progress line drew on stderr (each starts by clearing the line), colours removed. */
  function frames(stderr: string, label: string): string[] {
    return plain(stderr)
      .split('\r\x1b[2K')
      .map((frame) => frame.split('\n')[0]!)
      .filter((frame) => frame.startsWith(label));
  }

  describe('bulk-create progress on a terminal', () => {
    it('counts answered rows of the file total, with created and failed, and shows each failure as it comes', async () => {
      const lines = Array.from({ length: 300 }, (_, i) => good(`user${i}`));
      lines[10] = '{"username": ';
      lines[200] = JSON.stringify({ username: 'shorty', email: 'shorty@example.com', password: 'short' });
      const file = join(cli.sb.root, 'users.jsonl');
      writeFileSync(file, `${lines.join('\n')}\n`);
      const result = await users(['bulk-create', file], { tty: true });
      expect(result.code, result.stderr).toBe(1);

      const drawn = frames(result.stderr, 'importing users.jsonl · ');
      expect(drawn.length).toBeGreaterThan(0);
      for (const frame of drawn) {
        const match = /^importing users\.jsonl · rows ([\d,]+)\/300 \(\d+%\) · created ([\d,]+) · failed (\d+)( · |$)/.exec(frame);
        expect(match, frame).not.toBeNull();
        const [answered, created, failed] = [match![1], match![2], match![3]].map((n) => Number(n!.replace(/,/g, '')));
        // Rows counted are rows answered: what the server created or refused, and what was never sent.
        expect(answered, frame).toBe(created! + failed!);
      }
      expect(result.stderr).not.toMatch(/sent \d+ users?/);
      // Each failure as it comes, above the progress line; then the summary and the table on stdout.
      expect(plain(result.stderr)).toContain('line 11: INVALID_ARGUMENT: not sent: not valid JSON');
      expect(plain(result.stderr)).toContain('line 201: INVALID_ARGUMENT: password must be at least 8 characters');
      expect(plain(result.stdout)).toContain('created 298, failed 2');
      expect(plain(result.stderr)).toContain('error: 2 of 300 users were not created');
    }, 60_000);

    it('reads stdin without a total; piped or with --json it draws no progress line', async () => {
      const tty = await users(['bulk-create', '-'], { tty: true, stdin: `${good('ann')}\n${good('ben')}\n` });
      expect(tty.code, tty.stderr).toBe(0);
      const drawn = frames(tty.stderr, 'importing stdin · ');
      expect(drawn.length).toBeGreaterThan(0);
      for (const frame of drawn) expect(frame).toMatch(/^importing stdin · rows \d · created \d · failed 0/);

      const piped = await users(['bulk-create', '-'], { stdin: `${good('cid')}\n` });
      expect(piped.code, piped.stderr).toBe(0);
      expect(piped.stderr).toBe('created 1, failed 0\n');
      const json = await users(['bulk-create', '-', '--json'], { tty: true, stdin: `${good('dot')}\n` });
      expect(json.code, json.stderr).toBe(0);
      expect(json.stderr).toBe('');
      expect(JSON.parse(json.stdout)).toEqual({ created: 1, failed: 0, failures: [] });
    });
  });

  describe('bulk-create line numbers', () => {
    it('blames the line of a CSV row whose quote is never closed, not the line before', async () => {
      const file = join(cli.sb.root, 's.csv');
      writeFileSync(file, 'username,email,password\nsmall1,small1@example.com,password-1\nbroken,"unterminated\n');
      const result = await users(['bulk-create', file, '--json']);
      expect(result.code).toBe(1);
      expect(JSON.parse(result.stdout)).toEqual({
        created: 1,
        failed: 1,
        failures: [
          { line: 3, index: null, status: 'INVALID_ARGUMENT', message: 'not sent: the quote opened on line 3 is not closed before the end of the input' },
        ],
      });
      const table = await users(['bulk-create', '-'], { stdin: 'username,email,password\nbroken2,"unterminated\n' });
      expect(table.stdout).toBe('2\t\tINVALID_ARGUMENT\tnot sent: the quote opened on line 2 is not closed before the end of the input\n');
    });

    it('gives each CSV row the line it starts on, after quoted fields that span lines and CRLF line ends', async () => {
      const csv =
        'username,email,password,full_name\r\n' +
        'amy,amy@example.com,correct-horse,"three\r\nline\r\nname"\r\n' +
        '\r\n' +
        'bea,bea@example.com,short,"B"\r\n' +
        'cid,cid@example.com\r\n' +
        '"d""an",dan@example.com,correct-horse,D\r\n' +
        'eve,eve@example.com,correct-horse,"x"y\r\n' +
        'amy,other@example.com,correct-horse,again\r\n';
      const result = await users(['bulk-create', '-', '--json'], { stdin: csv });
      expect(result.code).toBe(1);
      const report = JSON.parse(result.stdout);
      expect(report.created).toBe(1);
      expect(report.failures.map((f: { line: number; index: number | null; status: string }) => [f.line, f.index, f.status])).toEqual([
        [6, 1, 'INVALID_ARGUMENT'],
        [7, null, 'INVALID_ARGUMENT'],
        [8, 2, 'INVALID_ARGUMENT'],
        [9, null, 'INVALID_ARGUMENT'],
        [10, 3, 'ALREADY_EXISTS'],
      ]);
    });

    it('gives each JSON line its own number, past blank lines and CRLF', async () => {
      const input = ['', good('ann'), '', '   ', JSON.stringify({ username: 'ann', email: 'x@example.com', password: 'correct-horse' }), 'nope'].join('\r\n');
      const result = await users(['bulk-create', '-', '--json'], { stdin: input });
      expect(JSON.parse(result.stdout).failures.map((f: { line: number }) => f.line)).toEqual([5, 6]);
    });
  });

  describe('bulk-create against a server without ImportUsers', () => {
    it('says so and sends the rows with BulkCreateUsers, reporting failures at their lines', async () => {
      // An older server: the same BulkCreateUsers (the real implementation), and no ImportUsers.
      const older = new grpc.Server();
      older.addService(userServiceDefinition().service, { BulkCreateUsers: cli.server.running.users.handlers().BulkCreateUsers! });
      const port = await new Promise<number>((resolve, reject) =>
        older.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
      );
      try {
        const rows = [
          good('ann'),
          good('ben'),
          'not json',
          JSON.stringify({ username: 'ann', email: 'ann2@example.com', password: 'correct-horse' }),
          good('cid'),
        ];
        const result = await users(['bulk-create', '-', '--json'], { env: { MINIAPP_GRPC_ADDR: `127.0.0.1:${port}` }, stdin: rows.join('\n') });
        expect(result.code).toBe(1);
        expect(plain(result.stderr)).toContain('warning: the server has no ImportUsers (an older miniapp serve): sending with BulkCreateUsers');
        expect(JSON.parse(result.stdout)).toEqual({
          created: 3,
          failed: 2,
          failures: [
            { line: 3, index: null, status: 'INVALID_ARGUMENT', message: 'not sent: not valid JSON' },
            { line: 4, index: 2, status: 'ALREADY_EXISTS', message: 'a user with this username already exists' },
          ],
        });
        const listed = await users(['list', '--json']);
        expect(JSON.parse(listed.stdout).map((u: { username: string }) => u.username)).toEqual(['ann', 'ben', 'cid']);
      } finally {
        older.forceShutdown();
      }
    });
  });

  describe('sync progress on a terminal', () => {
    it('counts answered requests of the file total, with applied and failed, and shows each failure as it comes', async () => {
      const lines = Array.from({ length: 60 }, (_, i) =>
        JSON.stringify({ ref: `r${i}`, upsert: { username: `sam${i}`, email: `sam${i}@example.com`, password: 'correct-horse' } }),
      );
      lines.push(JSON.stringify({ ref: 'gone', delete: 999 }), '{"ref":"bad","upsert":{"username":5}}');
      const file = join(cli.sb.root, 'changes.jsonl');
      writeFileSync(file, `${lines.join('\n')}\n`);
      const result = await users(['sync', file], { tty: true });
      expect(result.code).toBe(1);
      const drawn = frames(result.stderr, 'syncing changes.jsonl · ');
      expect(drawn.length).toBeGreaterThan(0);
      for (const frame of drawn) {
        const match = /^syncing changes\.jsonl · requests (\d+)\/62 \(\d+%\) · applied (\d+) · failed (\d+)/.exec(frame);
        expect(match, frame).not.toBeNull();
        expect(Number(match![1])).toBe(Number(match![2]) + Number(match![3]));
      }
      expect(plain(result.stderr)).toContain('line 61 (gone): NOT_FOUND: no user with id 999');
      expect(plain(result.stderr)).toContain('line 62 (bad): INVALID_ARGUMENT: not sent: upsert.username must be a string');
      expect(plain(result.stdout)).toMatch(/│ r59 +│ create +│ ok +│ 60 +│ sam59 +│ OK +│/);
    });
  });
});
