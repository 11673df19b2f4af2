/**
 * A JSON POST from a chosen local address (127.0.0.2 is a second client of
 * the same machine): node:http, whose `localAddress` is honoured (undici's
 * is not). For the tests of limits counted per client address.
 */
import { request as httpRequest } from 'node:http';

export interface PostAnswer {
  status: number;
  retryAfter: string | undefined;
  body: Record<string, unknown>;
}

/** The other client address of the tests. */
export const FROM_B = '127.0.0.2';

export function postFrom(url: string, body: unknown, from?: string): Promise<PostAnswer> {
  return new Promise((resolve, reject) => {
    const sent = httpRequest(url, { method: 'POST', headers: { 'content-type': 'application/json' }, ...(from ? { localAddress: from } : {}) }, (response) => {
      let text = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      response.on('end', () => {
        const retryAfter = response.headers['retry-after'];
        try {
          resolve({ status: response.statusCode!, retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter, body: JSON.parse(text) });
        } catch (error) {
          reject(error);
        }
      });
    });
    sent.on('error', reject);
    sent.end(JSON.stringify(body));
  });
}

/** A clock the test moves. */
export function testClock(start = '2026-11-25T12:00:00.000Z') {
  let now = Date.parse(start);
  return {
    now: () => new Date(now),
    advance: (ms: number) => {
      now += ms;
    },
  };
}
