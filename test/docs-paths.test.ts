/**
 * The README and the architecture text name paths of the project
 * (`src/cli/command.ts`, `test/helpers/`, `docs/deploy.md`): every one of
 * them must exist, so that the map cannot drift from the house.
 */
import { describe, expect, it } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const DOCS = ['README.md', 'docs/ARCHITECTURE.md', 'docs/deploy.md'];

/** Paths under the project's own folders, as the docs write them (with or without a trailing slash). */
function projectPaths(text: string): string[] {
  const found = text.match(/(?<![\w./-])(?:src|test|bench|scripts|docs|proto|bin)\/[\w./<>-]*[\w/]/g) ?? [];
  // A placeholder such as src/<name>/service.ts or proto/<name>/v1/ names no one file.
  return [...new Set(found.filter((path) => !path.includes('<')))];
}

describe('paths the docs name', () => {
  it.each(DOCS)('all exist (%s)', (doc) => {
    const paths = projectPaths(readFileSync(join(root, doc), 'utf8'));
    expect(paths.length).toBeGreaterThan(0);
    expect(paths.filter((path) => !existsSync(join(root, path)))).toEqual([]);
  });

  it('are found as the docs write them, placeholders left out', () => {
    expect(projectPaths('see `src/cli/command.ts`, test/helpers/ and src/<name>/service.ts.')).toEqual(['src/cli/command.ts', 'test/helpers/']);
  });
});
