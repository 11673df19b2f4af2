/**
 * The log of user changes and the feed that reads it, on both backends,
 * through the store itself: numbers follow commit order and a rolled-back
 * change takes none, old changes are trimmed, a watcher starts at the head,
 * and a reader that missed signals reads on from where it was.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/store.js';
import { UserChangeLog, USER_CHANGES_CHANNEL, type UserChange } from '../../src/users/change-log.js';
import { UserChangeFeed } from '../../src/users/change-feed.js';
import { UserStore, type NewUser } from '../../src/users/user-store.js';
import type { Signals } from '../../src/store/signals.js';
import { BACKENDS } from '../helpers/postgres.js';
import { useBackendStore } from '../helpers/backend-store.js';
import { waitFor } from './cli/harness.js';

const person = (name: string): NewUser => ({ username: name, email: `${name}@example.com`, fullName: '', passwordHash: 'not-a-hash' });

/** Signals that can be muted, as a subscription that lost its connection would be; `reconnect` runs onConnected again. */
class MutableSignals implements Signals {
  muted = false;
  #connected: (() => void) | undefined;
  constructor(private readonly inner: Signals) {}
  publish(channel: string, payload: string, tx?: Parameters<Signals['publish']>[2]): Promise<void> {
    return this.inner.publish(channel, payload, tx);
  }
  async subscribe(channel: string, listener: (payload: string) => void, onConnected?: () => void): Promise<() => Promise<void>> {
    this.#connected = onConnected;
    return this.inner.subscribe(channel, (payload) => this.muted || listener(payload), onConnected);
  }
  reconnect(): void {
    this.muted = false;
    this.#connected?.();
  }
  alive(withinMs: number): boolean {
    return !this.muted && this.inner.alive(withinMs);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

describe.each(BACKENDS)('user change log on %s', (backend) => {
  const location = useBackendStore(backend);
  let store: Store;
  let clock: Date;
  let log: UserChangeLog;
  let users: UserStore;

  beforeEach(async () => {
    store = await openStore(location.location());
    clock = new Date('2026-11-23T10:00:00.000Z');
    log = new UserChangeLog(store.sql, store.signals, () => clock);
    users = new UserStore(store.sql, log, () => clock);
  });
  afterEach(async () => {
    await store.close();
  });

  it('numbers the changes of committed transactions, one after the other, and none of a rolled-back one', async () => {
    expect(await log.head()).toBe(0);
    const created = await Promise.all(['ann', 'bob', 'cy', 'dee'].map((name) => users.create(person(name))));
    await expect(users.create(person('ANN'))).rejects.toThrow('already exists');
    await users.update(created[0]!.id, { fullName: 'Ann A' });
    await users.delete(created[1]!.id);
    const changes = await log.after(0, 100);
    expect(changes.map((c) => c.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(changes.slice(4).map((c) => [c.type, c.user.username, c.user.fullName])).toEqual([
      ['UPDATED', 'ann', 'Ann A'],
      ['DELETED', 'bob', ''],
    ]);
    expect(changes[0]).toMatchObject({ type: 'CREATED', at: clock.toISOString() });
    expect(JSON.stringify(changes)).not.toContain('not-a-hash');
    expect(await log.head()).toBe(6);
    expect((await log.after(4, 1)).map((c) => c.seq)).toEqual([5]);
  });

  it('numbers a bulk create in one go, its refused rows taking no number', async () => {
    await users.create(person('taken'));
    const results = await users.createMany([person('one'), person('taken'), person('two'), { ...person('three'), email: 'ONE@example.com' }]);
    expect(results.map((r) => ('user' in r ? r.user.username : r.error.field))).toEqual(['one', 'username', 'two', 'email']);
    expect((await log.after(0, 100)).map((c) => [c.seq, c.user.username])).toEqual([
      [1, 'taken'],
      [2, 'one'],
      [3, 'two'],
    ]);
  });

  it('trims the changes older than the retention period', async () => {
    await users.create(person('old'));
    clock = new Date(clock.getTime() + 2 * 60 * 60 * 1000);
    await users.create(person('new'));
    const feed = new UserChangeFeed(log, store.signals, { now: () => clock, retentionMs: 60 * 60 * 1000 });
    expect(await feed.trim()).toBe(1);
    expect((await log.after(0, 100)).map((c) => c.user.username)).toEqual(['new']);
    expect(await log.head()).toBe(2);
  });

  it('reads the catch-ups of resuming watchers a page at a time in turns, letting the event loop run between pages', async () => {
    const total = 2_000;
    await users.createMany(Array.from({ length: total }, (_, i) => person(`u${i}`)));
    const feed = new UserChangeFeed(log, store.signals, { now: () => clock, pollMs: 3_600_000 });
    await feed.start();
    try {
      // Two watchers with room for every page (a watch that filters out every change would have): what they are given, in order.
      const given: Array<['a' | 'b', number]> = [];
      let loopRanAt: [number, number] | undefined;
      const counts = () => [given.filter(([who]) => who === 'a').length, given.filter(([who]) => who === 'b').length] as [number, number];
      setImmediate(() => {
        loopRanAt = counts();
      });
      const a = feed.watch((change) => given.push(['a', change.seq]), { after: 0 });
      const b = feed.watch((change) => given.push(['b', change.seq]), { after: 0 });
      await Promise.all([a.live, b.live]);
      const seqs = (who: 'a' | 'b') => given.filter(([w]) => w === who).map(([, seq]) => seq);
      expect(seqs('a')).toEqual(Array.from({ length: total }, (_, i) => i + 1));
      expect(seqs('b')).toEqual(Array.from({ length: total }, (_, i) => i + 1));
      // The event loop had a turn before either had caught up, and the two were given their pages in turns, not one whole log after the other.
      expect(loopRanAt).toBeDefined();
      expect(loopRanAt![0]).toBeLessThan(total);
      expect(loopRanAt![1]).toBeLessThan(total);
      const firstOfB = given.findIndex(([who]) => who === 'b');
      const lastOfA = given.findLastIndex(([who]) => who === 'a');
      expect(firstOfB).toBeLessThan(lastOfA);
      a.release();
      b.release();
    } finally {
      await feed.stop();
    }
  });

  it("catches a watch of one user up on that user's changes alone, by the index, then joins it live", async () => {
    const [ann] = await users
      .createMany([person('ann'), ...Array.from({ length: 1_500 }, (_, i) => person(`other${i}`))])
      .then((r) => r.map((x) => ('user' in x ? x.user : undefined)));
    await users.update(ann!.id, { fullName: 'Ann A' });
    await users.createMany(Array.from({ length: 1_500 }, (_, i) => person(`later${i}`)));
    await users.update(ann!.id, { fullName: 'Ann B' });
    // Each row the log reads is counted: a watch of one user must not read the others' 3,000.
    const read: number[] = [];
    const counted = Object.assign(Object.create(log) as UserChangeLog, {
      after: async (seq: number, limit: number) => {
        const changes = await log.after(seq, limit);
        read.push(changes.length);
        return changes;
      },
      afterFor: async (user: number, seq: number, limit: number) => {
        const page = await log.afterFor(user, seq, limit);
        read.push(page.changes.length);
        return page;
      },
    });
    const feed = new UserChangeFeed(counted, store.signals, { now: () => clock, pollMs: 3_600_000 });
    await feed.start();
    try {
      const given: UserChange[] = [];
      const watch = feed.watch((change) => change.user.id === ann!.id && given.push(change), { after: 0, only: () => ann!.id });
      const position = await watch.live;
      expect(given.map((c) => [c.type, c.user.fullName])).toEqual([
        ['CREATED', ''],
        ['UPDATED', 'Ann A'],
        ['UPDATED', 'Ann B'],
      ]);
      expect(position).toBe(0);
      expect(read.reduce((a, b) => a + b, 0)).toBeLessThan(10);
      // Live from there: the next change of hers comes once, those of others are not hers.
      await users.create(person('someone'));
      await users.update(ann!.id, { fullName: 'Ann C' });
      await waitFor(() => given.length === 4, 'her next change, live');
      expect(given.at(-1)!.user.fullName).toBe('Ann C');
      expect(new Set(given.map((c) => c.seq)).size).toBe(4);
      watch.release();
    } finally {
      await feed.stop();
    }
  });

  it("refuses to resume a watch of one user past changes trimmed from the log, as a watch of everyone's", async () => {
    const ann = await users.create(person('ann'));
    await users.create(person('bob'));
    clock = new Date(clock.getTime() + 2 * 60 * 60 * 1000);
    await users.update(ann.id, { fullName: 'later' });
    const feed = new UserChangeFeed(log, store.signals, { now: () => clock, pollMs: 3_600_000, retentionMs: 60 * 60 * 1000 });
    await feed.trim();
    await feed.start();
    try {
      const trimmed = feed.watch(() => undefined, { after: 0, only: () => ann.id });
      await expect(trimmed.live).rejects.toThrow('the changes after 0 are no longer kept');
      // From the last trimmed change on, it resumes.
      const given: UserChange[] = [];
      const resumed = feed.watch((change) => given.push(change), { after: 2, only: () => ann.id });
      await resumed.live;
      expect(given.map((c) => c.user.fullName)).toEqual(['later']);
      resumed.release();
    } finally {
      await feed.stop();
    }
  });

  it('starts a watcher at the head, and reads on from where it was after signals were lost', async () => {
    const signals = new MutableSignals(store.signals);
    const warnings: string[] = [];
    // No polling here: what the watcher gets, it gets from signals and reconnections.
    const feed = new UserChangeFeed(log, signals, { now: () => clock, pollMs: 3_600_000, warn: (message) => warnings.push(message) });
    await users.create(person('before'));
    await feed.start();
    try {
      // Committed before the watch, its signal possibly still on the way: not for this watcher.
      await users.create(person('racing'));
      const seen: UserChange[] = [];
      const watcher = feed.watch((change) => seen.push(change));
      await watcher.live;
      expect(feed.watcherCount()).toBe(1);
      await users.create(person('after'));
      await waitFor(() => seen.length === 1, 'the change after the watch');

      signals.muted = true;
      for (const name of ['lost1', 'lost2']) await users.create(person(name));
      // A signal of another channel, to be sure those of this one had time to be lost.
      await new Promise<void>((resolve) => {
        void store.signals.subscribe(`${USER_CHANGES_CHANNEL}_probe`, () => resolve()).then(() => store.signals.publish(`${USER_CHANGES_CHANNEL}_probe`, 'x'));
      });
      expect(seen.map((c) => c.user.username)).toEqual(['after']);
      signals.reconnect();
      await waitFor(() => seen.length === 3, 'the changes made while deaf');
      expect(seen.map((c) => [c.seq, c.user.username])).toEqual([
        [3, 'after'],
        [4, 'lost1'],
        [5, 'lost2'],
      ]);
      watcher.release();
      expect(feed.watcherCount()).toBe(0);
      expect(warnings).toEqual([]);
    } finally {
      await feed.stop();
    }
  });
});
