/**
 * Issue 39, item 2: WatchUserChanges from watchers that never read cannot
 * make serve buffer without limit. A real `serve` process on SQLite, with a
 * change log of 30,000 changes of one self-registered account; that
 * account opens 14 raw node:http2 watch streams (under its cap of 16), each
 * on its own connection with a small HTTP/2 window, and never reads them:
 * 8 resume after 0 (a catch-up of the whole log) and 6 watch from now on
 * while 1,500 changes are made. On main each stream held every change it
 * was sent, and serve's memory grew with the log times the watchers. What
 * must hold: serve's resident memory (/proc/PID/status VmRSS) grows by less
 * than 60 MB; a catch-up holds a page, not the log, and stays open; a live
 * watcher 1,000 changes behind ends with RESOURCE_EXHAUSTED (grpc-status 8)
 * after what flow control let through plus the 1,000 unread.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import { startServeProcess, type ServeProcess } from '../helpers/chaos.js';
import { userServiceDefinition } from '../../src/users/proto.js';
import { databasePath } from '../../src/store/database.js';
import { stalledWatch } from '../helpers/stalled-watch.js';

const LOGGED = 30_000;
const CATCHING_UP = 8;
const LIVE = 6;
const UPDATES = 1_500;
const RSS_BOUND_MB = 60;

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

type AnyClient = grpc.Client & Record<string, any>;

function unary(client: AnyClient, method: string, request: unknown, token: string): Promise<any> {
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  return new Promise((resolve, reject) =>
    client[method](request, metadata, (error: grpc.ServiceError | null, response: unknown) => (error ? reject(error) : resolve(response))),
  );
}

async function start(home: string): Promise<{ serve: ServeProcess; client: AnyClient }> {
  const serve = await startServeProcess({ home });
  cleanups.push(() => serve.dispose());
  const { Client } = userServiceDefinition();
  const client = new Client(serve.info.grpc.address, grpc.credentials.createInsecure()) as AnyClient;
  cleanups.push(() => client.close());
  return { serve, client };
}

describe('WatchUserChanges from watchers that never read, on a serve process', () => {
  it(`keeps serve's memory within ${RSS_BOUND_MB} MB and ends the live ones RESOURCE_EXHAUSTED 1,000 changes behind`, async () => {
    const home = mkdtempSync(join(tmpdir(), 'miniapp-watch-memory-'));
    cleanups.push(() => rmSync(home, { recursive: true, force: true }));

    // The account, then a log of 30,000 changes of it, written straight into the stopped serve's database.
    const first = await start(home);
    const created = await unary(
      first.client,
      'CreateUser',
      { username: 'mallory', email: 'mallory@example.com', password: 'correct horse', full_name: 'Mallory' },
      first.serve.info.adminToken,
    );
    await first.serve.stop();
    const db = new Database(databasePath(join(home, 'data')));
    const row = db.prepare('SELECT payload, at FROM user_events ORDER BY seq DESC LIMIT 1').get() as { payload: string; at: string };
    const head = (db.prepare("SELECT value FROM counters WHERE name = 'user_events'").get() as { value: number }).value;
    db.transaction(() => {
      const insert = db.prepare("INSERT INTO user_events (seq, type, payload, at, user_id) VALUES (?, 'UPDATED', ?, ?, ?)");
      for (let i = 1; i <= LOGGED; i++) insert.run(head + i, row.payload, row.at, JSON.parse(row.payload).id);
      db.prepare("UPDATE counters SET value = ? WHERE name = 'user_events'").run(head + LOGGED);
    })();
    db.close();

    const { serve, client } = await start(home);
    const pid = serve.child.pid!;
    const login = await fetch(`${serve.info.url}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'mallory', password: 'correct horse' }),
    });
    const token = ((await login.json()) as { access_token: string }).access_token;
    expect(token).toBeTruthy();
    const admin = serve.info.adminToken;
    // Warm: the code paths of a watch and an update loaded before the baseline.
    await unary(client, 'UpdateUser', { user_id: created.user.id, user: { full_name: 'Mallory 0' }, update_mask: { paths: ['full_name'] } }, admin);
    const warm = stalledWatch(cleanups, serve.info.grpc.address, token, Buffer.alloc(0));
    await warm.answered;
    await warm.resume(50);
    cleanups.pop()!();
    await new Promise((resolve) => setTimeout(resolve, 300));
    const baseline = rssMb(pid);

    // WatchUserRequest { resume_after: 0 } (field 3, varint) and {} (from now on).
    const catchingUp = Array.from({ length: CATCHING_UP }, () => stalledWatch(cleanups, serve.info.grpc.address, token, Buffer.from([0x18, 0x00])));
    const live = Array.from({ length: LIVE }, () => stalledWatch(cleanups, serve.info.grpc.address, token, Buffer.alloc(0)));
    await Promise.all([...catchingUp, ...live].map((watch) => watch.answered));
    let peak = rssMb(pid);

    for (let i = 1; i <= UPDATES; i += 10) {
      await Promise.all(
        Array.from({ length: 10 }, (_, k) =>
          unary(client, 'UpdateUser', { user_id: created.user.id, user: { full_name: `Mallory ${i + k}` }, update_mask: { paths: ['full_name'] } }, admin),
        ),
      );
      if (i % 100 === 1) peak = Math.max(peak, rssMb(pid));
    }
    for (let i = 0; i < 5; i++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      peak = Math.max(peak, rssMb(pid));
    }
    expect(peak - baseline, `VmRSS ${baseline.toFixed(0)} MB -> peak ${peak.toFixed(0)} MB`).toBeLessThan(RSS_BOUND_MB);

    // The live watchers were ended 1,000 unread changes behind: once read, each had what flow control let through
    // before, the 1,000 at most, and the status.
    const ended = await Promise.all(live.map((watch) => watch.resume(5_000)));
    for (const watch of ended) {
      expect(watch.status).toBe(String(grpc.status.RESOURCE_EXHAUSTED));
      expect(watch.messages).toBeLessThan(1_200);
    }
    // A catch-up that is not read holds its page and waits, open; read, it goes on from where it was.
    const caughtUp = await catchingUp[0]!.resume(1_000);
    expect(caughtUp.status).toBeUndefined();
    expect(caughtUp.messages).toBeGreaterThan(0);
    expect(serve.alive()).toBe(true);
  }, 60_000);
});
