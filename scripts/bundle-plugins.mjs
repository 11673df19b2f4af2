/**
 * What both bundlers (bundle-quick.mjs, the quick path; bundle-cli.mjs, the
 * whole CLI) do to commander, in one place.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));

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
