/**
 * Acceptance of the host page (issue 41), in Debian's Chromium: a mini-app
 * served by the test on its own origin imports appLogin() from `miniapp
 * serve` and calls it, inside the host page (framed) and on its own (the
 * login window). A new user sees the consent screen, where a declined
 * required term keeps the button disabled; accepting gives the app a code,
 * which its own calls to serve's relay (CORS from its origin) turn into the
 * decrypted user; the second login shows no screen; WITHDRAWAL_TERMS from
 * the panel reaches `miniapp callbacks list` and the next login asks for
 * consent again; cancel, network error and no host reject with the
 * documented errors. Any console error or CSP violation fails the test, as
 * does a request beyond serve and the mini-app's server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { personFor } from '../../src/sandbox/partner/people.js';
import { elsewhere, logIn, startHostRig, type HostRig, type LoginOutcome, type Watched } from '../helpers/host-browser.js';

let rig: HostRig;
beforeAll(async () => {
  rig = await startHostRig();
}, 60_000);
afterAll(async () => rig?.close());

const ALL_TERMS = ['terms_service_required', 'terms_privacy_required', 'terms_marketing_optional'];

/** Opens the host page and makes a new (first-time) user there, the one the next appLogin() logs in. */
async function hostPage(watched: Watched): Promise<{ page: Page; userKey: number }> {
  const page = await watched.context.newPage();
  await page.goto(`${rig.serveUrl}/host/`);
  await page.getByRole('button', { name: 'New user' }).click();
  // (Not waitForFunction: its polling evaluates strings, which the page's policy refuses.)
  const made = page.getByRole('status').getByText(/^Made user \d+, a first-time user/);
  await made.waitFor();
  const userKey = Number(/^Made user (\d+)/.exec((await made.textContent()) ?? '')![1]);
  await page.locator(`#user option[value="${userKey}"]`).waitFor({ state: 'attached' });
  expect(await page.getByLabel('Sandbox user').inputValue()).toBe(String(userKey));
  return { page, userKey };
}

/** The consent screen's checkboxes and button, in `where` (the host page, or the login window). */
function consent(where: Page) {
  return {
    terms: where.getByRole('checkbox', { name: /^Terms of service/ }),
    privacy: where.getByRole('checkbox', { name: /^Collection and use of personal information/ }),
    marketing: where.getByRole('checkbox', { name: /^Marketing messages and benefits/ }),
    agree: where.getByRole('button', { name: 'Agree and continue' }),
    cancel: where.getByRole('button', { name: 'Cancel' }),
  };
}

function loggedIn(outcome: LoginOutcome, userKey: number, agreedTerms: string[]): void {
  expect(outcome).toEqual({
    ok: true,
    referrer: 'SANDBOX',
    codeIssued: true,
    status: 200,
    me: expect.objectContaining({ userKey, name: personFor(userKey).name, phone: personFor(userKey).phone, agreedTerms }),
  });
}

function rejected(outcome: LoginOutcome, code: string, message?: RegExp): void {
  expect(outcome).toMatchObject({ ok: false, isError: true, name: 'AppLoginError', code });
  if (message && !outcome.ok) expect(outcome.message).toMatch(message);
}

/** The checks every test ends with. */
function clean(watched: Watched): void {
  expect(watched.problems).toEqual([]);
  expect(elsewhere(watched.requests, [rig.serveUrl, rig.appOrigin])).toEqual([]);
}

/** Makes the panel's choice of what appLogin() answers, once the server has it. */
async function force(page: Page, label: RegExp): Promise<void> {
  await Promise.all([
    page.waitForResponse((response) => response.url().endsWith('/host/api/failure') && response.ok()),
    page.getByRole('radio', { name: label }).check(),
  ]);
}

/** Withdraws consent in the panel, and waits for the callback's answer. */
async function withdraw(page: Page): Promise<void> {
  await page.getByRole('button', { name: /^Withdraw consent/ }).click();
  await page.getByRole('status').getByText('Removed the connection (WITHDRAWAL_TERMS); the callback answered HTTP 200.').waitFor();
}

describe('appLogin() inside the host page', () => {
  it('asks a new user for consent, gives a returning one a code with no screen, and asks again after WITHDRAWAL_TERMS', { timeout: 90_000 }, async () => {
    const watched = await rig.watch();
    const { page, userKey } = await hostPage(watched);
    const app = page.frameLocator('#app');
    const screen = consent(page);
    const dialog = page.getByRole('dialog', { name: 'Log in with the host app' });

    const first = logIn(app);
    await dialog.waitFor();
    await screen.terms.check();
    await screen.marketing.check();
    // The privacy term declined: a required term, so no way on.
    expect(await screen.agree.isDisabled()).toBe(true);
    await screen.privacy.check();
    expect(await screen.agree.isDisabled()).toBe(false);
    await screen.agree.click();
    loggedIn(await first, userKey, ALL_TERMS);
    await dialog.waitFor({ state: 'hidden' });
    expect(watched.consentScreens()).toBe(1);
    await page.getByText(`${ALL_TERMS[2]}`, { exact: true }).first().waitFor();

    loggedIn(await logIn(app), userKey, ALL_TERMS);
    expect(watched.consentScreens()).toBe(1);
    await page
      .locator('#log')
      .getByText(new RegExp(`issued to ${userKey}, a returning user: no consent screen`))
      .first()
      .waitFor();

    await withdraw(page);
    expect(rig.callbacks(userKey)).toEqual([expect.objectContaining({ userKey, referrer: 'WITHDRAWAL_TERMS', method: 'POST', known: true })]);
    await page
      .locator('#log')
      .getByText(
        new RegExp(`removal callback POST ${rig.serveUrl}/api/auth/unlink-callback \\{userKey: ${userKey}, referrer: WITHDRAWAL_TERMS\\} answered HTTP 200`),
      )
      .waitFor();

    // Consent again, by keyboard: "Agree to all" has the focus; Tab goes through the screen to its button.
    const third = logIn(app);
    await dialog.waitFor();
    expect(watched.consentScreens()).toBe(2);
    expect(await page.evaluate('document.activeElement.id')).toBe('term-all');
    await page.keyboard.press('Space');
    const visited: string[] = [];
    const focused = "document.activeElement.closest('dialog') ? document.activeElement.id || document.activeElement.textContent : 'outside the dialog'";
    while (visited.length < 8 && visited.at(-1) !== 'Agree and continue') {
      await page.keyboard.press('Tab');
      visited.push(String(await page.evaluate(focused)));
    }
    expect(visited).toEqual(['term-terms_service_required', 'term-terms_privacy_required', 'term-terms_marketing_optional', 'Cancel', 'Agree and continue']);
    await page.keyboard.press('Enter');
    loggedIn(await third, userKey, ALL_TERMS);
    clean(watched);
  });

  it('rejects with USER_CANCELLED, NETWORK_ERROR and NOT_IN_HOST_APP, as the panel forces them or as they happen', { timeout: 90_000 }, async () => {
    const watched = await rig.watch();
    const { page } = await hostPage(watched);
    const app = page.frameLocator('#app');
    try {
      await force(page, /^the user cancels/);
      rejected(await logIn(app), 'USER_CANCELLED');
      await force(page, /^a network error/);
      rejected(await logIn(app), 'NETWORK_ERROR');
      await force(page, /^not in the host app/);
      rejected(await logIn(app), 'NOT_IN_HOST_APP');
    } finally {
      await force(page, /^as the host app does/);
    }
    await page
      .locator('#log')
      .getByText(/rejected with NOT_IN_HOST_APP, as the panel asks/)
      .waitFor();
    expect(watched.consentScreens()).toBe(0);

    // The user cancels the consent screen (Escape), then the Cancel button.
    const dialog = page.getByRole('dialog', { name: 'Log in with the host app' });
    let pending = logIn(app);
    await dialog.waitFor();
    await page.keyboard.press('Escape');
    rejected(await pending, 'USER_CANCELLED', /cancelled the login on the consent screen/);
    pending = logIn(app);
    await consent(page).cancel.click();
    rejected(await pending, 'USER_CANCELLED');
    expect(watched.consentScreens()).toBe(2);

    // Framed, but by a page that is not the host page.
    const other = await watched.context.newPage();
    await other.goto(`${rig.appOrigin}/framed`);
    rejected(await logIn(other.frameLocator('#app')), 'NOT_IN_HOST_APP', new RegExp(`framed by ${rig.appOrigin}, not by the host page ${rig.serveUrl}/host/`));
    clean(watched);
  });
});

describe('appLogin() outside the host page: the login window', () => {
  /** Clicks Log in on the mini-app's page; the login window it opens, and when that closes. */
  async function openLogin(watched: Watched, app: Page) {
    const opened = watched.context.waitForEvent('page').then((login) => ({ login, closed: login.waitForEvent('close') }));
    const outcome = logIn(app);
    return { ...(await opened), outcome };
  }

  it('asks a new user for consent, gives a returning one a code with no screen, and asks again after WITHDRAWAL_TERMS', { timeout: 90_000 }, async () => {
    const watched = await rig.watch();
    const { page: host, userKey } = await hostPage(watched);
    const app = await watched.context.newPage();
    await app.goto(rig.appUrl);

    let { login, closed, outcome } = await openLogin(watched, app);
    await login.getByText(`The mini-app at ${rig.appOrigin} asks you to log in.`).waitFor();
    const screen = consent(login);
    await screen.terms.check();
    expect(await screen.agree.isDisabled()).toBe(true);
    await screen.privacy.check();
    await screen.agree.click();
    loggedIn(await outcome, userKey, ALL_TERMS.slice(0, 2));
    await closed;
    expect(watched.consentScreens()).toBe(1);

    ({ closed, outcome } = await openLogin(watched, app));
    loggedIn(await outcome, userKey, ALL_TERMS.slice(0, 2));
    await closed;
    expect(watched.consentScreens()).toBe(1);

    await host.bringToFront();
    await withdraw(host);
    expect(rig.callbacks(userKey)).toEqual([expect.objectContaining({ userKey, referrer: 'WITHDRAWAL_TERMS', method: 'POST' })]);

    ({ login, closed, outcome } = await openLogin(watched, app));
    await consent(login).agree.waitFor();
    expect(watched.consentScreens()).toBe(2);
    await login.getByRole('checkbox', { name: 'Agree to all' }).check();
    await consent(login).agree.click();
    loggedIn(await outcome, userKey, ALL_TERMS);
    await closed;
    clean(watched);
  });

  it('rejects with USER_CANCELLED, NETWORK_ERROR and NOT_IN_HOST_APP, as the panel forces them or as they happen', { timeout: 90_000 }, async () => {
    const watched = await rig.watch();
    const { page: host } = await hostPage(watched);
    const app = await watched.context.newPage();
    await app.goto(rig.appUrl);
    try {
      for (const [label, code] of [
        [/^the user cancels/, 'USER_CANCELLED'],
        [/^a network error/, 'NETWORK_ERROR'],
        [/^not in the host app/, 'NOT_IN_HOST_APP'],
      ] as const) {
        await force(host, label);
        const { closed, outcome } = await openLogin(watched, app);
        rejected(await outcome, code);
        await closed;
      }
    } finally {
      await force(host, /^as the host app does/);
    }
    expect(watched.consentScreens()).toBe(0);

    // The user cancels on the consent screen; then closes the login window instead.
    let { login, closed, outcome } = await openLogin(watched, app);
    await consent(login).cancel.click();
    rejected(await outcome, 'USER_CANCELLED', /cancelled the login on the consent screen/);
    await closed;
    ({ login, closed, outcome } = await openLogin(watched, app));
    await consent(login).agree.waitFor();
    await login.close();
    rejected(await outcome, 'USER_CANCELLED', /closed the login window/);
    expect(watched.consentScreens()).toBe(2);

    // No login window at all (a browser that blocks it): no host app around the mini-app.
    await app.evaluate('window.open = () => null');
    rejected(await logIn(app), 'NOT_IN_HOST_APP', /login window could not open/);
    clean(watched);
  });
});
