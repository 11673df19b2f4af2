import { describe, expect, it } from 'vitest';
import { BatchedRead, inList } from '../../src/store/batched-read.js';

/** A read whose calls the test sees and answers itself. */
function controlledRead() {
  const calls: { keys: number[]; resolve: (rows: Map<number, string>) => void; reject: (error: Error) => void }[] = [];
  const read = (keys: number[]) => new Promise<Map<number, string>>((resolve, reject) => calls.push({ keys, resolve, reject }));
  return { read, calls };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('BatchedRead', () => {
  it('reads the keys asked for in one turn in one call, each key once, and answers every caller with its own row', async () => {
    const { read, calls } = controlledRead();
    const batched = new BatchedRead(read);
    const a = batched.get(1);
    const b = batched.get(2);
    const c = batched.get(1);
    const missing = batched.get(3);
    // Nothing is read until the turn is over: callers still to come join the batch.
    expect(calls).toHaveLength(0);
    await turn();
    expect(calls.map((call) => call.keys)).toEqual([[1, 2, 3]]);
    calls[0]!.resolve(
      new Map([
        [1, 'one'],
        [2, 'two'],
      ]),
    );
    expect(await Promise.all([a, b, c, missing])).toEqual(['one', 'two', 'one', undefined]);
  });

  it('never answers a caller with a read that began before it asked: a key asked for while a read is under way goes in the next one', async () => {
    const { read, calls } = controlledRead();
    const batched = new BatchedRead(read);
    const first = batched.get(1);
    await turn();
    expect(calls).toHaveLength(1);
    // The row changes now (a write commits); the read under way may not have seen it, so a caller arriving now must not share it.
    const second = batched.get(1);
    await turn();
    expect(calls.map((call) => call.keys)).toEqual([[1], [1]]);
    calls[1]!.resolve(new Map([[1, 'after the write']]));
    calls[0]!.resolve(new Map([[1, 'before the write']]));
    expect(await first).toBe('before the write');
    expect(await second).toBe('after the write');
  });

  it('fails every caller of a batch whose read fails, and reads again for the next caller', async () => {
    const { read, calls } = controlledRead();
    const batched = new BatchedRead(read);
    const a = batched.get(1);
    const b = batched.get(2);
    await turn();
    calls[0]!.reject(new Error('the database cannot be reached'));
    await expect(a).rejects.toThrow('the database cannot be reached');
    await expect(b).rejects.toThrow('the database cannot be reached');
    const c = batched.get(1);
    await turn();
    calls[1]!.resolve(new Map([[1, 'one']]));
    expect(await c).toBe('one');
  });

  it('fails the batch, not the process, when the read throws before it returns a promise', async () => {
    const batched = new BatchedRead<number, string>(() => {
      throw new Error('no connection');
    });
    await expect(batched.get(1)).rejects.toThrow('no connection');
  });

  it('splits a burst past the batch bound into several reads', async () => {
    const { read, calls } = controlledRead();
    const batched = new BatchedRead(read);
    const all = Array.from({ length: 600 }, (_, i) => batched.get(i));
    await turn();
    expect(calls.map((call) => call.keys.length)).toEqual([256, 256, 88]);
    for (const call of calls) call.resolve(new Map(call.keys.map((key) => [key, `row ${key}`])));
    const rows = await Promise.all(all);
    expect(rows[0]).toBe('row 0');
    expect(rows[599]).toBe('row 599');
  });

  it("lists a batch's keys as IN ($1, ...) of a power-of-two length, the last key repeated (a few statement texts)", () => {
    expect(inList('id', [7])).toEqual({ condition: 'id IN ($1)', params: [7] });
    expect(inList('id', [7, 8, 9])).toEqual({ condition: 'id IN ($1, $2, $3, $4)', params: [7, 8, 9, 9] });
    expect(inList('t.token_hash', ['a', 'b'])).toEqual({ condition: 't.token_hash IN ($1, $2)', params: ['a', 'b'] });
    const lengths = new Set(
      Array.from(
        { length: 256 },
        (_, i) =>
          inList(
            'id',
            Array.from({ length: i + 1 }, (_, k) => k),
          ).params.length,
      ),
    );
    expect([...lengths]).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 256]);
  });
});
