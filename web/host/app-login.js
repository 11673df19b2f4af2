/**
 * appLogin() for a mini-app's front end in a desktop browser, against
 * miniapp's sandbox: the same call and result as the vendor's SDK
 * (@apps-in-toss/web-framework),
 *
 *   appLogin(): Promise<{ authorizationCode: string, referrer: 'SANDBOX' }>
 *
 * Inside the host page (/host/ of the server this module comes from) it asks
 * the host page, which shows the consent screen to a first-time user. Opened
 * on its own, it opens the host's login window instead. It rejects with an
 * AppLoginError (an Error; `code` tells the cases apart):
 *
 *   USER_CANCELLED   the user cancelled the consent screen or closed the login window
 *   NETWORK_ERROR    the host could not reach the login service
 *   NOT_IN_HOST_APP  no host app around the mini-app (the page is not inside the host page, or its login window could not open)
 *
 * The host page's panel can make appLogin() reject with each of them.
 */

/** This module's server: the host page and its login window live there. */
const HOST_ORIGIN = new URL(import.meta.url).origin;
const HOST_PAGE = new URL('./', import.meta.url).href;
/** How long a framed page waits for the host page to say it heard the call, before it concludes there is no host. */
const ACK_MS = 3000;

export class AppLoginError extends Error {
  /**
   * @param {'USER_CANCELLED' | 'NETWORK_ERROR' | 'NOT_IN_HOST_APP'} code
   * @param {string} message
   */
  constructor(code, message) {
    super(message);
    this.name = 'AppLoginError';
    this.code = code;
  }
}

/** @returns {Promise<{ authorizationCode: string, referrer: 'SANDBOX' }>} */
export function appLogin() {
  if (typeof window === 'undefined') {
    return Promise.reject(new AppLoginError('NOT_IN_HOST_APP', 'appLogin() runs in a browser page, inside the host app'));
  }
  return window.parent !== window ? inHostPage() : inLoginWindow();
}

function callId() {
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
}

/** The result message of the host, as the SDK's result or its rejection. */
function settle(data, resolve, reject) {
  if (data.error) reject(new AppLoginError(data.error.code, data.error.message));
  else resolve({ authorizationCode: data.authorizationCode, referrer: data.referrer });
}

function inHostPage() {
  return new Promise((resolve, reject) => {
    // Where the browser says which page frames this one, it must be the host page of this module's server.
    const framer = window.location.ancestorOrigins?.[0];
    if (framer !== undefined && framer !== HOST_ORIGIN) {
      reject(
        new AppLoginError(
          'NOT_IN_HOST_APP',
          `appLogin() is not running inside the host app: this page is framed by ${framer}, not by the host page ${HOST_PAGE}`,
        ),
      );
      return;
    }
    const id = callId();
    let heard = false;
    const done = () => {
      window.removeEventListener('message', listen);
      clearTimeout(timer);
    };
    const listen = (event) => {
      if (event.source !== window.parent || event.origin !== HOST_ORIGIN) return;
      const data = event.data;
      if (!data || data.id !== id) return;
      if (data.type === 'miniapp:heard') heard = true;
      if (data.type === 'miniapp:result') {
        done();
        settle(data, resolve, reject);
      }
    };
    const timer = setTimeout(() => {
      if (heard) return;
      done();
      reject(
        new AppLoginError(
          'NOT_IN_HOST_APP',
          `appLogin() is not running inside the host app: the page around this one did not answer (open the mini-app in ${HOST_PAGE})`,
        ),
      );
    }, ACK_MS);
    window.addEventListener('message', listen);
    window.parent.postMessage({ type: 'miniapp:appLogin', id }, HOST_ORIGIN);
  });
}

function inLoginWindow() {
  return new Promise((resolve, reject) => {
    const url = new URL('login', HOST_PAGE);
    url.searchParams.set('origin', window.location.origin);
    const login = window.open(url.href, 'miniapp-app-login', 'popup,width=420,height=720');
    if (!login) {
      reject(
        new AppLoginError(
          'NOT_IN_HOST_APP',
          `appLogin() is not running inside the host app, and the host's login window could not open (blocked popups?): open the mini-app in ${HOST_PAGE}`,
        ),
      );
      return;
    }
    let settled = false;
    const done = () => {
      settled = true;
      window.removeEventListener('message', listen);
      clearInterval(watch);
    };
    const listen = (event) => {
      if (event.source !== login || event.origin !== HOST_ORIGIN) return;
      const data = event.data;
      if (data?.type !== 'miniapp:result') return;
      // The window closes itself once it knows its answer arrived.
      login.postMessage({ type: 'miniapp:received' }, HOST_ORIGIN);
      done();
      settle(data, resolve, reject);
    };
    // A window closed before it answered is a cancelled login, as when the user backs out of the host's screen.
    const watch = setInterval(() => {
      if (!login.closed || settled) return;
      done();
      reject(new AppLoginError('USER_CANCELLED', 'the user closed the login window'));
    }, 250);
    window.addEventListener('message', listen);
  });
}

export default appLogin;
