/**
 * The browser the suite's page tests open (test/helpers/chromium.ts: the
 * docs pages under their CSP, the HTML report of insights), had before any
 * test runs, so that `npm install` then `npm test` pass on a fresh machine.
 *
 * When none is found and this run may install system packages (root, with
 * apt-get, as on a fresh CI machine), Debian's chromium package is
 * installed, saying so on stderr (about 20 s). Anywhere else nothing is
 * installed: the page tests fail saying how to point them at a browser.
 * MINIAPP_TEST_INSTALL_CHROMIUM=0 turns the install off.
 */
import { execFileSync, type ExecFileSyncOptions } from 'node:child_process';
import { findChromium } from './helpers/chromium.js';

function found(): boolean {
  try {
    findChromium();
    return true;
  } catch {
    return false;
  }
}

function hasAptGet(): boolean {
  try {
    execFileSync('apt-get', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export default function setup(): void {
  if (found()) return;
  if (process.env.MINIAPP_TEST_INSTALL_CHROMIUM === '0' || process.getuid?.() !== 0 || !hasAptGet()) {
    process.stderr.write('no Chromium found: the page tests will fail; install chromium (or set MINIAPP_TEST_CHROMIUM to a browser)\n');
    return;
  }
  process.stderr.write("no Chromium found: installing Debian's chromium for the page tests (apt-get install chromium)\n");
  const options: ExecFileSyncOptions = {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    timeout: 10 * 60_000,
  };
  try {
    execFileSync('apt-get', ['update'], options);
    execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'chromium'], options);
  } catch (error) {
    process.stderr.write(`installing chromium failed (${(error as Error).message.split('\n')[0]}): the page tests will fail\n`);
  }
}
