#!/usr/bin/env node
'use strict';
// Launcher: sets the exit code, nothing else. The quick path (a CommonJS
// bundle, see src/cli/quick.ts) serves `--help`, `config get`, `token show`
// and `decrypt`; for everything else it returns undefined untouched and the
// full CLI runs, bundled to CommonJS as well (dist/bundle/, see
// scripts/bundle-cli.mjs): neither starts Node's ESM loader.
//
// Both bundles are compiled with a code cache (bin/compile-cache.cjs): what
// V8 compiled in one run is reused by the next, as Node 22's module compile
// cache does (used there instead).
require('./compile-cache.cjs').enableCompileCache();
const argv = process.argv.slice(2);
const quick = require('../dist/quick/cli.cjs').quickCli(argv);
(quick ?? require('../dist/bundle/main.cjs').main(argv)).then((code) => {
  process.exitCode = code;
});
