#!/usr/bin/env node
'use strict';
// Launcher: sets the exit code, nothing else. The quick path (a CommonJS
// bundle, see src/cli/quick.ts) serves `--help`, `config get`, `token show`
// and `decrypt`; for everything else it returns undefined untouched and the
// full CLI runs, bundled to CommonJS as well (dist/bundle/, see
// scripts/bundle-cli.mjs): neither starts Node's ESM loader.
//
// Where Node has its module compile cache (22.8 and later), it is turned on:
// V8's code of the bundles kept between runs, in Node's own directory
// (NODE_COMPILE_CACHE to choose it, NODE_DISABLE_COMPILE_CACHE to turn it off).
require('node:module').enableCompileCache?.();
const argv = process.argv.slice(2);
const quick = require('../dist/quick/cli.cjs').quickCli(argv);
(quick ?? require('../dist/bundle/main.cjs').main(argv)).then((code) => {
  process.exitCode = code;
});
