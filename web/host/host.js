/**
 * The host page: the mini-app in the phone frame, its appLogin() calls
 * answered (the consent screen over the phone for a first-time user), and
 * the panel over the sandbox's state, polled from the server while the page
 * is visible.
 */
import { api } from './api.js';
import { answerAppLogin, askConsent } from './consent.js';

const POLL_MS = 1000;

const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));
const frame = /** @type {HTMLIFrameElement} */ ($('app'));
const sheet = /** @type {HTMLDialogElement} */ ($('consent'));
const userSelect = /** @type {HTMLSelectElement} */ ($('user'));
const appInput = /** @type {HTMLInputElement} */ ($('app-url'));

let last = 0;
let view = { users: [], selected: null, failure: 'none', callback: null, appUrl: null };
let usersShown = '';
let started = false;
/** The mini-app's origin: only its frame's appLogin() calls are answered. */
let appOrigin = null;

function say(message) {
  $('status').textContent = message;
}

/** The URL the frame shows: ?app=, else the one serve was started with, else the demo. */
function showApp(configured) {
  const given = new URLSearchParams(window.location.search).get('app');
  const url = given || configured || new URL('demo', window.location.href).href;
  appInput.value = given || configured || '';
  $('app-note').textContent =
    given || configured
      ? 'appLogin() calls from this page are answered here. Pages it opens on other origins are not.'
      : 'Showing the built-in demo. Give the URL of your mini-app (its dev server) to show it instead.';
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
    $('frame-problem').textContent = `${url} is not an http or https URL: give the mini-app's URL, such as http://127.0.0.1:5173/`;
    $('frame-problem').hidden = false;
    return;
  }
  appOrigin = parsed.origin;
  $('phone-origin').textContent = parsed.host;
  // A mini-app of another origin may not navigate the host page away; the demo is this server's own page.
  if (appOrigin !== window.location.origin) frame.sandbox.value = 'allow-scripts allow-same-origin allow-forms allow-popups allow-modals allow-downloads';
  frame.src = parsed.href;
}

function renderUsers() {
  const shown = JSON.stringify([view.users.map((u) => [u.userKey, u.name, u.connected]), view.selected]);
  if (shown !== usersShown) {
    usersShown = shown;
    const options = view.users.map((user) => {
      const option = document.createElement('option');
      option.value = String(user.userKey);
      option.textContent = `${user.userKey} ${user.name} (${user.connected ? 'returning' : 'first-time'})`;
      return option;
    });
    if (options.length === 0) {
      const none = document.createElement('option');
      none.value = '';
      none.textContent = 'none yet: the first login makes one';
      options.push(none);
    }
    userSelect.replaceChildren(...options);
    userSelect.value = view.selected === null ? '' : String(view.selected);
  }
  const user = view.users.find((u) => u.userKey === view.selected);
  $('connection').textContent = !user
    ? 'no user selected'
    : user.connected
      ? 'connected: the next login gets a code with no screen'
      : 'none: the next login shows the consent screen';
  const agreed = $('agreed');
  if (!user || user.agreedTerms.length === 0) {
    agreed.textContent = 'none';
  } else {
    const list = document.createElement('ul');
    for (const tag of user.agreedTerms) {
      const item = document.createElement('li');
      const code = document.createElement('code');
      code.textContent = tag;
      const term = view.terms?.find((t) => t.tag === tag);
      item.append(code, term ? ` ${term.title}` : '');
      list.append(item);
    }
    agreed.replaceChildren(list);
  }
  for (const button of $('removals').querySelectorAll('button')) {
    /** @type {HTMLButtonElement} */ (button).disabled = !user?.connected;
  }
}

function renderCallback() {
  $('callback').textContent = view.callback
    ? `Removes the login connection of the selected user and sends the removal callback: ${view.callback.method} ${view.callback.url}`
    : 'Removes the login connection of the selected user. No callback URL is configured, so no callback is sent (miniapp sandbox --callback-url).';
}

function renderFailure() {
  for (const radio of document.querySelectorAll('input[name="failure"]')) {
    /** @type {HTMLInputElement} */ (radio).checked = /** @type {HTMLInputElement} */ (radio).value === view.failure;
  }
}

function appendEvents(events) {
  const log = $('log');
  for (const event of events) {
    const item = document.createElement('li');
    item.className = event.ok ? 'ok' : 'failed';
    item.dataset.kind = event.kind;
    const time = document.createElement('time');
    time.dateTime = event.at;
    time.textContent = event.at.slice(11, 19);
    const text = document.createElement('span');
    text.textContent = event.text;
    item.append(time, text);
    log.prepend(item);
  }
  while (log.children.length > 200) log.lastElementChild?.remove();
}

async function refresh() {
  try {
    let state = await api(`state?after=${last}`);
    if (state.last < last) {
      // A server started again since: its log starts over.
      $('log').replaceChildren();
      last = 0;
      state = await api('state?after=0');
    }
    view = state;
    last = state.last;
    renderUsers();
    renderCallback();
    if (!started) {
      started = true;
      renderFailure();
      showApp(state.appUrl);
    }
    appendEvents(state.events);
    if ($('status').dataset.offline) {
      delete $('status').dataset.offline;
      say('');
    }
  } catch (error) {
    $('status').dataset.offline = 'yes';
    say(`The host page's server cannot be reached (${error.message}). Is miniapp still running?`);
  }
}

/** Runs `action`, says what it returns (or why it was refused) in the status line, then refreshes. */
async function act(action) {
  try {
    say((await action()) ?? '');
  } catch (error) {
    say(error.message);
  }
  await refresh();
}

$('app-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const value = appInput.value.trim();
  const next = new URL(window.location.href);
  if (value) next.searchParams.set('app', value);
  else next.searchParams.delete('app');
  // The page's policy names the one origin it may frame, so another mini-app is another load of the page.
  window.location.assign(next.href);
});

userSelect.addEventListener('change', () => {
  if (userSelect.value !== '') void act(async () => void (await api('select', { userKey: Number(userSelect.value) })));
});
$('new-user').addEventListener(
  'click',
  () => void act(async () => `Made user ${(await api('users', {})).userKey}, a first-time user: the next login shows the consent screen.`),
);
for (const button of $('removals').querySelectorAll('button')) {
  button.addEventListener('click', () => {
    const reason = /** @type {HTMLElement} */ (button).dataset.reason;
    void act(async () => {
      const removal = await api('remove', { userKey: view.selected, reason });
      const callback = removal.callback;
      return callback === null
        ? `Removed the connection (${reason}); no callback URL is configured.`
        : callback.error
          ? `Removed the connection (${reason}); the callback failed: ${callback.error}`
          : `Removed the connection (${reason}); the callback answered HTTP ${callback.status}.`;
    });
  });
}
$('failure').addEventListener('change', (event) => {
  const radio = /** @type {HTMLInputElement} */ (event.target);
  void act(async () => void (await api('failure', { failure: radio.value })));
});

/** One appLogin() at a time: a second call waits for the first's screen to close. */
let queue = Promise.resolve();

function showConsent(user, terms) {
  frame.inert = true;
  sheet.show();
  return askConsent(sheet, user, terms, appOrigin ?? '').finally(() => {
    sheet.close();
    frame.inert = false;
    frame.focus();
  });
}

window.addEventListener('message', (event) => {
  if (event.source !== frame.contentWindow || event.origin !== appOrigin) return;
  const data = event.data;
  if (data?.type !== 'miniapp:appLogin' || typeof data.id !== 'string') return;
  const target = /** @type {Window} */ (event.source);
  const origin = event.origin;
  target.postMessage({ type: 'miniapp:heard', id: data.id }, origin);
  queue = queue.then(async () => {
    const result = await answerAppLogin({ via: 'frame', origin }, showConsent);
    target.postMessage({ type: 'miniapp:result', id: data.id, ...result }, origin);
    await refresh();
  });
});

void refresh();
setInterval(() => {
  if (document.visibilityState === 'visible') void refresh();
}, POLL_MS);
