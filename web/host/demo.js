/**
 * The built-in demo mini-app: what a mini-app's front end does with
 * appLogin() (this server's module, as a front end imports it in
 * development), its own relay calls and their errors.
 */
import { appLogin } from './app-login.js';

const result = /** @type {HTMLOutputElement} */ (document.getElementById('result'));
const button = /** @type {HTMLButtonElement} */ (document.getElementById('login'));

async function relay(path, init) {
  const response = await fetch(`/api/auth/${path}`, init);
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const error = new Error(body?.error ?? `HTTP ${response.status}`);
    error.status = response.status;
    throw error;
  }
  return body;
}

button.addEventListener('click', async () => {
  button.disabled = true;
  result.textContent = 'Logging in…';
  try {
    const { authorizationCode, referrer } = await appLogin();
    let tokens;
    try {
      tokens = await relay('token', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ authorizationCode, referrer }) });
    } catch (error) {
      // The standalone sandbox has no relay: the code is for the developer's own backend.
      result.textContent =
        error.status === 404
          ? `appLogin() gave a code (referrer ${referrer}). No relay answers here: exchange it at your backend.`
          : `The relay refused the code: ${error.message}`;
      return;
    }
    const me = await relay('me', { headers: { authorization: `Bearer ${tokens.accessToken}` } });
    result.textContent = `Logged in as ${me.name} (userKey ${me.userKey}), referrer ${referrer}.`;
  } catch (error) {
    result.textContent = error.code ? `appLogin() failed: ${error.code}: ${error.message}` : `Failed: ${error.message}`;
  } finally {
    button.disabled = false;
  }
});
