/**
 * `miniapp users list` against a real `miniapp serve` with 45 users: one
 * page on a terminal with the total and how to get the next page; every
 * user when piped, with --json or with --all; a page size the server
 * clamps is said to be clamped.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { plain } from '../../helpers/cli.js';
import { rawClient, rawUnary, useUsersCli } from './harness.js';
import { BACKENDS } from '../../helpers/postgres.js';

describe.each(BACKENDS)('on %s', (backend) => {
  const cli = useUsersCli(backend);
  beforeEach(async () => {
    const raw = rawClient(cli.server.address);
    try {
      for (let i = 1; i <= 45; i++) {
        await rawUnary(raw, 'CreateUser', {
          username: `user${String(i).padStart(2, '0')}`,
          email: `user${i}@example.com`,
          password: 'correct-horse',
          full_name: '',
        });
      }
    } finally {
      raw.close();
    }
  });
  const users = cli.users;

  /** The usernames of a table printed on a terminal. */
  function tableNames(stdout: string): string[] {
    return [...plain(stdout).matchAll(/│ \d+ +│ (user\d\d) +│/g)].map((match) => match[1]!);
  }

  describe('users list paging', () => {
    it('shows one page on a terminal, with the total and the way to the next page', async () => {
      const first = await users(['list'], { tty: true });
      expect(first.code, first.stderr).toBe(0);
      expect(tableNames(first.stdout)).toEqual(Array.from({ length: 30 }, (_, i) => `user${String(i + 1).padStart(2, '0')}`));
      // The way to the next page is the exact command that shows it: on a line of its own, whole, when the footer is wider than the terminal.
      expect(plain(first.stderr)).toMatch(/next page:\n {2}miniapp users list --page-token [\w-]{28}\n$/);
      const footer = plain(first.stderr).trim().replace('\n  ', ' ');
      expect(footer).toMatch(/^1-30 of 45 users \(page 1 of 2\); --all for every user; next page: miniapp users list --page-token [\w-]{28}$/);
      const next = await users(footer.split('next page: miniapp users ')[1]!.split(' '), { tty: true });
      expect(next.code, next.stderr).toBe(0);
      expect(tableNames(next.stdout)).toEqual(Array.from({ length: 15 }, (_, i) => `user${i + 31}`));
      expect(plain(next.stderr).trim()).toBe('15 more of 45 users, the last page; --all for every user');

      const second = await users(['list', '--page', '2'], { tty: true });
      expect(tableNames(second.stdout)).toHaveLength(15);
      expect(tableNames(second.stdout)[0]).toBe('user31');
      expect(plain(second.stderr).trim()).toBe('31-45 of 45 users (page 2 of 2); --all for every user');

      const past = await users(['list', '--page', '3'], { tty: true });
      expect(past.code).toBe(0);
      expect(plain(past.stderr)).toContain('page 3 is past the end: 45 users make 2 pages of 30');
    });

    it('lists every user when piped, with --json, and with --all on a terminal', async () => {
      const piped = await users(['list']);
      expect(piped.code, piped.stderr).toBe(0);
      expect(piped.stdout.trimEnd().split('\n')).toHaveLength(45);
      expect(piped.stderr).toBe('');

      const json = await users(['list', '--json'], { tty: true });
      expect(JSON.parse(json.stdout)).toHaveLength(45);
      expect(json.stderr).toBe('');

      const all = await users(['list', '--all'], { tty: true });
      expect(tableNames(all.stdout)).toHaveLength(45);
      expect(plain(all.stderr).trim()).toBe('45 users');

      const both = await users(['list', '--all', '--page', '2']);
      expect(both.code).toBe(2);
      expect(both.stderr).toContain('--all lists every user: leave out --page and --page-size');
    });

    it('pages by token: the footer repeats the filter, page size and address given, --json carries the next token, and impossible combinations are usage errors', async () => {
      const first = await users(['list', '--filter', 'user1 ', '--page-size', '4', '--addr', cli.server.address], { tty: true });
      expect(first.code, first.stderr).toBe(0);
      // user01's e-mail is user1@example.com.
      expect(tableNames(first.stdout)).toEqual(['user01', 'user10', 'user11', 'user12']);
      const footer = plain(first.stderr).trim().replace('\n  ', ' ');
      const token = /--page-token ([\w-]{28})$/.exec(footer)?.[1];
      expect(footer).toBe(
        `1-4 of 11 users (page 1 of 3); --all for every user; next page: miniapp users list --filter 'user1 ' --page-size 4 --addr ${cli.server.address} --page-token ${token}`,
      );
      const second = await users(['list', '--filter', 'user1 ', '--page-size', '4', '--page-token', token!], { tty: true });
      expect(tableNames(second.stdout)).toEqual(['user13', 'user14', 'user15', 'user16']);
      expect(plain(second.stderr).trim().replace('\n  ', ' ')).toMatch(
        /^4 more of 11 users; --all for every user; next page: miniapp users list --filter 'user1 ' --page-size 4 --page-token [\w-]{28}$/,
      );

      // Scripts start with an empty token and follow next_page_token until it is empty.
      const pages: string[][] = [];
      const tokens: string[] = [];
      for (let next = ''; pages.length === 0 || next; ) {
        const page = await users(['list', '--page-size', '20', '--page-token', next, '--json']);
        expect([page.code, page.stderr]).toEqual([0, '']);
        const body = JSON.parse(page.stdout) as { users: { username: string }[]; next_page_token: string };
        expect(Object.keys(body)).toEqual(['users', 'next_page_token']);
        pages.push(body.users.map((u) => u.username));
        next = body.next_page_token;
        tokens.push(next);
      }
      expect(pages.map((p) => p.length)).toEqual([20, 20, 5]);
      expect(pages.flat()).toEqual(Array.from({ length: 45 }, (_, i) => `user${String(i + 1).padStart(2, '0')}`));
      // Piped with a token: that page's rows, nothing else.
      expect(tokens.at(-1)).toBe('');
      const piped = await users(['list', '--page-size', '20', '--page-token', tokens[0]!]);
      expect([piped.code, piped.stderr]).toEqual([0, '']);
      expect(
        piped.stdout
          .trimEnd()
          .split('\n')
          .map((line) => line.split('\t')[1]),
      ).toEqual(pages[1]);

      for (const [argv, message] of [
        [['list', '--all', '--page-token', token!], '--all lists every user from the first: leave out --page-token'],
        [['list', '--page', '2', '--page-token', token!], '--page and --page-token both say where the page starts: give one of them'],
      ] as const) {
        const refused = await users([...argv]);
        expect(refused.code, argv.join(' ')).toBe(2);
        expect(refused.stderr.split('\n')[0]).toBe(`error: ${message}`);
      }
      // A token of another filter: the server's refusal, with what to do.
      const other = await users(['list', '--page-token', token!]);
      expect(other.code).toBe(1);
      expect(other.stderr).toContain('INVALID_ARGUMENT: page_token belongs to a list with another filter');
    });

    it('says so when the server clamps the page size', async () => {
      const result = await users(['list', '--page-size', '500'], { tty: true });
      expect(result.code, result.stderr).toBe(0);
      expect(plain(result.stderr)).toContain('warning: --page-size 500 is more than the server gives at once: 100 users a page');
      expect(tableNames(result.stdout)).toHaveLength(45);
      expect(plain(result.stderr)).toContain('45 users');

      const piped = await users(['list', '--page-size', '500', '--json']);
      expect(JSON.parse(piped.stdout)).toHaveLength(45);
      expect(plain(piped.stderr)).toContain('warning: --page-size 500 is more than the server gives at once: 100 users a page');

      const pages = await users(['list', '--page-size', '20', '--page', '3', '--json']);
      expect(JSON.parse(pages.stdout).map((u: { username: string }) => u.username)).toEqual(['user41', 'user42', 'user43', 'user44', 'user45']);
    });
  });
});
