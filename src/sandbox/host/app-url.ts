/**
 * The mini-app the host page shows: an absolute http(s) URL the developer
 * gives (their dev server, e.g. http://127.0.0.1:5173/), with no
 * credentials in it. Its origin is what the page lets its frame load (CSP
 * frame-src) and what the frame's appLogin() messages must come from.
 */

/** The URL as given, checked; throws an Error whose message names `what`. */
export function checkAppUrl(text: string, what = '--app-url'): URL {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.username || url.password) {
    throw new Error(`${what} must be an absolute http or https URL of the mini-app, such as http://127.0.0.1:5173/; got "${text}"`);
  }
  return url;
}
