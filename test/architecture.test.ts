/**
 * The map of docs/ARCHITECTURE.md, held against the imports of src/: every
 * import (static, `import type`, re-exports and `import('...')` with a
 * literal path) points down the floors the map gives, no files import each
 * other in a circle, the blog and commerce stay apart, and no source file
 * grows past 600 lines.
 */
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const SRC = join(root, 'src');

/** The floors of docs/ARCHITECTURE.md, top first: a place imports only from places on floors below its own. */
const FLOORS: readonly (readonly string[])[] = [
  ['cli/'],
  ['server/'],
  ['blog/'],
  ['commerce/', 'users/', 'monitoring/'],
  ['relay/', 'grpc/', 'config/', 'sandbox/'],
  ['webhooks/', 'http/', 'login/', 'auth/', 'insights/'],
  ['store/', 'transport-error.ts', 'duration.ts'],
  ['telemetry/', 'directories.ts'],
  ['errors.ts', 'lines.ts', 'csv-records.ts', 'json-syntax.ts', 'url-redaction.ts', 'lazy-once.ts'],
];

/** The floors inside the folders that have floors of their own, top first. */
const INNER_FLOORS: Readonly<Record<string, readonly (readonly string[])[]>> = {
  'commerce/': [['commerce.ts', 'client.ts'], ['client-light.ts'], ['order/'], ['payment/', 'inventory/'], ['kernel/']],
  'cli/': [
    ['main.ts', 'quick.ts'],
    ['program.ts'],
    ['commands/', 'completion.ts'],
    ['views/'],
    ['connect/', 'terminal/'],
    ['command.ts'],
    ['context.ts', 'commander.ts', 'argv.ts', 'flags.ts'],
    ['charts/'],
    ['render/'],
  ],
};

const MAX_LINES = 600;

interface Source {
  /** Path under src/, with forward slashes. */
  path: string;
  lines: number;
  /** What it imports, as paths under src/. */
  imports: string[];
}

function sources(): Source[] {
  const files = readdirSync(SRC, { recursive: true, encoding: 'utf8' })
    .map((file) => file.split('\\').join('/'))
    .filter((file) => file.endsWith('.ts'));
  const known = new Set(files);
  return files.map((path) => {
    const text = readFileSync(join(SRC, path), 'utf8');
    const specifiers = [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|^import\s+)['"](\.{1,2}\/[^'"]+)['"]/gm)].map((m) => m[1]!);
    const imports = specifiers
      .map((specifier) =>
        relative(SRC, normalize(join(SRC, dirname(path), specifier)))
          .split('\\')
          .join('/')
          .replace(/\.js$/, '.ts'),
      )
      .filter((target) => known.has(target));
    return { path, lines: text.split('\n').length, imports: [...new Set(imports)] };
  });
}

/** The floor of `path` (0 = top) among `floors`, and the place that put it there. */
function placeOf(path: string, floors: readonly (readonly string[])[]): { floor: number; place: string } | undefined {
  for (const [floor, places] of floors.entries()) {
    for (const place of places) if (place.endsWith('/') ? path.startsWith(place) : path === place) return { floor, place };
  }
  return undefined;
}

/** Every import that does not point down `floors` (within `prefix`, a folder, or the whole of src/). */
function upward(all: Source[], floors: readonly (readonly string[])[], prefix = ''): string[] {
  const wrong: string[] = [];
  for (const source of all.filter((s) => s.path.startsWith(prefix))) {
    const from = placeOf(source.path.slice(prefix.length), floors);
    for (const target of source.imports.filter((t) => t.startsWith(prefix))) {
      const to = placeOf(target.slice(prefix.length), floors);
      if (!from || !to || from.place === to.place) continue;
      if (to.floor <= from.floor) wrong.push(`${source.path} -> ${target}`);
    }
  }
  return wrong;
}

/** The groups of files that import each other in a circle (Tarjan's strongly connected components). */
function circles(all: Source[]): string[][] {
  const graph = new Map(all.map((s) => [s.path, s.imports]));
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (node: string): void => {
    index.set(node, next);
    low.set(node, next++);
    stack.push(node);
    onStack.add(node);
    for (const target of graph.get(node) ?? []) {
      if (!index.has(target)) {
        visit(target);
        low.set(node, Math.min(low.get(node)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(node, Math.min(low.get(node)!, index.get(target)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const group: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        group.push(member);
      } while (member !== node);
      if (group.length > 1 || graph.get(node)?.includes(node)) found.push(group.sort());
    }
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

describe('the house of src/', () => {
  const all = sources();

  it('has a floor for every file, as docs/ARCHITECTURE.md lists them', () => {
    expect(all.filter((s) => !placeOf(s.path, FLOORS)).map((s) => s.path)).toEqual([]);
    for (const [folder, floors] of Object.entries(INNER_FLOORS)) {
      const unplaced = all.filter((s) => s.path.startsWith(folder) && !placeOf(s.path.slice(folder.length), floors));
      expect(
        unplaced.map((s) => s.path),
        `files of src/${folder} on no floor of its own`,
      ).toEqual([]);
    }
  });

  it('imports only downwards, between the families and inside commerce and the CLI', () => {
    expect(upward(all, FLOORS)).toEqual([]);
    for (const [folder, floors] of Object.entries(INNER_FLOORS)) expect(upward(all, floors, folder)).toEqual([]);
  });

  it('has no files that import each other in a circle', () => {
    expect(circles(all)).toEqual([]);
  });

  it('keeps the blog and commerce apart', () => {
    const across = all.flatMap((s) =>
      s.imports
        .filter((t) => (s.path.startsWith('blog/') && t.startsWith('commerce/')) || (s.path.startsWith('commerce/') && t.startsWith('blog/')))
        .map((t) => `${s.path} -> ${t}`),
    );
    expect(across).toEqual([]);
  });

  it(`has no source file over ${MAX_LINES} lines`, () => {
    expect(all.filter((s) => s.lines > MAX_LINES).map((s) => `${s.path}: ${s.lines}`)).toEqual([]);
  });

  it('finds what it looks for (the checks themselves work)', () => {
    const made: Source[] = [
      { path: 'store/a.ts', lines: 10, imports: ['cli/b.ts'] },
      { path: 'cli/b.ts', lines: 10, imports: ['store/a.ts'] },
      { path: 'cli/render/c.ts', lines: 10, imports: ['cli/commands/d.ts'] },
      { path: 'cli/commands/d.ts', lines: 10, imports: [] },
    ];
    expect(upward(made, FLOORS)).toEqual(['store/a.ts -> cli/b.ts']);
    expect(upward(made, INNER_FLOORS['cli/']!, 'cli/')).toEqual(['cli/render/c.ts -> cli/commands/d.ts']);
    expect(circles(made)).toEqual([['cli/b.ts', 'store/a.ts']]);
  });
});
