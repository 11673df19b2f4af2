/**
 * Issue 39, items 6 and 7, through serve's gRPC port with grpc-js clients:
 * who sees which fields of whom (README, Authorization), and long streams
 * that follow their token as it is now, on both backends.
 */
import { describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { collect, failure, login, newUser, unary, useUserClients, type AnyClient } from '../helpers/user-client.js';
import { BACKENDS } from '../helpers/postgres.js';

/** The status a stream ends with (rejects when it ends OK), and what it carried before. */
function ending(call: grpc.ClientReadableStream<any> | grpc.ClientDuplexStream<any, any>): {
  items: any[];
  status: Promise<{ code: string; details: string }>;
} {
  const items: any[] = [];
  call.on('data', (item) => items.push(item));
  const status = new Promise<{ code: string; details: string }>((resolve, reject) => {
    call.on('error', (error: grpc.ServiceError) => resolve({ code: grpc.status[error.code]!, details: error.details }));
    call.on('end', () => reject(new Error('the stream ended OK')));
  });
  return { items, status };
}

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  if (!check()) throw new Error(`timed out waiting for ${what}`);
}

const PUBLIC_ONLY = { email: '', is_active: false, roles: [], created_at: null };

describe.each(BACKENDS)('authorization on %s', (backend) => {
  const ctx = useUserClients(backend);

  async function twoUsers(c: AnyClient) {
    const admin = ctx.serve.auth();
    const alice = (await unary(c, 'CreateUser', newUser('alice'), admin)).user;
    const bob = (await unary(c, 'CreateUser', newUser('bob'), admin)).user;
    const aliceToken = await login(ctx.serve.running, 'useralice');
    return { admin, alice, bob, aliceAuth: ctx.serve.auth(aliceToken), aliceToken };
  }

  it('GetUser and ListUsers: a user token sees itself whole and others by id, username and full name only; the admin sees all', async () => {
    const c = ctx.serve.client();
    const { admin, alice, bob, aliceAuth } = await twoUsers(c);
    expect(await unary(c, 'GetUser', { user_id: alice.id }, aliceAuth)).toMatchObject({ id: alice.id, email: 'useralice@example.com', is_active: true });
    expect(await unary(c, 'GetUser', { user_id: bob.id }, aliceAuth)).toEqual({ id: bob.id, username: 'userbob', full_name: 'User bob', ...PUBLIC_ONLY });
    expect(await unary(c, 'GetUser', { user_id: bob.id }, admin)).toMatchObject({ email: 'userbob@example.com', is_active: true });
    const listed = await collect(c.ListUsers({ page: 1, page_size: 10, filter: '' }, aliceAuth));
    expect(listed.find((u) => u.id === bob.id)).toEqual({ id: bob.id, username: 'userbob', full_name: 'User bob', ...PUBLIC_ONLY });
    expect(listed.find((u) => u.id === alice.id).email).toBe('useralice@example.com');
    // The filter is no oracle of others' e-mail: "bob@" matches only in an e-mail address.
    expect(await collect(c.ListUsers({ page: 1, page_size: 10, filter: 'bob@' }, aliceAuth))).toEqual([]);
    expect((await collect(c.ListUsers({ page: 1, page_size: 10, filter: 'bob@' }, admin))).map((u) => u.id)).toEqual([bob.id]);
  });

  it("WatchUserChanges: a user token watches its own changes only; another user's id is PERMISSION_DENIED", async () => {
    const c = ctx.serve.client();
    const { admin, alice, bob, aliceAuth } = await twoUsers(c);
    expect((await ending(c.WatchUserChanges({ user_id: bob.id, types: [] }, aliceAuth)).status).code).toBe('PERMISSION_DENIED');
    const watch = ending(c.WatchUserChanges({ user_id: '0', types: [] }, aliceAuth));
    await until(() => ctx.serve.running.users!.watcherCount() === 1, 'the watch');
    await unary(c, 'UpdateUser', { user_id: bob.id, user: { full_name: 'Bob B' }, update_mask: { paths: ['full_name'] } }, admin);
    await unary(c, 'UpdateUser', { user_id: alice.id, user: { full_name: 'Alice A' }, update_mask: { paths: ['full_name'] } }, aliceAuth);
    await until(() => watch.items.length >= 1, 'her change');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(watch.items.map((e) => [e.user.id, e.user.full_name, e.user.email])).toEqual([[alice.id, 'Alice A', 'useralice@example.com']]);
  });

  it('open streams end UNAUTHENTICATED when the user is deactivated, and a sync stream then changes nothing', async () => {
    const c = ctx.serve.client();
    const { admin, alice, aliceAuth } = await twoUsers(c);
    const watch = ending(c.WatchUserChanges({ user_id: '0', types: [] }, aliceAuth));
    const chat = c.UserChat(aliceAuth);
    const chatEnd = ending(chat);
    chat.write({ room: 'r', sender: '', text: '' });
    const sync = c.SyncUsers(aliceAuth);
    const syncEnd = ending(sync);
    await until(() => ctx.serve.running.users!.watcherCount() === 1, 'the watch');
    await unary(c, 'UpdateUser', { user_id: alice.id, user: { is_active: false }, update_mask: { paths: ['is_active'] } }, admin);
    expect((await watch.status).code).toBe('UNAUTHENTICATED');
    expect((await chatEnd.status).code).toBe('UNAUTHENTICATED');
    expect((await syncEnd.status).code).toBe('UNAUTHENTICATED');
    sync.write({ client_ref: 'x', upsert: { user: { ...alice, username: 'renamed', is_active: false }, password: '' } });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await unary(c, 'GetUser', { user_id: alice.id }, admin)).username).toBe('useralice');
  });

  it('a revoked token (POST /auth/revoke) ends its watch UNAUTHENTICATED; the admin token cannot be revoked so', async () => {
    const c = ctx.serve.client();
    const { aliceAuth, aliceToken } = await twoUsers(c);
    const watch = ending(c.WatchUserChanges({ user_id: '0', types: [] }, aliceAuth));
    await until(() => ctx.serve.running.users!.watcherCount() === 1, 'the watch');
    const revoke = (token: string) => fetch(`${ctx.serve.running.url}/api/v2/auth/revoke`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    const first = await revoke(aliceToken);
    expect(first.status, await first.text()).toBe(204);
    expect((await watch.status).code).toBe('UNAUTHENTICATED');
    expect((await failure(unary(c, 'GetUser', { user_id: '1' }, aliceAuth)))?.code).toBe('UNAUTHENTICATED');
    expect((await revoke(aliceToken)).status).toBe(401);
    expect((await revoke(ctx.serve.running.adminToken)).status).toBe(403);
  });
});

describe.each(BACKENDS)('watch limits on %s', (backend) => {
  const ctx = useUserClients(backend);

  it('one account holds at most 16 open watches; the next is RESOURCE_EXHAUSTED with a RetryInfo, and a closed one makes room', async () => {
    const c = ctx.serve.client();
    await unary(c, 'CreateUser', newUser('carol'), ctx.serve.auth());
    const auth = ctx.serve.auth(await login(ctx.serve.running, 'usercarol'));
    const open = Array.from({ length: 16 }, () => c.WatchUserChanges({ user_id: '0', types: [] }, auth) as grpc.ClientReadableStream<any>);
    for (const call of open) call.on('error', () => undefined);
    await until(() => ctx.serve.running.users!.watcherCount() === 16, 'the 16 watches');
    const refused = await new Promise<grpc.ServiceError>((resolve) => c.WatchUserChanges({ user_id: '0', types: [] }, auth).on('error', resolve));
    expect(grpc.status[refused.code]).toBe('RESOURCE_EXHAUSTED');
    expect(refused.details).toMatch(/16 watch streams open/);
    expect(refused.metadata.get('grpc-status-details-bin')).toHaveLength(1);
    open[0]!.cancel();
    await until(() => ctx.serve.running.users!.openWatches() === 15, 'one to close');
    const again = c.WatchUserChanges({ user_id: '0', types: [] }, auth) as grpc.ClientReadableStream<any>;
    again.on('error', () => undefined);
    await until(() => ctx.serve.running.users!.watcherCount() === 16, 'the new watch');
    for (const call of [...open, again]) call.cancel();
  });
});
