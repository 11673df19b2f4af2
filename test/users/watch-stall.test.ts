/**
 * Issue 39, item 2: a watcher that reads nothing cannot hold its stream (and
 * its place among the account's 16) for ever. A catch-up (resume_after 0)
 * reads the log only as fast as the client takes it, so it never fills the
 * 1,000 unread that end a live watcher; without a bound on time it held its
 * page and its place as long as the connection lived (HTTP/2 pings are
 * answered by the client's library whatever the application does). Here,
 * with a stall bound of 1 s: raw node:http2 watchers with a 1 KiB window
 * that never read (a catch-up and a live one) are ended RESOURCE_EXHAUSTED
 * naming the resume_after to go on from, and their places freed; a watcher
 * that reads, and one with nothing to send, stay open.
 */
import { afterEach, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { startTestServe } from '../helpers/serve.js';
import { login, newUser, unary, type AnyClient } from '../helpers/user-client.js';
import { userServiceDefinition } from '../../src/users/proto.js';
import { stalledWatch } from '../helpers/stalled-watch.js';

const cleanups: (() => void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  if (!check()) throw new Error(`timed out waiting for ${what}`);
}

describe('a watcher that reads nothing', () => {
  it('is ended RESOURCE_EXHAUSTED once it has taken nothing for the stall bound while changes wait, and its place is freed', async () => {
    const running = await startTestServe({ grpc: { host: '127.0.0.1', port: 0 }, shutdownDeadlineMs: 500, watchStallMs: 1_000 });
    cleanups.push(() => void running.close());
    const { Client } = userServiceDefinition();
    const c = new Client(running.grpc!.address, grpc.credentials.createInsecure()) as AnyClient;
    cleanups.push(() => c.close());
    const admin = new grpc.Metadata();
    admin.set('authorization', `Bearer ${running.adminToken}`);
    const user = (await unary(c, 'CreateUser', newUser('dora'), admin)).user;
    const token = await login(running, 'userdora');
    const update = async (n: number) => {
      for (let i = 0; i < n; i++)
        await unary(c, 'UpdateUser', { user_id: user.id, user: { full_name: `Dora ${i}` }, update_mask: { paths: ['full_name'] } }, admin);
    };
    await update(100);

    // WatchUserRequest { resume_after: 0 } (field 3, varint) and {} (from now on).
    const catchingUp = stalledWatch(cleanups, running.grpc!.address, token, Buffer.from([0x18, 0x00]));
    const live = stalledWatch(cleanups, running.grpc!.address, token, Buffer.alloc(0));
    const auth = new grpc.Metadata();
    auth.set('authorization', `Bearer ${token}`);
    const reading = c.WatchUserChanges({ user_id: '0', types: [] }, auth) as grpc.ClientReadableStream<any>;
    const read: any[] = [];
    reading.on('data', (event) => read.push(event)).on('error', () => undefined);
    await Promise.all([catchingUp.answered, live.answered]);
    await until(() => running.users!.openWatches() === 3, 'the three watches');
    await update(100);

    // The two that read nothing go, after the bound; the one that reads stays.
    await until(() => running.users!.openWatches() === 1, 'the stalled watches to be ended');
    for (const watch of [catchingUp, live]) {
      const ended = await watch.resume(5_000);
      expect(ended.status).toBe(String(grpc.status.RESOURCE_EXHAUSTED));
      expect(ended.details).toMatch(
        /^nothing was read for 1 s while changes waited: a watcher that does not read is disconnected; watch again with resume_after \d+ to go on from there$/,
      );
    }
    await until(() => read.length === 100, 'the reader to have every change');
    // With nothing to send, a quiet watcher is not stalled: it stays past the bound.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(running.users!.openWatches()).toBe(1);
    reading.cancel();
  }, 30_000);
});
