/**
 * `miniapp users create|get|update|delete|list` in-process against a real
 * `miniapp serve` gRPC user service on 127.0.0.1, and the exit codes of
 * the failures: 4 UNAUTHENTICATED, 5 UNAVAILABLE / DEADLINE_EXCEEDED,
 * 1 any other status with its name, 2 usage.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createServer } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { plain } from '../../helpers/cli.js';
import { makePki, type Pki } from '../../helpers/certs.js';
import { userServiceDefinition } from '../../../src/users/proto.js';
import { startTestServe } from '../../helpers/serve.js';
import { useUsersCli } from './harness.js';
import { BACKENDS } from '../../helpers/postgres.js';

describe.each(BACKENDS)('on %s', (backend) => {
  const cli = useUsersCli(backend);

  const users = cli.users;

  async function create(name: string, extra: string[] = []): Promise<{ id: number }> {
    const result = await users(['create', '--username', name, '--email', `${name}@example.com`, '--password', 'correct-horse', ...extra, '--json']);
    expect(result.code, result.stderr).toBe(0);
    return JSON.parse(result.stdout) as { id: number };
  }

  /** A TCP port on 127.0.0.1 that nothing listens on. */
  async function closedPort(): Promise<number> {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as { port: number };
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    return port;
  }

  describe('create, get, update, delete', () => {
    it('creates a user and prints it as JSON with created_at in ISO 8601', async () => {
      const result = await users([
        'create',
        '--username',
        'alice',
        '--email',
        'alice@example.com',
        '--password',
        'correct-horse',
        '--full-name',
        'Alice A',
        '--json',
      ]);
      expect(result.code, result.stderr).toBe(0);
      const user = JSON.parse(result.stdout);
      expect(user).toEqual({
        id: 1,
        username: 'alice',
        email: 'alice@example.com',
        full_name: 'Alice A',
        is_active: true,
        roles: [],
        created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      });
      expect(cli.server.running.users!.watcherCount()).toBe(0);
    });

    it('takes the password from stdin with --password -, and needs no token', async () => {
      const result = await users(['create', '--username', 'bob', '--email', 'bob@example.com', '--password', '-'], {
        env: { MINIAPP_GRPC_TOKEN: '' },
        stdin: 'from-stdin-pw\n',
      });
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toContain('username\tbob');
      expect(result.stdout).not.toContain('from-stdin-pw');
      // The password from stdin is the one stored: a short one is refused by the server.
      const short = await users(['create', '--username', 'bobby', '--email', 'bobby@example.com', '--password', '-'], { stdin: 'short\n' });
      expect(short.code).toBe(1);
      expect(short.stderr).toContain('INVALID_ARGUMENT: password must be at least 8 characters');
    });

    it('--password - with stdin on a terminal is a usage error', async () => {
      const result = await users(['create', '--username', 'carol', '--email', 'carol@example.com', '--password', '-']);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('stdin is a terminal');
    });

    it('gets a user as field/value rows when piped and as a table on a TTY', async () => {
      const { id } = await create('dave', ['--full-name', 'Dave D']);
      const piped = await users(['get', String(id)]);
      expect(piped.code, piped.stderr).toBe(0);
      expect(piped.stdout.split('\n')).toEqual(
        expect.arrayContaining(['id\t1', 'username\tdave', 'email\tdave@example.com', 'full_name\tDave D', 'active\ttrue', 'roles\t']),
      );
      expect(piped.stdout).toMatch(/created_at\t\d{4}-\d\d-\d\dT/);

      const tty = await users(['get', String(id)], { tty: true });
      expect(tty.code).toBe(0);
      const text = plain(tty.stdout);
      expect(text).toMatch(/┌/);
      expect(text).toMatch(/│ username +│ dave +│/);
      expect(text).toMatch(/│ full_name +│ Dave D +│/);
    });

    it('updates exactly the fields given: --full-name alone leaves the e-mail; --active false and --roles', async () => {
      const { id } = await create('erin', ['--full-name', 'Erin E']);
      const rename = await users(['update', String(id), '--full-name', 'Erin Example', '--json']);
      expect(rename.code, rename.stderr).toBe(0);
      expect(JSON.parse(rename.stdout)).toMatchObject({ full_name: 'Erin Example', email: 'erin@example.com', username: 'erin', is_active: true });

      const deactivate = await users(['update', String(id), '--active', 'false', '--roles', 'editor, viewer', '--json']);
      expect(deactivate.code, deactivate.stderr).toBe(0);
      const got = JSON.parse((await users(['get', String(id), '--json'])).stdout);
      expect(got).toMatchObject({ full_name: 'Erin Example', email: 'erin@example.com', is_active: false, roles: ['editor', 'viewer'] });

      // An empty --full-name is in the mask, so it clears; an empty --roles removes them all.
      const clear = await users(['update', String(id), '--full-name', '', '--roles', '', '--json']);
      expect(JSON.parse(clear.stdout)).toMatchObject({ full_name: '', roles: [], is_active: false, email: 'erin@example.com' });
    });

    it('update without a field flag, or with --active maybe, is a usage error (exit 2)', async () => {
      const { id } = await create('frank');
      const none = await users(['update', String(id)]);
      expect(none.code).toBe(2);
      expect(none.stderr).toContain('nothing to update');
      const maybe = await users(['update', String(id), '--active', 'maybe']);
      expect(maybe.code).toBe(2);
      expect(maybe.stderr).toContain('--active must be true or false');
      const badId = await users(['get', 'abc']);
      expect(badId.code).toBe(2);
    });

    it('deletes a user; getting it again is NOT_FOUND, exit 1 with the status name', async () => {
      const { id } = await create('grace');
      const deleted = await users(['delete', String(id), '--json']);
      expect(deleted.code, deleted.stderr).toBe(0);
      expect(JSON.parse(deleted.stdout)).toEqual({ id, deleted: true });
      const again = await users(['get', String(id)]);
      expect(again.code).toBe(1);
      expect(again.stderr).toContain(`NOT_FOUND: no user with id ${id}`);
      const missing = await users(['delete', '9']);
      expect(missing.code).toBe(1);
      expect(missing.stderr).toContain('NOT_FOUND: no user with id 9');
    });

    it('a duplicate username is ALREADY_EXISTS, exit 1', async () => {
      await create('heidi');
      const result = await users(['create', '--username', 'heidi', '--email', 'other@example.com', '--password', 'correct-horse']);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain('ALREADY_EXISTS: a user with this username already exists');
    });
  });

  describe('list', () => {
    beforeEach(async () => {
      for (const name of ['ann', 'ben', 'cat', 'dan', 'eve']) await create(name);
      await users(['update', '2', '--email', 'ben@other.org']);
    });

    it('lists every user as a JSON array', async () => {
      const result = await users(['list', '--json']);
      expect(result.code, result.stderr).toBe(0);
      const list = JSON.parse(result.stdout) as { id: number; username: string; created_at: string }[];
      expect(list.map((u) => u.username)).toEqual(['ann', 'ben', 'cat', 'dan', 'eve']);
      expect(list[0]!.created_at).toMatch(/Z$/);
    });

    it('filters, and pages with --page and --page-size', async () => {
      const filtered = await users(['list', '--filter', 'EXAMPLE.com', '--json']);
      expect(JSON.parse(filtered.stdout).map((u: { username: string }) => u.username)).toEqual(['ann', 'cat', 'dan', 'eve']);
      const page2 = await users(['list', '--page', '2', '--page-size', '2', '--json']);
      expect(JSON.parse(page2.stdout).map((u: { username: string }) => u.username)).toEqual(['cat', 'dan']);
      const both = await users(['list', '--filter', 'example.com', '--page', '2', '--page-size', '3', '--json']);
      expect(JSON.parse(both.stdout).map((u: { username: string }) => u.username)).toEqual(['eve']);
      const bad = await users(['list', '--page-size', '-1']);
      expect(bad.code).toBe(2);
      // --page alone pages by the default size (30): five users make one page.
      const pageAlone = await users(['list', '--page', '2', '--json']);
      expect(pageAlone.code, pageAlone.stderr).toBe(0);
      expect(JSON.parse(pageAlone.stdout)).toEqual([]);
      const allOnOne = await users(['list', '--page', '2', '--page-size', '0']);
      expect(allOnOne.code).toBe(2);
      expect(allOnOne.stderr).toContain('with --page-size 0 every user is on page 1');
    });

    it('prints tab-separated rows when piped and a table on a TTY', async () => {
      const piped = await users(['list', '--page-size', '2']);
      expect(piped.code).toBe(0);
      const lines = piped.stdout.trimEnd().split('\n');
      expect(lines).toHaveLength(2);
      expect(lines[1]).toMatch(/^2\tben\tben@other\.org\t\ttrue\t\t\d{4}-/);

      const tty = await users(['list'], { tty: true });
      const text = plain(tty.stdout);
      // Nobody here has a full name or roles: the empty columns are left out.
      expect(text.split('\n')[1]).toMatch(/│ id +│ username +│ email +│ active +│ created_at +│/);
      expect(text).toMatch(/│ 5 +│ eve +│ eve@example\.com/);
      expect(plain(tty.stderr)).toContain('5 users');
    });
  });

  describe('failures and exit codes', () => {
    it('exits 4 with a wrong token, with the status name and a hint', async () => {
      const result = await users(['list'], { env: { MINIAPP_GRPC_TOKEN: 'mat_wrong' } });
      expect(result.code).toBe(4);
      expect(result.stderr).toContain('UNAUTHENTICATED: invalid or expired token');
      expect(result.stderr).toContain('grpc-token; or pass --token');
    });

    it('exits 4 with a wrong token from every streaming command too', async () => {
      const env = { MINIAPP_GRPC_TOKEN: 'mat_wrong' };
      for (const [argv, stdin] of [
        [['watch', '--count', '1'], undefined],
        [['bulk-create', '-'], '{"username":"kim","email":"kim@example.com","password":"correct-horse"}\n'],
        [['sync', '-'], '{"ref":"a","delete":1}\n'],
        [['chat', '--room', 'r'], 'hello\n'],
      ] as const) {
        const result = await users([...argv], { env, stdin });
        expect(result.code, `${argv.join(' ')}: ${result.stderr}`).toBe(4);
        expect(result.stderr).toContain('UNAUTHENTICATED');
      }
    });

    it('exits 4 before calling when there is no token at all', async () => {
      const result = await users(['get', '1'], { env: { MINIAPP_GRPC_TOKEN: '' } });
      expect(result.code).toBe(4);
      expect(result.stderr).toContain('no token for the user service');
    });

    it('--token beats MINIAPP_GRPC_TOKEN, and --addr beats MINIAPP_GRPC_ADDR', async () => {
      await create('ivan');
      const port = await closedPort();
      const result = await users(['get', '1', '--token', cli.server.token, '--addr', cli.server.address, '--json'], {
        env: { MINIAPP_GRPC_TOKEN: 'mat_wrong', MINIAPP_GRPC_ADDR: `127.0.0.1:${port}` },
      });
      expect(result.code, result.stderr).toBe(0);
      expect(JSON.parse(result.stdout).username).toBe('ivan');
      const badAddr = await users(['get', '1', '--addr', 'nowhere']);
      expect(badAddr.code).toBe(2);
    });

    it("refuses an empty --token (an unset variable in a script) instead of falling back to the profile's admin token", async () => {
      const created = await create('kurt');
      expect((await cli.sb.run(['config', 'set', 'grpc-token', cli.server.token])).code).toBe(0);
      expect((await cli.sb.run(['config', 'set', 'grpc-addr', cli.server.address])).code).toBe(0);
      for (const token of ['', '  ']) {
        const result = await cli.sb.run(['users', 'delete', String(created.id), '--token', token, '--json']);
        expect(result.code, result.stderr).toBe(2);
        expect(JSON.parse(result.stderr).error.message).toBe('--token is empty');
        expect(result.stdout).toBe('');
      }
      const still = await cli.sb.run(['users', 'get', String(created.id), '--json']);
      expect(still.code, still.stderr).toBe(0);
      expect(JSON.parse(still.stdout).username).toBe('kurt');
    });

    it('reads the token and the address from the profile', async () => {
      await create('judy');
      const configured = await cli.sb.run(['config', 'set', 'grpc-token', cli.server.token]);
      expect(configured.code, configured.stderr).toBe(0);
      expect((await cli.sb.run(['config', 'set', 'grpc-addr', cli.server.address])).code).toBe(0);
      const result = await cli.sb.run(['users', 'get', '1', '--json']);
      expect(result.code, result.stderr).toBe(0);
      expect(JSON.parse(result.stdout).username).toBe('judy');
    });

    it('exits 5 against a closed port, for unary calls and for streams', async () => {
      const port = await closedPort();
      const env = { MINIAPP_GRPC_ADDR: `127.0.0.1:${port}` };
      const get = await users(['get', '1'], { env });
      expect(get.code).toBe(5);
      expect(get.stderr).toContain(`UNAVAILABLE: cannot reach the user service at 127.0.0.1:${port}`);
      expect(get.stderr).toContain('is `miniapp serve` running? check --addr/grpc-addr');
      const watch = await users(['watch', '--count', '1'], { env });
      expect(watch.code).toBe(5);
      expect(watch.stderr).toContain('UNAVAILABLE');
      const bulk = await users(['bulk-create', '-'], { env, stdin: '{"username":"x"}\n' });
      expect(bulk.code).toBe(5);
    });

    it('exits 5 with DEADLINE_EXCEEDED when the server does not answer within --deadline', async () => {
      // A server of the same proto whose GetUser never answers.
      const hanging = new grpc.Server();
      const held: grpc.sendUnaryData<unknown>[] = [];
      hanging.addService(userServiceDefinition().service, { GetUser: (_call: unknown, callback: grpc.sendUnaryData<unknown>) => void held.push(callback) });
      const port = await new Promise<number>((resolve, reject) =>
        hanging.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
      );
      try {
        const started = Date.now();
        const result = await users(['get', '1', '--deadline', '300ms'], { env: { MINIAPP_GRPC_ADDR: `127.0.0.1:${port}` } });
        expect(result.code).toBe(5);
        expect(result.stderr).toContain(`DEADLINE_EXCEEDED: no answer from the user service at 127.0.0.1:${port} within 300ms`);
        expect(held).toHaveLength(1);
        expect(Date.now() - started).toBeLessThan(5_000);
      } finally {
        hanging.forceShutdown();
      }
    });
  });

  describe('TLS', () => {
    let pki: Pki;
    beforeEach(() => {
      pki = makePki();
    });
    afterEach(() => pki.dispose());

    it('connects with --tls --ca FILE (and with the CA as PEM text); without TLS it is UNAVAILABLE', async () => {
      const tls = await startTestServe({
        grpc: { host: '127.0.0.1', port: 0, tls: { cert: pki.read(pki.serverCert), key: pki.read(pki.serverKey) } },
      });
      try {
        const env = { MINIAPP_GRPC_ADDR: tls.grpc!.address, MINIAPP_GRPC_TOKEN: tls.adminToken! };
        const created = await cli.sb.run(
          ['users', 'create', '--username', 'tina', '--email', 'tina@example.com', '--password', 'correct-horse', '--ca', pki.caCert, '--json'],
          { env },
        );
        expect(created.code, created.stderr).toBe(0);
        const caFile = join(cli.sb.root, 'ca.pem');
        writeFileSync(caFile, pki.read(pki.caCert));
        const listed = await cli.sb.run(['users', 'list', '--tls', '--ca', pki.read(pki.caCert), '--json'], { env });
        expect(listed.code, listed.stderr).toBe(0);
        expect(JSON.parse(listed.stdout)).toHaveLength(1);
        const viaSetting = await cli.sb.run(['users', 'get', '1', '--json'], { env: { ...env, MINIAPP_GRPC_CA: caFile } });
        expect(viaSetting.code, viaSetting.stderr).toBe(0);
        const plaintext = await cli.sb.run(['users', 'list'], { env });
        expect(plaintext.code).toBe(5);
        expect(plaintext.stderr).toContain('if it serves TLS, add --tls');
      } finally {
        await tls.close();
      }
    });
  });
});
