/**
 * The login window: what the host app shows when a mini-app that is not
 * inside the host page calls appLogin(). It logs in the user selected in
 * the host page (a new first-time user when there is none), with the
 * consent screen when the user needs one, sends the result to the page that
 * opened it (and to no other origin), and closes once that page has it.
 */
import { answerAppLogin, askConsent } from './consent.js';

const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));
const origin = new URLSearchParams(window.location.search).get('origin') ?? '';
const opener = window.opener;

function say(message) {
  $('status').textContent = message;
}

async function main() {
  if (!opener || !/^https?:\/\/[^/]+$/.test(origin)) {
    $('asker').textContent = 'This window answers appLogin() for a mini-app that is not inside the host page. Call appLogin() from your mini-app to open it.';
    return;
  }
  $('asker').textContent = `The mini-app at ${origin} asks you to log in.`;
  say('Logging in…');
  const result = await answerAppLogin({ via: 'popup', origin }, (user, terms) => {
    say('');
    return askConsent($('screen'), user, terms, origin);
  });
  window.addEventListener('message', (event) => {
    if (event.source === opener && event.origin === origin && event.data?.type === 'miniapp:received') window.close();
  });
  opener.postMessage({ type: 'miniapp:result', ...result }, origin);
  say(result.error ? `appLogin() failed: ${result.error.code}. You can close this window.` : 'Logged in. You can close this window.');
}

void main();
