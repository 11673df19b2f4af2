/**
 * The partner sandbox's consent (spec 000, "Flow" step 1): a first-time
 * user agrees to the terms, every required one; the tags agreed to come
 * back in login-me's agreedTerms; a returning user gets a code with no
 * consent; removing the connection removes the consent. And the journal
 * the host page shows.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { buildSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { PartnerState, REQUIRED_TERMS } from '../../src/sandbox/partner/state.js';
import { SandboxClock } from '../../src/sandbox/clock.js';
import { checkTerms, DEFAULT_TERMS, parseTerm } from '../../src/sandbox/partner/terms.js';
import { decryptUserInfo } from '../../src/login/user-info.js';
import { Journal } from '../../src/sandbox/partner/journal.js';
import { AAD, KEY } from '../helpers/vectors.js';

const P = '/api-partner/v1/miniapp/user/oauth2';
let sandbox: Sandbox | undefined;
afterEach(async () => {
  await sandbox?.app.close();
  sandbox = undefined;
});

async function agreedTermsOf(app: Sandbox, code: string): Promise<string[]> {
  const token = await app.app.inject({ method: 'POST', url: `${P}/generate-token`, payload: { authorizationCode: code, referrer: 'SANDBOX' } });
  expect(token.statusCode).toBe(200);
  const me = await app.app.inject({ method: 'GET', url: `${P}/login-me`, headers: { authorization: `Bearer ${token.json().success.accessToken}` } });
  expect(me.statusCode).toBe(200);
  return decryptUserInfo(me.json().success, KEY, AAD).user.agreedTerms as string[];
}

describe('consent in the partner sandbox', () => {
  it('gives a first-time user the terms agreed to, every required one and the optional ones chosen, in login-me', async () => {
    sandbox = await buildSandbox({ key: KEY, aad: AAD });
    const user = sandbox.state.createUser();
    expect(user.userKey).toBe(1001);
    expect(sandbox.state.needsConsent(1001)).toBe(true);
    const issued = sandbox.state.login(1001, ['terms_marketing_optional', 'terms_privacy_required', 'terms_service_required']);
    // In the terms' order, whatever order they came in.
    expect(issued.consented).toEqual(['terms_service_required', 'terms_privacy_required', 'terms_marketing_optional']);
    expect(await agreedTermsOf(sandbox, issued.authorizationCode)).toEqual(['terms_service_required', 'terms_privacy_required', 'terms_marketing_optional']);
  });

  it('refuses a consent without every required term, or with a tag the screen did not show', () => {
    const state = new PartnerState(new SandboxClock());
    state.createUser(7);
    expect(() => state.login(7, ['terms_service_required'])).toThrow(/REQUIRED_TERMS_MISSING: .*missing terms_privacy_required/);
    expect(() => state.login(7, [...REQUIRED_TERMS, 'terms_third_party'])).toThrow(/UNKNOWN_TERMS: no such terms tag: terms_third_party/);
    expect(() => state.login(7, 'terms_service_required')).toThrow(/agreedTerms must be an array/);
    // Nothing was agreed to by the refusals.
    expect(state.needsConsent(7)).toBe(true);
    expect(state.user(7)!.agreedTerms).toEqual([]);
  });

  it('gives a returning user a code with no consent, its terms unchanged', () => {
    const state = new PartnerState(new SandboxClock());
    expect(state.login(5, REQUIRED_TERMS).consented).toEqual(REQUIRED_TERMS);
    const again = state.login(5, ['terms_service_required', 'terms_privacy_required', 'terms_marketing_optional']);
    expect(again.consented).toBeUndefined();
    expect(state.user(5)!.agreedTerms).toEqual(REQUIRED_TERMS);
  });

  it('asks for consent again once the connection is removed (a withdrawal, an unlink, a removal by the backend)', async () => {
    sandbox = await buildSandbox({ key: KEY, aad: AAD });
    const code = (await sandbox.app.inject({ method: 'POST', url: '/__sandbox/login', payload: { userKey: 1001 } })).json();
    // `miniapp sandbox login` plays a first-time user who agrees to the required terms, and says nothing more.
    expect(Object.keys(code).sort()).toEqual(['authorizationCode', 'expiresAt', 'referrer']);
    expect(await agreedTermsOf(sandbox, code.authorizationCode)).toEqual(REQUIRED_TERMS);
    expect(sandbox.state.needsConsent(1001)).toBe(false);
    const unlink = await sandbox.app.inject({ method: 'POST', url: '/__sandbox/unlink', payload: { userKey: 1001, reason: 'WITHDRAWAL_TERMS' } });
    expect(unlink.json()).toEqual({ userKey: 1001, reason: 'WITHDRAWAL_TERMS', callback: null });
    expect(sandbox.state.needsConsent(1001)).toBe(true);
    expect(sandbox.state.user(1001)!.agreedTerms).toEqual([]);
    expect(sandbox.state.login(1001, ['terms_service_required', 'terms_privacy_required', 'terms_marketing_optional']).consented).toHaveLength(3);
  });

  it('takes the terms it is given instead of the defaults', async () => {
    const terms = [parseTerm('tos=이용약관', true, '--required-term'), parseTerm('news=News letters', false, '--optional-term')];
    sandbox = await buildSandbox({ key: KEY, aad: AAD, terms });
    expect(sandbox.state.terms).toEqual([
      { tag: 'tos', title: '이용약관', required: true },
      { tag: 'news', title: 'News letters', required: false },
    ]);
    expect(() => sandbox!.state.login(1, [])).toThrow(/missing tos/);
    expect(await agreedTermsOf(sandbox, sandbox.state.login(1).authorizationCode)).toEqual(['tos']);
  });

  it('makes users at the next free userKey, and refuses one that exists', () => {
    const state = new PartnerState(new SandboxClock());
    state.login(1001);
    expect(state.createUser().userKey).toBe(1002);
    expect(() => state.createUser(1001)).toThrow(/USER_EXISTS: userKey 1001 is already a sandbox user/);
    expect(() => state.createUser(-1)).toThrow(/non-negative integer/);
    expect(state.users().map((user) => [user.userKey, state.isConnected(user.userKey)])).toEqual([
      [1001, true],
      [1002, false],
    ]);
  });
});

describe('terms flags', () => {
  it('read TAG=TITLE and refuse what the console would not take', () => {
    expect(parseTerm(' terms.v2-ko = 서비스 이용약관 ', true, '--required-term')).toEqual({ tag: 'terms.v2-ko', title: '서비스 이용약관', required: true });
    expect(() => parseTerm('no title', true, '--required-term')).toThrow(/--required-term must be TAG=TITLE/);
    expect(() => parseTerm('tag=', false, '--optional-term')).toThrow(/--optional-term tag: the title after "=" must be 1 to 200 printable characters/);
    expect(() => parseTerm('tag=a\u0007b', false, '--optional-term')).toThrow(/printable/);
    expect(() => checkTerms([])).toThrow(/at least one term/);
    expect(() => checkTerms([DEFAULT_TERMS[0]!, { ...DEFAULT_TERMS[0]!, required: false }])).toThrow(/terms_service_required is given twice/);
  });
});

describe('the journal', () => {
  it('records codes issued and exchanged, refusals and removals, with codes shortened, never whole', async () => {
    sandbox = await buildSandbox({ key: KEY, aad: AAD });
    const { authorizationCode } = sandbox.state.login(1001);
    await agreedTermsOf(sandbox, authorizationCode);
    await sandbox.app.inject({ method: 'POST', url: `${P}/generate-token`, payload: { authorizationCode, referrer: 'sandbox' } });
    await sandbox.app.inject({ method: 'POST', url: '/__sandbox/unlink', payload: { userKey: 1001, reason: 'UNLINK' } });
    const entries = sandbox.state.journal.since(0);
    expect(entries.map((entry) => [entry.kind, entry.ok])).toEqual([
      ['user-created', true],
      ['code-issued', true],
      ['code-exchanged', true],
      ['user-info-read', true],
      ['exchange-refused', false],
      ['connection-removed', true],
      ['callback', false],
    ]);
    expect(entries[4]!.text).toContain('already used or revoked');
    expect(entries[6]!.text).toContain('no callback URL is configured');
    for (const entry of entries) expect(entry.text).not.toContain(authorizationCode);
    expect(entries[1]!.text).toContain(authorizationCode.slice(0, 9));
    expect(sandbox.state.journal.since(entries[5]!.seq).map((entry) => entry.kind)).toEqual(['callback']);
  });

  it('keeps the most recent entries only', () => {
    const journal = new Journal(() => 0, 3);
    for (let i = 1; i <= 5; i++) journal.add('user-created', i, `user ${i}`);
    expect(journal.since(0).map((entry) => entry.seq)).toEqual([3, 4, 5]);
    expect(journal.last).toBe(5);
  });
});
