/**
 * Writes batched while one is in flight (src/commerce/kernel/together.ts),
 * as PostgreSQL's checkout steps use them: alone at once, then the rest
 * together, in the order every instance takes rows in, items with a shared
 * key in different writes, and a batch that met another in a deadlock
 * written again item by item.
 */
import { describe, expect, it } from 'vitest';
import { Together } from '../../src/commerce/kernel/together.js';

function recording(fail?: (batch: readonly string[]) => unknown) {
  const writes: string[][] = [];
  const together = new Together<string, string>(
    async (batch) => {
      writes.push([...batch]);
      await new Promise((resolve) => setTimeout(resolve, 5));
      const error = fail?.(batch);
      if (error) throw error;
      return batch.map((item) => `wrote ${item}`);
    },
    (item) => [item.split(':')[0]!],
  );
  return { together, writes };
}

describe('Together', () => {
  it('writes the first item at once and the items that come meanwhile together, in order, a key once a write; each caller hears its own answer', async () => {
    const { together, writes } = recording();
    const answers = await Promise.all(['m:1', 'c:2', 'a:3', 'c:4', 'b:5'].map((item) => together.add(item)));
    expect(answers).toEqual(['wrote m:1', 'wrote c:2', 'wrote a:3', 'wrote c:4', 'wrote b:5']);
    expect(writes).toEqual([['m:1'], ['a:3', 'b:5', 'c:2'], ['c:4']]);
  });

  it('gives every caller of a failed write its error, and goes on with the next', async () => {
    const { together, writes } = recording((batch) => (batch.includes('bad') ? new Error('refused') : undefined));
    const first = together.add('x');
    const failed = [together.add('bad'), together.add('y')].map((p) => p.then(String, (error: Error) => error.message));
    expect(await first).toBe('wrote x');
    expect(await Promise.all(failed)).toEqual(['refused', 'refused']);
    expect(await together.add('z')).toBe('wrote z');
    expect(writes).toEqual([['x'], ['bad', 'y'], ['z']]);
  });

  it('writes a batch that met a deadlock again, an item at a time', async () => {
    const { together, writes } = recording((batch) => (batch.length > 1 ? Object.assign(new Error('deadlock detected'), { code: '40P01' }) : undefined));
    const answers = await Promise.all(['x', 'b', 'a'].map((item) => together.add(item)));
    expect(answers).toEqual(['wrote x', 'wrote b', 'wrote a']);
    expect(writes).toEqual([['x'], ['a', 'b'], ['a'], ['b']]);
  });
});
