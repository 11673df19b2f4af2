/**
 * SQLite re-prepares a statement on every run when its LIMIT (or OFFSET)
 * is a bare parameter; `LIMIT CAST($n AS INTEGER)` keeps the prepared
 * plan, and PostgreSQL reads it the same. This holds every query text of
 * src/ to that form.
 */
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = fileURLToPath(new URL('../../src', import.meta.url));

/** `LIMIT $1`, `LIMIT $${...}`, `OFFSET $2`: a bare parameter after LIMIT or OFFSET in a query text. */
const BARE = /\b(LIMIT|OFFSET)\s+\$(\d|\$\{)/g;

describe('LIMIT and OFFSET parameters', () => {
  it('are cast to INTEGER in every query of src/', () => {
    const bare: string[] = [];
    for (const file of readdirSync(SRC, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.ts'))) {
      const lines = readFileSync(join(SRC, file), 'utf8').split('\n');
      lines.forEach((line, index) => {
        for (const match of line.matchAll(BARE)) bare.push(`src/${file}:${index + 1}: ${match[0]}`);
      });
    }
    expect(bare).toEqual([]);
  });

  it('finds a bare one (the check itself works)', () => {
    expect('ORDER BY seq LIMIT $2'.match(BARE)).toEqual(['LIMIT $2']);
    expect('LIMIT $${params.length}'.match(BARE)).toEqual(['LIMIT $${']);
    expect('LIMIT CAST($2 AS INTEGER)'.match(BARE)).toBeNull();
  });
});
