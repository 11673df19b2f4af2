#!/usr/bin/env node
'use strict';
// Launcher: sets the exit code, nothing else. The quick path (a CommonJS
// bundle, see src/cli/quick.ts) serves `--help`, `config get`, `token show`
// and `decrypt` without starting Node's ESM loader; for everything else it
// returns undefined untouched and the full CLI (dist/cli/main.js) runs.
const argv = process.argv.slice(2);
const quick = require('../dist/quick/cli.cjs').quickCli(argv);
(quick ?? import('../dist/cli/main.js').then((cli) => cli.main(argv))).then((code) => {
  process.exitCode = code;
});
