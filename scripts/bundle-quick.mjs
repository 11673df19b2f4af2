#!/usr/bin/env node
/**
 * Builds the quick path (src/cli/quick.ts): the compiled dist/cli/quick.js
 * and everything it imports, commander included, bundled into CommonJS in
 * dist/quick/ (`npm run build` runs this after tsc).
 *
 * - CommonJS, so that the launcher (bin/miniapp.cjs) never starts Node's ESM
 *   loader for these commands.
 * - Every package is bundled, none left to `require` at run time: several
 *   are ESM only (chalk, string-width), which `require` cannot load on
 *   every Node 20 this project supports. Node's own modules stay external.
 * - Code reached only through a dynamic `import()` (chalk on a terminal, the
 *   config writer) goes into chunks of its own, loaded when reached, as the
 *   ESM build loads it.
 * - The chunks sit two levels below the package root, as the compiled
 *   modules do, so that paths taken relative to `import.meta.url` (the
 *   package.json that gives the version) resolve to the same files.
 * - Minified, for less to read and compile at every start, but with the
 *   names of functions and classes kept: a stack trace under --debug still
 *   names them (the ESM build in dist/cli has the readable source and maps).
 */
import { rmSync } from 'node:fs';
import { join, sep } from 'node:path';
import { rolldown } from 'rolldown';
import { BUILTINS, commanderAsImport, DYNAMIC_IMPORT_AS_REQUIRE, lazyChildProcess, noImportLeft, ROOT } from './bundle-plugins.mjs';

const OUT = join(ROOT, 'dist', 'quick');

rmSync(OUT, { recursive: true, force: true });
const bundle = await rolldown({
  input: { cli: join(ROOT, 'dist', 'cli', 'quick.js') },
  platform: 'node',
  external: (id) => BUILTINS.has(id),
  plugins: [commanderAsImport, lazyChildProcess, noImportLeft],
  // The entry's exports are quickCli and servesQuickly, nothing more is read from it.
  preserveEntrySignatures: 'allow-extension',
  logLevel: 'warn',
  onLog(level, log, report) {
    // A module imported both ways (output.js) simply stays in the chunk that imports it statically.
    if (log.code !== 'INEFFECTIVE_DYNAMIC_IMPORT') report(level, log);
  },
});
/** A module of the compiled tree, by its path under dist/ without `.js`. */
const compiled = (paths) => {
  const pattern = new RegExp(`/dist/(${paths.join('|')})\\.js$`);
  return (id) => pattern.test(id.split(sep).join('/'));
};

await bundle.write({
  dir: OUT,
  format: 'cjs',
  ...DYNAMIC_IMPORT_AS_REQUIRE,
  entryFileNames: '[name].cjs',
  chunkFileNames: '[name]-[hash].cjs',
  /**
   * A few chunks rather than one a module: each file costs a stat, a read
   * and a compile. The program (commander, program.ts and what every run
   * needs) is one; the profile's settings and the renderers another. Each
   * command stays in a chunk of its own with what only it needs (decrypt
   * with node:crypto), and so do chalk, ora, string-width and the config
   * writer, which these commands load only when they need them.
   */
  codeSplitting: {
    // A group takes the modules its test names, not what they import: the
    // entry's own import (argv.js) must not pull the program into the launcher's first read.
    includeDependenciesRecursively: false,
    groups: [
      {
        name: 'program',
        test: (id) =>
          id.includes(join('node_modules', 'commander', sep)) ||
          compiled(['cli/(program|command|context|terminal/stdio|render/color|commander)', 'errors'])(id),
      },
      {
        name: 'profile',
        test: compiled([
          'config/(settings|file|keys|paths|token-store)',
          'cli/(render/(streams|output|printable|progress|cells|grouped|column-fit|table-plan)|connect/profile)',
          'duration',
          'directories',
          'json-syntax',
          'login/(key-material|partner-prefix|session|token-data)',
        ]),
      },
    ],
  },
  comments: false,
  minify: { compress: true, mangle: { keepNames: true } },
});
await bundle.close();
