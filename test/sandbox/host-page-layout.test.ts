/**
 * The host page as a page (issue 41): it fits a 390x844 phone and a
 * 1280x800 desktop, light and dark as the system asks, every control
 * labelled and reachable by keyboard, the consent screen over the phone;
 * screenshots of both sizes are taken (kept in MINIAPP_HOST_SCREENSHOTS
 * when that names a folder, to be looked at). And the README's one-line
 * Vite alias: a front end that imports appLogin from the vendor's package
 * gets this one. Any console error or CSP violation fails a test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { elsewhere, logIn, startHostRig, type HostRig, type Watched } from '../helpers/host-browser.js';
import { readPng } from '../helpers/png.js';

let rig: HostRig;
const shots = mkdtempSync(join(tmpdir(), 'miniapp-host-shots-'));
beforeAll(async () => {
  rig = await startHostRig();
}, 60_000);
afterAll(async () => {
  await rig?.close();
  rmSync(shots, { recursive: true, force: true });
});

async function withNewUser(watched: Watched): Promise<Page> {
  const page = await watched.context.newPage();
  await page.goto(`${rig.serveUrl}/host/`);
  await page.getByRole('button', { name: 'New user' }).click();
  await page
    .getByRole('status')
    .getByText(/^Made user \d+, a first-time user/)
    .waitFor();
  return page;
}

function clean(watched: Watched, origins: string[] = [rig.serveUrl, rig.appOrigin]): void {
  expect(watched.problems).toEqual([]);
  expect(elsewhere(watched.requests, origins)).toEqual([]);
}

/** Controls in the accessibility tree with no name: what a screen reader could not announce. */
function unnamed(snapshot: string): string[] {
  return snapshot.split('\n').filter((line) => /^\s*- (button|checkbox|radio|textbox|combobox|link)\b(?! ")/.test(line));
}

/** The relative luminance of a pixel, 0 (black) to 1 (white). */
function luminance([r, g, b]: [number, number, number, number]): number {
  const linear = (c: number) => (c / 255 <= 0.03928 ? c / 255 / 12.92 : ((c / 255 + 0.055) / 1.055) ** 2.4);
  return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b);
}

describe('the host page as a page', () => {
  it.each([
    { size: 'desktop', width: 1280, height: 800, colorScheme: 'light' as const },
    { size: 'phone', width: 390, height: 844, colorScheme: 'dark' as const },
  ])(
    'fits a $size ($width x $height, $colorScheme), every control named, the consent screen over the phone',
    { timeout: 60_000 },
    async ({ size, width, height, colorScheme }) => {
      const watched = await rig.watch({ viewport: { width, height }, colorScheme });
      const page = await withNewUser(watched);
      const pending = logIn(page.frameLocator('#app'));
      const dialog = page.getByRole('dialog', { name: 'Log in with the host app' });
      await dialog.waitFor();
      await page.getByRole('checkbox', { name: /^Terms of service/ }).check();
      // As a person opens the page: at its top (clicking New user, below the phone on a phone, scrolled there).
      await page.evaluate('window.scrollTo(0, 0)');

      const extent = (await page.evaluate('({ width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight })')) as {
        width: number;
        height: number;
      };
      expect(extent.width, 'no sideways scrolling').toBeLessThanOrEqual(width);
      const phone = (await page.locator('#phone').boundingBox())!;
      const sheet = (await dialog.boundingBox())!;
      expect(phone.x).toBeGreaterThanOrEqual(0);
      expect(phone.x + phone.width).toBeLessThanOrEqual(width);
      expect(sheet.x).toBeGreaterThanOrEqual(phone.x);
      expect(sheet.x + sheet.width).toBeLessThanOrEqual(phone.x + phone.width);
      expect(sheet.y + sheet.height).toBeLessThanOrEqual(phone.y + phone.height);
      if (size === 'desktop') {
        // The whole page in the window: the phone, the panel and its log side by side.
        expect(extent.height).toBeLessThanOrEqual(height);
        expect(phone.y + phone.height).toBeLessThanOrEqual(height);
        const log = (await page.getByRole('heading', { name: 'Log', exact: true }).boundingBox())!;
        expect(log.x).toBeGreaterThan(phone.x + phone.width);
        expect(log.y + log.height).toBeLessThanOrEqual(height);
      } else {
        // The phone first, as wide as the window allows; the panel below it.
        expect(phone.width).toBeGreaterThan(width - 40);
        expect(phone.y + phone.height).toBeLessThanOrEqual(height);
        const panel = (await page.getByRole('heading', { name: 'Mini-app' }).boundingBox())!;
        expect(panel.y).toBeGreaterThan(phone.y + phone.height);
      }

      expect(unnamed(await page.locator('body').ariaSnapshot())).toEqual([]);
      for (const [role, name] of [
        ['textbox', 'Mini-app URL'],
        ['combobox', 'Sandbox user'],
        ['button', 'New user'],
        ['radio', 'as the host app does'],
        ['checkbox', 'Agree to all'],
      ] as const) {
        expect(await page.getByRole(role, { name }).count(), `${role} "${name}"`).toBe(1);
      }
      expect(await page.getByTitle('Mini-app').count()).toBe(1);

      const file = join(shots, `host-page-${width}x${height}-${colorScheme}.png`);
      const png = await page.screenshot({ path: file });
      const folder = process.env.MINIAPP_HOST_SCREENSHOTS;
      if (folder) {
        mkdirSync(folder, { recursive: true });
        writeFileSync(join(folder, `host-page-${width}x${height}-${colorScheme}.png`), png);
      }
      const image = readPng(png);
      expect([image.width, image.height]).toEqual([width, height]);
      // Light or dark as the system asks: the sheet's background, behind its text.
      const shade = luminance(image.pixel(Math.round(sheet.x + 8), Math.round(sheet.y + 8)));
      if (colorScheme === 'light') expect(shade).toBeGreaterThan(0.8);
      else expect(shade).toBeLessThan(0.1);

      await page.getByRole('button', { name: 'Cancel' }).click();
      expect(await pending).toMatchObject({ ok: false, code: 'USER_CANCELLED' });
      clean(watched);
    },
  );

  it('takes the keyboard alone, control after control', { timeout: 60_000 }, async () => {
    const watched = await rig.watch({ viewport: { width: 1280, height: 800 } });
    const page = await watched.context.newPage();
    await page.goto(`${rig.serveUrl}/host/`);
    await page.getByRole('heading', { name: 'Log', exact: true }).waitFor();
    const focusedName =
      "(() => { const e = document.activeElement; if (!e) return ''; if (e.id === 'app') return 'frame'; const label = e.labels && e.labels[0]; " +
      "return (e.getAttribute('aria-label') || (label && label.textContent) || e.textContent || e.value || '').trim().replace(/\\s+/g, ' '); })()";
    const order: string[] = [];
    for (let i = 0; i < 14; i++) {
      await page.keyboard.press('Tab');
      const name = String(await page.evaluate(focusedName));
      if (order.at(-1) !== name) order.push(name);
    }
    expect(order.slice(0, 7)).toEqual(['Skip to the panel', 'frame', 'Mini-app URL', 'Open', 'Sandbox user', 'New user', 'as the host app does']);

    // A user made, logged in and removed without a pointer.
    await page.getByRole('button', { name: 'New user' }).focus();
    await page.keyboard.press('Enter');
    await page
      .getByRole('status')
      .getByText(/^Made user \d+/)
      .waitFor();
    const pending = logIn(page.frameLocator('#app'));
    await page.getByRole('dialog').waitFor();
    await page.keyboard.press('Space');
    await page.getByRole('button', { name: 'Agree and continue' }).focus();
    await page.keyboard.press('Enter');
    expect(await pending).toMatchObject({ ok: true });
    const unlink = page.getByRole('button', { name: /^Unlink/ });
    await page.locator('button[data-reason="UNLINK"]:enabled').waitFor();
    await unlink.focus();
    await page.keyboard.press('Enter');
    await page.getByRole('status').getByText('Removed the connection (UNLINK); the callback answered HTTP 200.').waitFor();
    clean(watched);
  });
});

describe("the README's Vite alias", () => {
  it("gives a front end that imports appLogin from the vendor's package this one, in the host page", { timeout: 90_000 }, async () => {
    const { createServer } = await import('vite');
    const root = mkdtempSync(join(tmpdir(), 'miniapp-vite-app-'));
    mkdirSync(join(root, 'src'));
    writeFileSync(
      join(root, 'index.html'),
      '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Vite mini-app</title><link rel="icon" href="data:,">' +
        '<script type="module" src="/src/main.js"></script></head><body><button id="login" type="button">Log in</button><output id="result"></output></body></html>',
    );
    // As a mini-app written for the host app imports it.
    writeFileSync(
      join(root, 'src', 'main.js'),
      "import { appLogin } from '@apps-in-toss/web-framework';\n" +
        "const out = document.getElementById('result');\n" +
        'let n = 0;\n' +
        "document.getElementById('login').addEventListener('click', async () => {\n" +
        '  try { const { authorizationCode, referrer } = await appLogin(); out.textContent = JSON.stringify({ ok: true, referrer, codeIssued: authorizationCode.startsWith("code_") }); }\n' +
        '  catch (error) { out.textContent = JSON.stringify({ ok: false, code: error.code, message: error.message }); }\n' +
        '  out.dataset.n = String(++n);\n' +
        '});\n' +
        "out.dataset.ready = '';\n",
    );
    const vite = await createServer({
      root,
      configFile: false,
      logLevel: 'silent',
      cacheDir: join(root, '.vite'),
      server: { host: '127.0.0.1', port: 0 },
      // The README's line, with this serve's address.
      resolve: { alias: { '@apps-in-toss/web-framework': `${rig.serveUrl}/host/app-login.js` } },
    });
    try {
      await vite.listen();
      const viteUrl = vite.resolvedUrls!.local[0]!;
      const watched = await rig.watch();
      const page = await withNewUser(watched);
      await page.goto(`${rig.serveUrl}/host/?app=${encodeURIComponent(viteUrl)}`);
      const pending = logIn(page.frameLocator('#app'));
      await page.getByRole('checkbox', { name: 'Agree to all' }).check();
      await page.getByRole('button', { name: 'Agree and continue' }).click();
      expect(await pending).toEqual({ ok: true, referrer: 'SANDBOX', codeIssued: true });
      clean(watched, [rig.serveUrl, rig.appOrigin, new URL(viteUrl).origin]);
    } finally {
      await vite.close();
      rmSync(root, { recursive: true, force: true });
    }
  });
});
