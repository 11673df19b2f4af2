/**
 * Calls of the host's pages to their server's API (/host/api/), same origin
 * only. A failed call throws an ApiError: `status` 0 when the server could
 * not be reached at all.
 */

export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   */
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

/** The pages live at /host/, /host/login and /host/demo: the API is /host/api/ from each of them. */
const BASE = new URL('api/', new URL('./', import.meta.url)).href;

/**
 * GET `path`, or POST `body` as JSON to it.
 * @param {string} path
 * @param {unknown} [body]
 */
export async function api(path, body) {
  let response;
  try {
    response = await fetch(
      BASE + path,
      body === undefined
        ? { headers: { accept: 'application/json' } }
        : { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(body) },
    );
  } catch {
    throw new ApiError(0, 'NETWORK_ERROR', 'the server of the host page cannot be reached');
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    throw new ApiError(response.status, data?.code ?? `HTTP_${response.status}`, data?.error ?? `the server answered HTTP ${response.status}`);
  }
  return data;
}
