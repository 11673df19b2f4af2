/**
 * The host page's browser tests, put together: `miniapp serve` as a real
 * process over its embedded sandbox (SQLite in a home of its own, CORS for
 * the mini-app's origin), a tiny mini-app served by the test on another
 * origin that imports appLogin() from serve and calls the relay itself, and
 * Debian's Chromium driven by playwright-core. Every browser context records
 * its console errors, uncaught errors and CSP violations (a test fails on
 * any), every URL it asks for, and how often a consent screen appeared.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type BrowserContextOptions, type Frame, type FrameLocator, type Page } from 'playwright-core';
import { startServeProcess, type ServeProcess } from './chaos.js';
import { findChromium } from './chromium.js';
import { launch } from './launcher.js';

/** What the mini-app page shows after a login: the SDK's result and the relay's user, or the rejection. */
export type LoginOutcome =
  | { ok: true; referrer: string; codeIssued: boolean; status: number; me: Record<string, unknown> }
  | { ok: false; isError: boolean; name: string; code: string; message: string };

/** The mini-app: a button that calls appLogin(), then the relay of serve (token, me) from its own origin. */
function miniAppPage(serveUrl: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Test mini-app</title><link rel="icon" href="data:,">
<script type="module">
import { appLogin } from '${serveUrl}/host/app-login.js';
const out = document.getElementById('result');
let n = 0;
document.getElementById('login').addEventListener('click', async () => {
  let outcome;
  try {
    const { authorizationCode, referrer } = await appLogin();
    const token = await fetch('${serveUrl}/api/auth/token', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ authorizationCode, referrer }) });
    const tokens = await token.json();
    const me = await fetch('${serveUrl}/api/auth/me', { headers: { authorization: 'Bearer ' + tokens.accessToken } });
    outcome = { ok: true, referrer, codeIssued: authorizationCode.startsWith('code_'), status: me.status, me: await me.json() };
  } catch (error) {
    outcome = { ok: false, isError: error instanceof Error, name: error.name, code: error.code, message: error.message };
  }
  out.textContent = JSON.stringify(outcome);
  out.dataset.n = String(++n);
});
out.dataset.ready = '';
</script></head>
<body><h1>Test mini-app</h1><button id="login" type="button">Log in</button><output id="result"></output></body></html>`;
}

/** A page of the mini-app's origin that frames the mini-app: a frame, but not the host page's. */
const FRAMED_ELSEWHERE = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Not the host</title><link rel="icon" href="data:,"></head>
<body><iframe id="app" title="Mini-app" src="/"></iframe></body></html>`;

export interface Watched {
  context: BrowserContext;
  /** Console errors, uncaught errors and CSP violations of every page and frame of the context. */
  problems: string[];
  /** Every URL the context asked for. */
  requests: string[];
  /** How many consent screens appeared, in any page of the context. */
  consentScreens(): number;
}

export interface HostRig {
  serve: ServeProcess;
  serveUrl: string;
  appOrigin: string;
  appUrl: string;
  browser: Browser;
  watch(options?: BrowserContextOptions): Promise<Watched>;
  /** `miniapp callbacks list --user-key N --json` on serve's data dir. */
  callbacks(userKey: number): Record<string, unknown>[];
  close(): Promise<void>;
}

/** Reported in the page by an init script: CSP violations as console errors, consent forms as they appear. */
const PAGE_WATCH = `
addEventListener('securitypolicyviolation', (event) => console.error('CSP violation: ' + event.violatedDirective + ' blocked ' + event.blockedURI + ' in ' + event.documentURI));
new MutationObserver((changes) => {
  for (const change of changes) for (const node of change.addedNodes) {
    if (node.nodeType === 1 && node.matches('form.consent')) console.info('miniapp-test: consent screen shown');
  }
}).observe(document, { childList: true, subtree: true });
`;

export async function startHostRig(extraArgs: string[] = []): Promise<HostRig> {
  const home = mkdtempSync(join(tmpdir(), 'miniapp-hostpage-'));
  let serveUrl = '';
  const app: Server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (path === '/') return void response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(miniAppPage(serveUrl));
    if (path === '/framed') return void response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(FRAMED_ELSEWHERE);
    response.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  });
  await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
  const appOrigin = `http://127.0.0.1:${(app.address() as AddressInfo).port}`;
  const appUrl = `${appOrigin}/`;
  let serve: ServeProcess | undefined;
  let browser: Browser | undefined;
  try {
    serve = await startServeProcess({ home, extraArgs: ['--no-grpc', '--cors-origin', appOrigin, '--app-url', appUrl, ...extraArgs] });
    serveUrl = serve.info.url;
    browser = await chromium.launch({
      executablePath: findChromium(),
      chromiumSandbox: false,
      args: ['--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    });
  } catch (error) {
    serve?.dispose();
    await new Promise((resolve) => app.close(resolve));
    rmSync(home, { recursive: true, force: true });
    throw error;
  }
  const opened: BrowserContext[] = [];
  return {
    serve,
    serveUrl,
    appOrigin,
    appUrl,
    browser,
    async watch(options = {}) {
      const context = await browser!.newContext(options);
      opened.push(context);
      await context.addInitScript(PAGE_WATCH);
      const problems: string[] = [];
      const requests: string[] = [];
      let consents = 0;
      context.on('console', (message) => {
        if (message.type() === 'error') problems.push(`${message.page()?.url() ?? '?'}: ${message.text()}`);
        if (message.text() === 'miniapp-test: consent screen shown') consents++;
      });
      context.on('weberror', (error) => problems.push(`uncaught: ${error.error().message}`));
      context.on('request', (request) => requests.push(request.url()));
      return { context, problems, requests, consentScreens: () => consents };
    },
    callbacks(userKey) {
      const listed = launch(home, ['callbacks', 'list', '--user-key', String(userKey), '--json']);
      if (listed.code !== 0) throw new Error(`callbacks list exited ${listed.code}: ${listed.stderr}`);
      return JSON.parse(listed.stdout) as Record<string, unknown>[];
    },
    async close() {
      for (const context of opened) await context.close().catch(() => undefined);
      await browser!.close();
      await serve!.stop('SIGINT');
      serve!.dispose();
      await new Promise((resolve) => app.close(resolve));
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/**
 * Clicks the mini-app's Log in (in `where`: the host page's frame, or the mini-app's own page) and resolves with what
 * it shows next. Once its script has run (the result marked ready): a click before the module that listens for it
 * has loaded (a dev server compiling it on a busy machine) does nothing.
 */
export async function logIn(where: FrameLocator | Page | Frame): Promise<LoginOutcome> {
  const result = where.locator('#result');
  await where.locator('#result[data-ready]').waitFor({ state: 'attached', timeout: 15_000 });
  const before = Number((await result.getAttribute('data-n')) ?? '0');
  await where.getByRole('button', { name: 'Log in' }).click();
  const done = where.locator(`#result[data-n="${before + 1}"]`);
  await done.waitFor({ timeout: 15_000 });
  return JSON.parse((await done.textContent()) ?? 'null') as LoginOutcome;
}

/** The URLs of `requests` that went anywhere but serve and the mini-app's own server. */
export function elsewhere(requests: readonly string[], origins: readonly string[]): string[] {
  return requests.filter((url) => !url.startsWith('data:') && !origins.includes(new URL(url).origin));
}
