/**
 * Sends the removal callback the way the console configures it (spec 000,
 * "Removal callback"): POST with a JSON body or GET with query parameters,
 * with an optional Basic-Auth header given as `id:password`.
 */

export interface CallbackTarget {
  url: string;
  method: 'POST' | 'GET';
  /** `id:password`, as entered in the console. */
  basicAuth?: string | undefined;
}

export interface CallbackResult {
  url: string;
  method: 'POST' | 'GET';
  status?: number;
  error?: string;
}

export async function sendUnlinkCallback(target: CallbackTarget, event: { userKey: number; referrer: string }, timeoutMs = 5_000): Promise<CallbackResult> {
  const headers: Record<string, string> = {};
  if (target.basicAuth) headers.authorization = `Basic ${Buffer.from(target.basicAuth).toString('base64')}`;
  const url = new URL(target.url);
  let payload: string | undefined;
  if (target.method === 'GET') {
    url.searchParams.set('userKey', String(event.userKey));
    url.searchParams.set('referrer', event.referrer);
  } else {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(event);
  }
  try {
    // undici on first use: the embedded sandbox starts with every serve, and most never send a callback.
    const { request } = await import('undici');
    const response = await request(url, {
      method: target.method,
      headers,
      body: payload,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    await response.body.dump();
    return { url: target.url, method: target.method, status: response.statusCode };
  } catch (error) {
    return { url: target.url, method: target.method, error: (error as Error).message };
  }
}
