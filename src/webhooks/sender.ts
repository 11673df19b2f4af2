/**
 * How a webhook request goes out: the default sender (undici, the stored
 * body as it is, no redirects followed, one time-out for the whole
 * exchange), and the short reason a failed request is logged with.
 */
export const DEFAULT_SEND_TIMEOUT_MS = 10_000;

/** `signal`, when given, cuts the request short (a dispatcher that stops past its deadline). */
export type SendWebhook = (url: string, headers: Record<string, string>, body: string, signal?: AbortSignal) => Promise<{ status: number }>;

/** The default sender: undici, the body as given, no redirects followed, `timeoutMs` for the whole exchange. */
export function undiciSender(timeoutMs = DEFAULT_SEND_TIMEOUT_MS): SendWebhook {
  return async (url, headers, body, signal) => {
    const { request } = await import('undici');
    const response = await request(url, {
      method: 'POST',
      headers,
      body: Buffer.from(body, 'utf8'),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs),
    });
    // The receiver's answer is not used; read (a bounded part of) it so the connection can be reused.
    await response.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
    return { status: response.statusCode };
  };
}

/** A short reason for a failed request, with the error code when there is one; never the body. */
export function describeSendError(error: unknown, timeoutMs: number): string {
  const chain: (Error & { code?: string })[] = [];
  let current: unknown = error;
  while (current instanceof Error && chain.length < 6) {
    chain.push(current as Error & { code?: string });
    current = (current as { cause?: unknown }).cause;
  }
  if (chain.length === 0) return String(error);
  const codes = chain.map((e) => e.code).filter((c): c is string => typeof c === 'string');
  if (chain.some((e) => e.name === 'TimeoutError') || codes.some((c) => /TIMEOUT|ETIMEDOUT/.test(c))) {
    return `no answer within ${timeoutMs / 1000} s`;
  }
  const deepest = chain.at(-1)!;
  const code = codes.at(-1);
  return code && !deepest.message.includes(code) ? `${code}: ${deepest.message}` : deepest.message || deepest.name;
}
