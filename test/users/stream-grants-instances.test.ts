/**
 * Issue 39, item 6, across instances: two serves, A and B, on one
 * PostgreSQL database. A user's open WatchUserChanges, UserChat and
 * SyncUsers streams on A end with UNAUTHENTICATED when the admin
 * deactivates the user through B, and when the user's token is revoked
 * through B (POST /api/v2/auth/revoke): A hears of it from the database
 * (the user change feed, TOKEN_REVOKED_CHANNEL), not from its own calls.
 * The 5 s bound is a safety time-out, not a measure of speed (the promise is
 * "within a second").
 */
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { failure, login, newUser, unary, UserClients } from '../helpers/user-client.js';
import { useFileDatabase } from '../helpers/postgres.js';
import { emptyDatabase } from '../helpers/backend-store.js';

const SAFETY_MS = 5_000;

/** The status a stream ends with, and when (rejects when it ends OK, or not within the safety bound). */
function ending(call: grpc.ClientReadableStream<any> | grpc.ClientDuplexStream<any, any>): Promise<{ code: string; at: number }> {
  call.on('data', () => undefined);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the stream was still open ${SAFETY_MS} ms later`)), SAFETY_MS + 2_000);
    call.on('error', (error: grpc.ServiceError) => {
      clearTimeout(timer);
      resolve({ code: grpc.status[error.code]!, at: Date.now() });
    });
    call.on('end', () => reject(new Error('the stream ended OK')));
  });
}

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  if (!check()) throw new Error(`timed out waiting for ${what}`);
}

describe('open streams of a user, on instance A, when instance B', () => {
  const database = useFileDatabase();
  let a: UserClients;
  let b: UserClients;

  beforeAll(async () => {
    // Migrated once here; each test then starts on an emptied database.
    const first = await UserClients.start({ kind: 'postgres', url: database.url, poolSize: 4 });
    await first.close();
  });
  beforeEach(async () => {
    await emptyDatabase(database.admin);
    [a, b] = await Promise.all([
      UserClients.start({ kind: 'postgres', url: database.url, poolSize: 4 }),
      UserClients.start({ kind: 'postgres', url: database.url, poolSize: 4 }),
    ]);
  });
  afterEach(async () => {
    await Promise.all([a?.close(), b?.close()]);
  });

  /** Alice, logged in on A, with a watch, a chat and a sync stream open on A. */
  async function aliceStreamsOnA() {
    const onA = a.client();
    const alice = (await unary(onA, 'CreateUser', newUser('alice'), a.auth())).user;
    const token = await login(a.running, 'useralice');
    const auth = a.auth(token);
    const watch = ending(onA.WatchUserChanges({ user_id: '0', types: [] }, auth));
    const chatCall = onA.UserChat(auth) as grpc.ClientDuplexStream<any, any>;
    const chat = ending(chatCall);
    chatCall.write({ room: 'r', sender: '', text: '' });
    const syncCall = onA.SyncUsers(auth) as grpc.ClientDuplexStream<any, any>;
    const sync = ending(syncCall);
    await until(() => a.running.users!.watcherCount() === 1 && a.running.users!.chatParticipantCount() === 1, 'the watch and the chat on A');
    return { onA, alice, token, auth, watch, chat, sync, syncCall };
  }

  async function allEnd(streams: Promise<{ code: string; at: number }>[], since: number): Promise<void> {
    const ended = await Promise.all(streams);
    expect(ended.map((e) => e.code)).toEqual(['UNAUTHENTICATED', 'UNAUTHENTICATED', 'UNAUTHENTICATED']);
    for (const e of ended) expect(e.at - since).toBeLessThan(SAFETY_MS);
  }

  it('deactivates the user: the watch, chat and sync streams end UNAUTHENTICATED, and the sync stream changes nothing after', async () => {
    const { onA, alice, auth, watch, chat, sync, syncCall } = await aliceStreamsOnA();
    const onB = b.client();
    await unary(onB, 'UpdateUser', { user_id: alice.id, user: { is_active: false }, update_mask: { paths: ['is_active'] } }, b.auth());
    await allEnd([watch, chat, sync], Date.now());
    syncCall.write({ client_ref: 'x', upsert: { user: { ...alice, username: 'renamed', is_active: false }, password: '' } });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await unary(onB, 'GetUser', { user_id: alice.id }, b.auth())).username).toBe('useralice');
    expect((await failure(unary(onA, 'GetUser', { user_id: alice.id }, auth)))?.code).toBe('UNAUTHENTICATED');
  });

  it("revokes the user's token: the watch, chat and sync streams end UNAUTHENTICATED", async () => {
    const { onA, alice, token, auth, watch, chat, sync } = await aliceStreamsOnA();
    const revoked = await fetch(`${b.running.url}/api/v2/auth/revoke`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    expect(revoked.status, await revoked.text()).toBe(204);
    await allEnd([watch, chat, sync], Date.now());
    expect((await failure(unary(onA, 'GetUser', { user_id: alice.id }, auth)))?.code).toBe('UNAUTHENTICATED');
  });

  it('deletes the user: the streams end UNAUTHENTICATED', async () => {
    const { alice, watch, chat, sync } = await aliceStreamsOnA();
    await unary(b.client(), 'DeleteUser', { user_id: alice.id }, b.auth());
    await allEnd([watch, chat, sync], Date.now());
  });
});
