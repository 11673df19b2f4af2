/** The suites test/sequencer.ts starts first are suites of this project (a renamed one would silently lose its place). */
import { describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LONGEST_SUITES } from './sequencer.js';

const root = fileURLToPath(new URL('..', import.meta.url));

describe('the suites started first', () => {
  it('all exist, each listed once', () => {
    expect(LONGEST_SUITES.filter((suite) => !existsSync(join(root, suite)))).toEqual([]);
    expect(new Set(LONGEST_SUITES).size).toBe(LONGEST_SUITES.length);
  });
});
