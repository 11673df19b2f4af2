/**
 * A PostgreSQL with no connection slot left for serve's user: calls are
 * refused with 503 + Retry-After and gRPC UNAVAILABLE, never 500 /
 * INTERNAL; serve says at start-up when the pools of its instances add up
 * past what the server allows; the CLI names the cause, with the exit code
 * of a network-class failure (5). The scarcity is made exact with a role
 * whose CONNECTION LIMIT is reached by connections the test holds itself.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import * as grpc from '@grpc/grpc-js';
import { request } from 'undici';
import { createTestDatabase, serverUrl, type TestDatabase } from '../helpers/postgres.js';
import { startTestServe } from '../helpers/serve.js';
import { UserClients } from '../helpers/user-client.js';
import { Sandbox } from '../helpers/cli.js';
import type { RunningServe } from '../../src/server/serve.js';

// The first instance needs 3 (a pool of 2, one for signals), the second 4: 7 in all, one more than the role may have, while
// either starts alone in what is left.
const LIMIT = 6;
let database: TestDatabase;
let role: string;
let limitedUrl: string;
let admin: pg.Client;
const held: pg.Client[] = [];
let running: RunningServe;
let clients: UserClients;

beforeAll(async () => {
  database = await createTestDatabase();
  admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  role = `limited_${Math.random().toString(36).slice(2, 8)}`;
  await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'limited-pw' CONNECTION LIMIT ${LIMIT}`);
  const name = new URL(database.url).pathname.slice(1);
  await admin.query(`ALTER DATABASE ${name} OWNER TO ${role}`);
  const url = new URL(database.url);
  url.username = role;
  url.password = 'limited-pw';
  limitedUrl = url.href;
  // Pool of 2 plus one connection for signals: 3 of the role's 6.
  running = await startTestServe({
    store: { kind: 'postgres', url: limitedUrl, poolSize: 2, timeoutMs: 2_000 },
    grpc: { host: '127.0.0.1', port: 0 },
    shutdownDeadlineMs: 500,
  });
  clients = new UserClients(running);
});

afterAll(async () => {
  for (const client of held) await client.end().catch(() => undefined);
  await running?.close();
  await database?.drop();
  await admin?.query(`DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
  await admin?.end();
});

/** Connections of the role held by the test until no slot is left. */
async function exhaust(): Promise<void> {
  for (;;) {
    const client = new pg.Client({ connectionString: limitedUrl });
    try {
      await client.connect();
      held.push(client);
    } catch (error) {
      expect((error as { code?: string }).code).toBe('53300');
      return;
    }
  }
}

describe('no connection slot left on PostgreSQL', () => {
  it('says at start-up when the pools of the instances add up past the limit, and not before', async () => {
    expect(running.warnings).toEqual([]);
    const second = await startTestServe({ store: { kind: 'postgres', url: limitedUrl, poolSize: 3, timeoutMs: 2_000 } });
    try {
      expect(second.warnings).toHaveLength(1);
      expect(second.warnings[0]).toContain(`PostgreSQL allows ${LIMIT} connections here`);
      expect(second.warnings[0]).toContain(`the role's CONNECTION LIMIT ${LIMIT}`);
      expect(second.warnings[0]).toContain('2 serve instances (this one included) may open 7');
      expect(second.warnings[0]).toContain('Lower --database-pool');
    } finally {
      await second.close();
    }
  });

  it('answers 503 with Retry-After and UNAVAILABLE, never 500 or INTERNAL, and serves again when slots free up', async () => {
    await exhaust();
    // The pool's idle connections are ended by the server (as an operator's pg_terminate_backend would), and the test
    // takes their slots too: every call now needs a connection that the server refuses. Serve may connect again
    // between the two (its cache lease is renewed twice a second), before the test has taken the last slot: then
    // that connection is ended too, until the test holds every slot serve's pool could use.
    const poolBackends = async () =>
      (
        await admin.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1 AND application_name LIKE 'miniapp serve%' AND application_name NOT LIKE '%(signals)'`,
          [role],
        )
      ).rows[0].n as number;
    for (let round = 0; round === 0 || (await poolBackends()) > 0; round++) {
      expect(round, 'serve kept a pool connection through 20 rounds').toBeLessThan(20);
      await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1 AND application_name LIKE 'miniapp serve%' AND application_name NOT LIKE '%(signals)'`,
        [role],
      );
      for (let i = 0; i < 200 && (await poolBackends()) > 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      await exhaust();
    }
    const client = clients.client();
    const calls = await Promise.all([
      ...Array.from({ length: 20 }, () =>
        request(`${running.url}/api/v2/blog/posts`).then(async (r) => ({ status: r.statusCode, retry: r.headers['retry-after'], body: await r.body.text() })),
      ),
      ...Array.from({ length: 10 }, (_, i) =>
        request(`${running.url}/api/v2/users`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ username: `slot${i}`, email: `slot${i}@example.com`, password: 'password-1' }),
        }).then(async (r) => ({ status: r.statusCode, retry: r.headers['retry-after'], body: await r.body.text() })),
      ),
    ]);
    const grpcCodes = await Promise.all(
      Array.from(
        { length: 10 },
        () =>
          new Promise<string>((resolve) =>
            client.GetUser({ user_id: '1' }, clients.auth(), (e: grpc.ServiceError | null) => resolve(e ? grpc.status[e.code]! : 'OK')),
          ),
      ),
    );
    for (const call of calls) expect([200, 201, 503], call.body).toContain(call.status);
    const refused = calls.filter((call) => call.status === 503);
    expect(refused.length).toBeGreaterThan(0);
    for (const call of refused) {
      expect(call.retry).toBeDefined();
      expect(JSON.parse(call.body)).toMatchObject({ code: 'SERVICE_UNAVAILABLE' });
    }
    for (const code of grpcCodes) expect(['OK', 'NOT_FOUND', 'UNAVAILABLE']).toContain(code);
    expect(grpcCodes).toContain('UNAVAILABLE');

    // The CLI names the cause, with the exit code of a network-class failure.
    const sb = new Sandbox();
    try {
      const status = await sb.run(['db', 'status', '--database', limitedUrl]);
      expect(status.code).toBe(5);
      expect(status.stderr).toContain('has no connection slot left');
      expect(status.stderr).toContain(`too many connections for role "${role}"`);
      expect(status.stderr).toContain('lower --database-pool');
      expect(status.stderr).not.toContain('limited-pw');
      expect(status.stderr).not.toContain('this is a bug');
    } finally {
      sb.dispose();
    }

    for (const connection of held.splice(0)) await connection.end();
    const after = await Promise.all(
      Array.from({ length: 10 }, () =>
        request(`${running.url}/api/v2/blog/posts`).then(async (r) => {
          await r.body.dump();
          return r.statusCode;
        }),
      ),
    );
    expect(after).toEqual(Array(10).fill(200));
  });
});
