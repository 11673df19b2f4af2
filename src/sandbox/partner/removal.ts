/**
 * A user removes the login connection (spec 000, "Events": unlinks the
 * app, withdraws consent to the terms, or leaves the platform): the
 * connection and its consent go, the user's tokens are retired, and the
 * removal callback goes to the configured URL with the reason as its
 * `referrer`. Played by `miniapp sandbox unlink` and by the host page.
 */
import { sendUnlinkCallback, type CallbackResult, type CallbackTarget } from './callback.js';
import type { PartnerState } from './state.js';
import { redactUrl } from '../../url-redaction.js';

export interface Removal {
  userKey: number;
  reason: string;
  /** The callback's answer; null when no callback URL is configured. */
  callback: CallbackResult | null;
}

export async function removeConnection(state: PartnerState, target: CallbackTarget | undefined, userKey: number, reason: string): Promise<Removal> {
  state.disconnect(userKey, `removed by the user (${reason})`);
  if (!target) {
    state.journal.add('callback', userKey, `no removal callback sent for ${userKey} (${reason}): no callback URL is configured`, false);
    return { userKey, reason, callback: null };
  }
  const callback = await sendUnlinkCallback(target, { userKey, referrer: reason });
  const ok = callback.error === undefined && callback.status !== undefined && callback.status < 300;
  const outcome = callback.error ? `failed: ${callback.error}` : `answered HTTP ${callback.status}`;
  // The URL as a log may keep it: a query or a password in it is not for the page.
  state.journal.add(
    'callback',
    userKey,
    `removal callback ${target.method} ${redactUrl(target.url)} {userKey: ${userKey}, referrer: ${reason}} ${outcome}`,
    ok,
  );
  return { userKey, reason, callback };
}
