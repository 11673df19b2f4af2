/**
 * Headless Chromium for the tests that need a real browser (the docs pages
 * under their CSP, the HTML report of insights). It is required, not
 * optional: without one the test fails and says how to point it at a
 * browser (MINIAPP_TEST_CHROMIUM, else chromium, chromium-browser or
 * google-chrome on the PATH).
 *
 * Every run has a fresh profile, and the flags that keep Chromium from
 * calling home (background networking, component updates, sync): on a
 * machine without a network those calls fail, many at a time.
 */
import { execFile } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

export function findChromium(): string {
  const named = process.env.MINIAPP_TEST_CHROMIUM;
  if (named) return named;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    for (const name of ['chromium', 'chromium-browser', 'google-chrome']) {
      try {
        accessSync(join(dir, name), constants.X_OK);
        return join(dir, name);
      } catch {
        // not here
      }
    }
  }
  throw new Error('no Chromium found: this test opens a page in a real browser. Install chromium or set MINIAPP_TEST_CHROMIUM.');
}

/**
 * Runs headless Chromium with `args` (after the common flags, with virtual
 * time: no wall-clock wait for the page's scripts); its stdout (`--dump-dom`)
 * and stderr (console lines with `--enable-logging=stderr`). A run that
 * failed yet wrote what it was asked for (`accept`) counts as done.
 */
export function runChromium(
  args: string[],
  options: { timeoutMs?: number; accept?: (stdout: string, stderr: string) => boolean } = {},
): Promise<{ stdout: string; stderr: string }> {
  const profile = mkdtempSync(join(tmpdir(), 'miniapp-chromium-'));
  const flags = [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    `--user-data-dir=${profile}`,
    '--enable-logging=stderr',
    '--v=0',
    '--virtual-time-budget=5000',
  ];
  const chromium = findChromium();
  const accept = options.accept ?? ((stdout: string) => stdout !== '');
  return new Promise((resolve, reject) => {
    execFile(chromium, [...flags, ...args], { maxBuffer: 32 * 1024 * 1024, timeout: options.timeoutMs ?? 60_000 }, (error, stdout, stderr) => {
      rmSync(profile, { recursive: true, force: true });
      if (error && !accept(stdout, stderr)) return reject(new Error(`${chromium} failed: ${error.message}\n${stderr}`));
      resolve({ stdout, stderr });
    });
  });
}
