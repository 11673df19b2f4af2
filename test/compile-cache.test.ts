/**
 * The launcher's code cache (bin/compile-cache.cjs), through the real
 * launcher: what it writes, that the next run takes it, that a damaged entry
 * is only compiled again, and that a directory others may write to, or the
 * switch Node names, turns it off. On Node 22.1 and later Node's own cache
 * does the work; the cases of this file's own hook hold on the Node it runs
 * on (20), the first two on both.
 */
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import Module from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launch } from './helpers/launcher.js';

const OWN_HOOK = typeof (Module as { enableCompileCache?: unknown }).enableCompileCache !== 'function';

let home: string;
beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), 'miniapp-compile-cache-test-'));
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

function freshCache(name: string): string {
  const dir = join(home, name);
  rmSync(dir, { recursive: true, force: true });
  return dir;
}

function run(cache: string, args: readonly string[], extra: Record<string, string> = {}) {
  const result = launch(home, args, { env: { NODE_COMPILE_CACHE: cache, ...extra } });
  expect(result.code, result.stderr).toBe(0);
  return result.stdout;
}

const entries = (dir: string) => readdirSync(dir).sort();

describe('the launcher compile cache', () => {
  it('is written by a first run and taken by the next, which prints the same', () => {
    const cache = freshCache('first');
    const first = run(cache, ['--help']);
    const written = entries(cache);
    expect(written.length).toBeGreaterThan(0);
    const second = run(cache, ['--help']);
    expect(second).toBe(first);
    expect(entries(cache)).toEqual(written);
  });

  it('runs the code that loads a module of Node on demand, compiled from the cache as without it', () => {
    // callbacks list opens the data dir's store through a lazily loaded node:fs (an import() in the source).
    const cache = freshCache('lazy');
    const args = ['callbacks', 'list', '--data-dir', join(home, 'no-data-yet')];
    const first = launch(home, args, { env: { NODE_COMPILE_CACHE: cache } });
    const second = launch(home, args, { env: { NODE_COMPILE_CACHE: cache } });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toContain('no database');
    expect(second).toMatchObject({ code: first.code, stdout: first.stdout, stderr: first.stderr });
  });

  it.runIf(OWN_HOOK)('names each entry by the bundle file it holds, and leaves it alone when it was taken', () => {
    const cache = freshCache('names');
    run(cache, ['config', 'list', '--json']);
    const written = entries(cache);
    expect(written).toContain(written.find((name) => /^cli\.cjs-\d+-\d+$/.test(name)));
    expect(written.some((name) => /^main\.cjs-\d+-\d+$/.test(name))).toBe(true);
    const times = written.map((name) => statSync(join(cache, name)).mtimeMs);
    run(cache, ['config', 'list', '--json']);
    expect(entries(cache).map((name) => statSync(join(cache, name)).mtimeMs)).toEqual(times);
  });

  it.runIf(OWN_HOOK)('compiles a damaged entry again and writes it anew', () => {
    const cache = freshCache('damaged');
    const first = run(cache, ['config', 'list', '--json']);
    const main = entries(cache).find((name) => name.startsWith('main.cjs-'))!;
    writeFileSync(join(cache, main), Buffer.from('not a code cache at all'));
    expect(run(cache, ['config', 'list', '--json'])).toBe(first);
    expect(readFileSync(join(cache, main)).toString()).not.toBe('not a code cache at all');
  });

  it.runIf(OWN_HOOK)('writes nothing to a directory others may write to, nor when NODE_DISABLE_COMPILE_CACHE is set', () => {
    const shared = freshCache('shared');
    run(shared, ['--version']);
    for (const name of entries(shared)) rmSync(join(shared, name));
    chmodSync(shared, 0o777);
    run(shared, ['--help']);
    expect(entries(shared)).toEqual([]);

    const disabled = freshCache('disabled');
    run(disabled, ['--help'], { NODE_DISABLE_COMPILE_CACHE: '1' });
    expect(() => readdirSync(disabled)).toThrow(/ENOENT/);
  });
});
