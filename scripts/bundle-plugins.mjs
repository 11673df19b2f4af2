/**
 * What both bundlers (bundle-quick.mjs, the quick path; bundle-cli.mjs, the
 * whole CLI) share: what they do to commander, and how they keep Node's ESM
 * loader out of a run.
 */
import { builtinModules } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
/** Node's own modules, by both names: never bundled. */
export const BUILTINS = new Set([...builtinModules, ...builtinModules.map((name) => `node:${name}`)]);
/** Left to `require` at run time and installed beside the bundles: the native driver (pack.mjs ships these). */
export const RUNTIME_DEPENDENCIES = ['better-sqlite3'];
/** Left to `require` at run time: the runtime dependencies, and pg's optional native driver, never installed. */
export const EXTERNAL = new Set([...RUNTIME_DEPENDENCIES, 'pg-native']);

/**
 * src/cli/commander.ts loads commander with `require` (cheaper than Node's
 * ESM translation of a CommonJS package); in a bundle it is an ordinary
 * import, so that commander is bundled like everything else.
 */
export const commanderAsImport = {
  name: 'commander-as-import',
  load(id) {
    if (id === join(ROOT, 'dist', 'cli', 'commander.js')) return "export { Command, CommanderError, Option } from 'commander';";
    return null;
  },
};

/**
 * commander requires node:child_process when it loads, for one thing: to
 * spawn a stand-alone executable subcommand, which miniapp does not define.
 * Loading it (with net, dgram and the stream machinery behind it) is the
 * largest single cost of `miniapp --help` after Node itself, and a part of
 * every command's; in a bundle it is required on first use instead.
 * `childProcess.spawn` is the only use.
 */
const CHILD_PROCESS = "const childProcess = require('node:child_process');";
export const lazyChildProcess = {
  name: 'commander-lazy-child-process',
  transform(code, id) {
    if (!id.endsWith(join('node_modules', 'commander', 'lib', 'command.js'))) return null;
    if (!code.includes(CHILD_PROCESS)) throw new Error(`commander changed: ${id} no longer has \`${CHILD_PROCESS}\``);
    return code.replace(CHILD_PROCESS, "const childProcess = { spawn: (...args) => require('node:child_process').spawn(...args) };");
  },
};

/**
 * Output options: an `import()` (of Node's own modules: the source loads node:tls, node:crypto ... when reached)
 * becomes a require in a promise, rolldown's own rewrite: CommonJS bundles, so that a command never starts Node's
 * ESM loader, which an `import()` would.
 */
export const DYNAMIC_IMPORT_AS_REQUIRE = { dynamicImportInCjs: false };

/** Fails the build on any `import()` left in a chunk, which would start the ESM loader after all. */
export const noImportLeft = {
  name: 'no-import-left',
  renderChunk(code, chunk) {
    const left = /\bimport\([^)]{0,60}\)/.exec(code);
    if (left) throw new Error(`${chunk.fileName}: ${left[0]} is left in the bundle`);
    return null;
  },
};
