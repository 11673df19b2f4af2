/**
 * The additions to the spec's UserService, through a real server (startServe,
 * port 0) and a plain grpc-js client: ImportUsers answers each row as soon
 * as it is stored, with the checks, hashing and admin role of
 * BulkCreateUsers; ListUsers sends the total and the page size applied as
 * initial metadata.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { userServiceDefinition } from '../../src/users/proto.js';
import { waitFor } from './cli/harness.js';
import { login } from '../helpers/user-client.js';
import { BACKENDS } from '../helpers/postgres.js';
import { useBackendStore } from '../helpers/backend-store.js';

describe.each(BACKENDS)('on %s', (backend) => {
  let dataDir: string;
  let running: RunningServe;
  let client: grpc.Client & Record<string, any>;
  const store = useBackendStore(backend, () => ({ kind: 'sqlite', dataDir }));

  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'miniapp-import-'));
    running = await startTestServe({
      store: store.location(),
      grpc: { host: '127.0.0.1', port: 0 },
      shutdownDeadlineMs: 500,
    });
    const { Client } = userServiceDefinition();
    client = new Client(running.grpc!.address, grpc.credentials.createInsecure()) as grpc.Client & Record<string, any>;
  });
  afterEach(async () => {
    client.close();
    await running.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  function auth(token = running.adminToken): grpc.Metadata {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    return metadata;
  }

  const row = (n: number | string, extra: Record<string, string> = {}) => ({
    username: `user${n}`,
    email: `user${n}@example.com`,
    password: 'correct horse',
    full_name: `User ${n}`,
    ...extra,
  });

  interface Answer {
    index: number;
    result: 'user' | 'failure';
    user?: { id: string; username: string } | null;
    failure?: { status: string; message: string } | null;
  }

  /** An ImportUsers call whose answers the test reads one at a time. */
  function importCall(metadata = auth()) {
    const call = client.ImportUsers(metadata) as grpc.ClientDuplexStream<unknown, Answer>;
    const answers: Answer[] = [];
    let failed: grpc.ServiceError | undefined;
    let ended = false;
    const waiters: (() => void)[] = [];
    const wakeAll = () => {
      for (const wake of waiters.splice(0)) wake();
    };
    call.on('data', (answer: Answer) => {
      answers.push(answer);
      wakeAll();
    });
    call.on('error', (error: grpc.ServiceError) => {
      failed = error;
      wakeAll();
    });
    call.on('end', () => {
      ended = true;
      wakeAll();
    });
    const until = async (check: () => boolean) => {
      while (!check() && !failed && !ended) await new Promise<void>((resolve) => waiters.push(resolve));
    };
    return {
      call,
      answers,
      /** Resolves once `count` answers are in (or the call is over). */
      answered: (count: number) => until(() => answers.length >= count),
      /** Resolves with the status when the call is over. */
      finished: async () => {
        await until(() => false);
        return failed ? grpc.status[failed.code] : 'OK';
      },
    };
  }

  function bulkCreate(rows: object[], metadata = auth()): Promise<{ created_count: number; failures: { index: number; status: string; message: string }[] }> {
    return new Promise((resolve, reject) => {
      const call = client.BulkCreateUsers(metadata, (error: grpc.ServiceError | null, response: any) => (error ? reject(error) : resolve(response)));
      for (const r of rows) call.write(r);
      call.end();
    });
  }

  describe('ImportUsers', () => {
    it('answers each row once it is stored, before the client sends the next or closes', async () => {
      const call = importCall();
      for (let i = 0; i < 3; i++) {
        call.call.write(row(i));
        await call.answered(i + 1);
        expect(call.answers[i]).toMatchObject({ index: i, result: 'user', user: { id: String(i + 1), username: `user${i}` } });
      }
      call.call.end();
      expect(await call.finished()).toBe('OK');
      expect(call.answers).toHaveLength(3);
    });

    it('answers in the order of the rows, failures in place, with the statuses and messages of BulkCreateUsers', async () => {
      const rows = [
        row(1),
        row(2, { password: 'short' }),
        row('taken', { email: 'fresh@example.com' }),
        row(3),
        row(1, { email: 'again@example.com' }),
        { username: '', email: '', password: '', full_name: '' },
      ];
      await bulkCreate([row('taken')]);
      const call = importCall();
      for (const r of rows) call.call.write(r);
      call.call.end();
      expect(await call.finished()).toBe('OK');
      expect(call.answers.map((a) => [a.index, a.result])).toEqual([
        [0, 'user'],
        [1, 'failure'],
        [2, 'failure'],
        [3, 'user'],
        [4, 'failure'],
        [5, 'failure'],
      ]);
      // What BulkCreateUsers reports for the same rows (test/users/server.test.ts).
      expect(call.answers.filter((a) => a.result === 'failure').map((a) => ({ index: a.index, ...a.failure }))).toEqual([
        { index: 1, status: 'INVALID_ARGUMENT', message: expect.stringContaining('password') },
        { index: 2, status: 'ALREADY_EXISTS', message: expect.stringContaining('username') },
        { index: 4, status: 'ALREADY_EXISTS', message: expect.stringContaining('username') },
        { index: 5, status: 'INVALID_ARGUMENT', message: expect.stringContaining('username is required') },
      ]);
      expect(call.answers[3]!.user).toMatchObject({ username: 'user3' });
    });

    it('needs the admin role, as BulkCreateUsers does', async () => {
      expect(await importCall(new grpc.Metadata()).finished()).toBe('UNAUTHENTICATED');
      await bulkCreate([row('alice')]);
      const userToken = await login(running, 'useralice');
      const refused = importCall(auth(userToken));
      refused.call.write(row(9));
      expect(await refused.finished()).toBe('PERMISSION_DENIED');
      await expect(bulkCreate([row(9)], auth(userToken))).rejects.toMatchObject({
        code: grpc.status.PERMISSION_DENIED,
        details: 'creating users in bulk needs the admin role',
      });
    });

    it('stores 1,000 rows and tells every watcher', async () => {
      const watch = client.WatchUserChanges({ types: ['CREATED'] }, auth()) as grpc.ClientReadableStream<unknown>;
      let events = 0;
      watch.on('data', () => events++);
      watch.on('error', () => {});
      await waitFor(() => running.users.watcherCount() === 1, 'the watcher');
      const call = importCall();
      for (let i = 0; i < 1000; i++) call.call.write(row(i));
      call.call.end();
      expect(await call.finished()).toBe('OK');
      expect(call.answers.every((a, i) => a.index === i && a.result === 'user')).toBe(true);
      expect(call.answers).toHaveLength(1000);
      await waitFor(() => events === 1000, 'an event per user');
      watch.cancel();
    }, 60_000);
  });

  describe('ListUsers metadata', () => {
    function list(request: object): Promise<{ users: unknown[]; metadata: grpc.Metadata }> {
      return new Promise((resolve, reject) => {
        const call = client.ListUsers(request, auth()) as grpc.ClientReadableStream<unknown>;
        const users: unknown[] = [];
        let metadata: grpc.Metadata | undefined;
        call.on('metadata', (received: grpc.Metadata) => (metadata = received));
        call.on('data', (user) => users.push(user));
        call.on('error', reject);
        call.on('end', () => resolve({ users, metadata: metadata! }));
      });
    }

    it('carries the total of all pages and the page size applied, also for an empty page', async () => {
      await bulkCreate(Array.from({ length: 25 }, (_, i) => row(i, i % 5 === 0 ? { full_name: `Kim ${i}` } : {})));
      const page = await list({ page: 2, page_size: 10 });
      expect(page.users).toHaveLength(10);
      expect(page.metadata.get('x-total-count')).toEqual(['25']);
      expect(page.metadata.get('x-page-size')).toEqual(['10']);
      const clamped = await list({ page: 1, page_size: 500 });
      expect(clamped.metadata.get('x-page-size')).toEqual(['100']);
      const all = await list({});
      expect(all.metadata.get('x-page-size')).toEqual(['0']);
      const filtered = await list({ filter: 'kim', page: 9, page_size: 10 });
      expect(filtered.users).toEqual([]);
      expect(filtered.metadata.get('x-total-count')).toEqual(['5']);
    });
  });
});
