import { describe, expect, it } from 'vitest';
import { FreshRead } from '../../src/store/fresh-read.js';
import { StoreUnavailableError } from '../../src/store/sql.js';

/** A read whose answers the test releases one at a time. */
function controlledRead() {
  const pending: { resolve: (value: number) => void; reject: (error: Error) => void }[] = [];
  const read = () => new Promise<number>((resolve, reject) => pending.push({ resolve, reject }));
  return { read, pending };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('FreshRead', () => {
  it('answers callers who arrive during a read with the next read, shared, and never with the one already under way', async () => {
    const { read, pending } = controlledRead();
    const shared = new FreshRead(read);
    const a = shared.get();
    expect(pending).toHaveLength(1);
    // b and c ask while a's read is under way: they wait for a read of their own, one between them.
    const b = shared.get();
    const c = shared.get();
    expect(pending).toHaveLength(1);
    pending[0]!.resolve(1);
    expect(await a).toBe(1);
    await tick();
    expect(pending).toHaveLength(2);
    // d arrives while b and c's read is under way: the next one again.
    const d = shared.get();
    pending[1]!.resolve(2);
    expect([await b, await c]).toEqual([2, 2]);
    await tick();
    expect(pending).toHaveLength(3);
    pending[2]!.resolve(3);
    expect(await d).toBe(3);
    // Nothing under way: the next caller starts a read at once.
    const e = shared.get();
    expect(pending).toHaveLength(4);
    pending[3]!.resolve(4);
    expect(await e).toBe(4);
  });

  it('gives a failed read to its own callers only; those waiting for the next read still get one', async () => {
    const { read, pending } = controlledRead();
    const shared = new FreshRead(read);
    const a = shared.get();
    const b = shared.get();
    pending[0]!.reject(new Error('connection lost'));
    await expect(a).rejects.toThrow('connection lost');
    await tick();
    expect(pending).toHaveLength(2);
    pending[1]!.resolve(7);
    expect(await b).toBe(7);
  });

  it('fails the callers waiting behind a read that the database could not answer, without a second read', async () => {
    const { read, pending } = controlledRead();
    const shared = new FreshRead(read);
    const a = shared.get();
    const b = shared.get();
    const c = shared.get();
    pending[0]!.reject(new StoreUnavailableError('the database did not answer within 1000 ms'));
    await expect(a).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(b).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(c).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(pending).toHaveLength(1);
    // The next caller tries again.
    const d = shared.get();
    expect(pending).toHaveLength(2);
    pending[1]!.resolve(7);
    expect(await d).toBe(7);
  });
});
