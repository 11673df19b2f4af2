/**
 * A PostgreSQL the CLI cannot use is named with its cause, in words, with
 * the exit code of that cause (README "Exit codes"): credentials rejected 4,
 * a database that does not exist 2, unreachable / TLS / no slot 5. Never
 * "unexpected failure ... this is a bug", never a bare SQLSTATE, never the
 * URL's password.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { Sandbox, plain } from '../helpers/cli.js';
import { launch } from '../helpers/launcher.js';
import { serverUrl } from '../helpers/postgres.js';
import { postgresError } from '../../src/store/postgres-sql.js';
import { StoreUnavailableError } from '../../src/store/sql.js';

let sb: Sandbox;
const secret = 'not-the-password-42';

beforeAll(() => {
  sb = new Sandbox();
});
afterAll(() => sb.dispose());

function withPassword(url: string, password: string, database = 'postgres'): string {
  const parsed = new URL(url);
  parsed.password = password;
  parsed.pathname = `/${database}`;
  return parsed.href;
}

describe('PostgreSQL mistakes in the CLI', () => {
  const cases: [string, () => string, number, string[]][] = [
    [
      'a wrong password',
      () => withPassword(serverUrl(), secret),
      4,
      ['refused the password', 'password authentication failed for user "postgres"', 'check the user and password'],
    ],
    [
      'a database that does not exist',
      () => withPassword(serverUrl(), new URL(serverUrl()).password, 'no_such_db'),
      2,
      ['does not exist', 'database "no_such_db" does not exist', 'createdb'],
    ],
    [
      'a port where nothing listens',
      () => `postgres://app:${secret}@127.0.0.1:1/miniapp`,
      5,
      ['cannot reach the database at postgres://app:***@127.0.0.1:1/miniapp', 'the connection was refused'],
    ],
    [
      'sslmode=require against a server without TLS',
      () => `${withPassword(serverUrl(), new URL(serverUrl()).password)}?sslmode=require`,
      5,
      ['the TLS connection to the database', 'does not support SSL', 'sslmode'],
    ],
  ];
  for (const [what, url, code, words] of cases) {
    it(`names ${what} in db status, with exit ${code}`, async () => {
      const result = await sb.run(['db', 'status', '--database', url()]);
      const text = plain(result.stderr);
      expect(result.code, text).toBe(code);
      for (const word of words) expect(text).toContain(word);
      expect(text).not.toContain('this is a bug');
      expect(text).not.toContain('unexpected failure');
      expect(text).not.toContain(secret);
      expect(result.stdout).toBe('');
    });
  }

  for (const [what, url, code, words] of cases) {
    it(`names ${what} in serve --database (the real launcher), with exit ${code}, before it listens`, () => {
      const result = launch(sb.root, ['serve', '--port', '0', '--grpc-port', '0', '--database', url()]);
      const text = plain(result.stderr);
      expect(result.code, text).toBe(code);
      for (const word of words) expect(text).toContain(word);
      expect(text).not.toContain('this is a bug');
      expect(text).not.toContain(secret);
      expect(result.stdout).not.toContain('listening');
    });
  }

  it('says the same for serve --database, before it listens', async () => {
    const result = await sb.run(['serve', '--port', '0', '--no-grpc', '--database', withPassword(serverUrl(), secret)], {
      shutdown: Promise.resolve('SIGTERM'),
    });
    expect(result.code).toBe(4);
    expect(plain(result.stderr)).toContain('password authentication failed');
    expect(result.stderr).not.toContain(secret);
  });

  it('gives a JSON error with the cause under --json', async () => {
    const result = await sb.run(['db', 'status', '--json', '--database', withPassword(serverUrl(), secret)]);
    expect(result.code).toBe(4);
    expect(JSON.parse(result.stderr)).toMatchObject({
      error: { code: 'DATABASE_AUTH', exitCode: 4, message: expect.stringContaining('refused the password') },
    });
  });

  it('puts words to the server states that mean "not now", never a bare SQLSTATE', async () => {
    const client = new pg.Client({ connectionString: serverUrl() });
    await client.connect();
    try {
      // A real error answer of the server, with its code changed to each state of interest.
      const real = await client.query('SELECT 1/0').catch((error: unknown) => error as pg.DatabaseError);
      for (const [code, words] of [
        ['57P03', 'starting up'],
        ['57P01', 'shutting down'],
        ['53300', 'no connection slot left'],
        ['08006', 'connection to the database failed'],
        ['57014', 'statement_timeout'],
      ] as const) {
        const mapped = postgresError(Object.assign(Object.create(Object.getPrototypeOf(real)), real, { code })) as Error;
        expect(mapped, code).toBeInstanceOf(StoreUnavailableError);
        expect(mapped.message).toContain(words);
        expect(mapped.message).not.toMatch(/^\(?[0-9A-Z]{5}\)?$/);
      }
    } finally {
      await client.end();
    }
  });
});
