/**
 * post.created from the blog API to a real receiver, through `serve`'s
 * outbox: created published, or first published by an update; signed.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { verifySignature } from '../../src/webhooks/signature.js';

const SECRET = 'whsec-test-0123456789';
let receiver: WebhookReceiver;
let received: WebhookReceiver['received'];
let running: RunningServe;

beforeEach(async () => {
  receiver = await startWebhookReceiver();
  received = receiver.received;
  running = await startTestServe({ webhooks: { urls: [receiver.url], secret: SECRET } });
});
afterEach(async () => {
  await running.close();
  await receiver.close();
});

async function json(method: string, path: string, body: unknown, token = running.adminToken) {
  const res = await request(`${running.url}${path}`, {
    method: method as 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  return (await res.body.json()) as any;
}

const until = async (check: () => boolean) => {
  for (let i = 0; i < 300 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(check()).toBe(true);
};

describe('post.created webhook', () => {
  it('is sent, signed over the exact body, when a post is created', async () => {
    const post = await json('POST', '/api/v2/blog/posts', { title: 'Hooked', content: 'Body', tags: ['x'] });
    await until(() => received.length === 1);
    const [delivery] = received;
    expect(delivery!.headers['x-webhook-event']).toBe('post.created');
    expect(verifySignature(delivery!.body, SECRET, String(delivery!.headers['x-webhook-signature']))).toBe(true);
    expect(verifySignature(delivery!.body, 'other-secret', String(delivery!.headers['x-webhook-signature']))).toBe(false);
    const payload = JSON.parse(delivery!.body);
    expect(payload).toEqual({ event: 'post.created', timestamp: expect.any(String), data: post });
  });

  it('is sent once when a draft is first published, not on later edits', async () => {
    const post = await json('POST', '/api/v2/blog/posts', { title: 'Draft', content: 'Body' });
    await until(() => received.length === 1);
    await json('PATCH', `/api/v2/blog/posts/${post.id}`, { is_published: false });
    await json('PATCH', `/api/v2/blog/posts/${post.id}`, { is_published: true });
    await json('PATCH', `/api/v2/blog/posts/${post.id}`, { title: 'Draft, edited' });
    await new Promise((r) => setTimeout(r, 200));
    expect(received).toHaveLength(1);
  });

  it('is not sent for a post created as a draft (is_published false) until it is first published', async () => {
    const draft = await json('POST', '/api/v2/blog/posts', { title: 'Draft at once', content: 'Body', is_published: false });
    expect(draft.is_published).toBe(false);
    const published = await json('POST', '/api/v2/blog/posts', { title: 'Published', content: 'Body' });
    await until(() => received.length === 1);
    expect(JSON.parse(received[0]!.body).data.id).toBe(published.id);
    await json('PATCH', `/api/v2/blog/posts/${draft.id}`, { is_published: true });
    await until(() => received.length === 2);
    expect(JSON.parse(received[1]!.body).data).toMatchObject({ id: draft.id, is_published: true });
  });
});
