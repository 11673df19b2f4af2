/**
 * Webhooks a standard receiver can verify (issue 42, item 5): beside the
 * spec's X-Webhook-Signature, every attempt carries Standard Webhooks'
 * webhook-id, webhook-timestamp and webhook-signature, the id and the
 * attempt's own time signed with the body. The receiver here is the
 * `standardwebhooks` package, given the delivery exactly as it arrived.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { Webhook } from 'standardwebhooks';
import type { RunningServe } from '../../src/server/serve.js';
import type { Store } from '../../src/store/store.js';
import { POST_CREATED } from '../../src/blog/posts.js';
import { WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { signStandard, standardSecret, verifySignature, verifyStandard } from '../../src/webhooks/signature.js';
import { startTestServe } from '../helpers/serve.js';
import { webhookDatabase, type WebhookTestDatabase } from './backend.js';

const SECRET = 'a shared secret, not base64';
const MINUTE = 60_000;

interface Verified {
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** What `new Webhook(secret).verify(body, headers)` gave back, or the message it threw. */
  payload?: unknown;
  refused?: string;
}

/** A receiver as a Standard Webhooks user writes one: the library's verify over the raw body and the headers as they came. */
class StandardReceiver {
  readonly received: Verified[] = [];
  /** Statuses answered in turn; 204 once empty. */
  readonly script: number[] = [];
  readonly #server: Server;
  url = '';

  constructor(librarySecret: string) {
    const webhook = new Webhook(librarySecret);
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const verified: Verified = { headers: req.headers, body };
        try {
          verified.payload = webhook.verify(body, req.headers as Record<string, string>);
        } catch (error) {
          verified.refused = (error as Error).message;
        }
        this.received.push(verified);
        res.writeHead(this.script.shift() ?? (verified.refused ? 400 : 204)).end();
      });
    });
  }

  async listen(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/hook`;
    return this;
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

const until = async (check: () => boolean) => {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(check()).toBe(true);
};

describe('a delivery from serve', () => {
  let receiver: StandardReceiver;
  let running: RunningServe;
  afterEach(async () => {
    await running.close();
    await receiver.close();
  });

  it("is verified unchanged by a receiver using the standardwebhooks package, and by the spec's X-Webhook-Signature", async () => {
    // The library takes the key as whsec_ and base64: the secret's bytes, as the README says.
    receiver = await new StandardReceiver(`whsec_${Buffer.from(SECRET).toString('base64')}`).listen();
    running = await startTestServe({ webhooks: { urls: [receiver.url], secret: SECRET } });
    const before = Math.floor(Date.now() / 1000);
    const response = await request(`${running.url}/api/v2/blog/posts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${running.adminToken}` },
      body: JSON.stringify({ title: 'Hooked', content: 'Body' }),
    });
    const post = await response.body.json();
    await until(() => receiver.received.length === 1);
    const after = Math.ceil(Date.now() / 1000);
    const [delivery] = receiver.received;
    expect(delivery!.refused).toBeUndefined();
    expect(delivery!.payload).toEqual({ event: 'post.created', timestamp: expect.any(String), data: post });
    const headers = delivery!.headers;
    expect(headers['webhook-id']).toBe(headers['x-webhook-delivery']);
    // The attempt's own time, in whole seconds.
    expect(Number(headers['webhook-timestamp'])).toBeGreaterThanOrEqual(before);
    expect(Number(headers['webhook-timestamp'])).toBeLessThanOrEqual(after);
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(verifySignature(delivery!.body, SECRET, String(headers['x-webhook-signature']))).toBe(true);
    expect(headers['x-webhook-event']).toBe('post.created');
  });

  it("is verified by a receiver given serve's secret unchanged when it is in the libraries' own form (whsec_ and base64)", async () => {
    const librarySecret = `whsec_${Buffer.from('0123456789abcdef0123456789abcdef').toString('base64')}`;
    receiver = await new StandardReceiver(librarySecret).listen();
    running = await startTestServe({ webhooks: { urls: [receiver.url], secret: librarySecret } });
    await request(`${running.url}/api/v2/blog/posts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${running.adminToken}` },
      body: JSON.stringify({ title: 'Hooked', content: 'Body' }),
    });
    await until(() => receiver.received.length === 1);
    expect(receiver.received[0]!.refused).toBeUndefined();
    expect(standardSecret(librarySecret)).toBe(librarySecret);
  });
});

describe('the attempts of one delivery', () => {
  let database: WebhookTestDatabase;
  let store: Store;
  let receiver: StandardReceiver;
  let dispatcher: WebhookDispatcher | undefined;
  beforeEach(async () => {
    database = await webhookDatabase('sqlite');
    store = await database.open();
    receiver = await new StandardReceiver(standardSecret(SECRET)).listen();
  });
  afterEach(async () => {
    await dispatcher?.stop();
    dispatcher = undefined;
    await receiver.close();
    await database.dispose();
  });

  it('are each signed with their own time and the delivery id: the retry 30 minutes on passes a 5-minute window', async () => {
    // The schedule runs on an injected clock whose last attempt (36 minutes after the first) falls on the real now,
    // the time the library judges freshness by.
    const t0 = Date.now() - 36 * MINUTE;
    let now = t0;
    dispatcher = new WebhookDispatcher({ store, secret: SECRET, now: () => new Date(now), version: 'test' });
    receiver.script.push(500, 500, 500, 204);
    const [id] = await dispatcher.outbox.enqueue(POST_CREATED, { id: 7, title: 'Late' }, [receiver.url]);
    const key = (await dispatcher.outbox.get(id!))!.key!;
    for (const at of [0, 1, 6, 36]) {
      now = t0 + at * MINUTE;
      expect(await dispatcher.runDue()).toBe(1);
    }
    expect((await dispatcher.outbox.get(id!))!.state).toBe('delivered');
    const attempts = receiver.received;
    expect(attempts.map((a) => Number(a.headers['webhook-timestamp']))).toEqual([0, 1, 6, 36].map((at) => Math.floor((t0 + at * MINUTE) / 1000)));
    expect(new Set(attempts.map((a) => a.headers['webhook-id']))).toEqual(new Set([key]));
    expect(new Set(attempts.map((a) => a.headers['webhook-signature'])).size).toBe(4);
    // The body, and so the spec's signature of it, is the same bytes on every attempt; its own timestamp is the first's.
    expect(new Set(attempts.map((a) => a.body.toString('base64'))).size).toBe(1);
    expect(new Set(attempts.map((a) => a.headers['x-webhook-signature'])).size).toBe(1);
    expect(attempts.slice(0, 3).map((a) => a.refused)).toEqual(['Message timestamp too old', 'Message timestamp too old', 'Message timestamp too old']);
    expect(attempts[3]!.refused).toBeUndefined();
    expect(attempts[3]!.payload).toEqual({ event: POST_CREATED, timestamp: new Date(t0).toISOString(), data: { id: 7, title: 'Late' } });
  });

  it("of a resend carry the same webhook-id, signed anew with the resend's time", async () => {
    let now = Date.now() - 2 * MINUTE;
    dispatcher = new WebhookDispatcher({ store, secret: SECRET, now: () => new Date(now), version: 'test' });
    const [id] = await dispatcher.outbox.enqueue(POST_CREATED, { id: 8 }, [receiver.url]);
    await dispatcher.runDue();
    now = Date.now();
    await dispatcher.outbox.resend([id!]);
    await dispatcher.runDue();
    const [first, again] = receiver.received;
    expect(again!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(Number(again!.headers['webhook-timestamp']) - Number(first!.headers['webhook-timestamp'])).toBe(120);
    expect([first!.refused, again!.refused]).toEqual([undefined, undefined]);
  });
});

describe('the Standard Webhooks signature', () => {
  it('is what the library signs, and is checked by verifyStandard against id, timestamp and body', () => {
    const body = Buffer.from('{"event":"post.created"}');
    const signature = signStandard('msg_1', 1_700_000_000, body, SECRET);
    expect(signature).toBe(new Webhook(standardSecret(SECRET)).sign('msg_1', new Date(1_700_000_000_000), body));
    expect(verifyStandard(body, SECRET, 'msg_1', '1700000000', `v1,${'A'.repeat(43)}= ${signature}`)).toBe(true);
    expect(verifyStandard(body, SECRET, 'msg_2', '1700000000', signature)).toBe(false);
    expect(verifyStandard(body, SECRET, 'msg_1', '1700000001', signature)).toBe(false);
    expect(verifyStandard(Buffer.from('{"event":"post.created"} '), SECRET, 'msg_1', '1700000000', signature)).toBe(false);
    expect(verifyStandard(body, 'another secret', 'msg_1', '1700000000', signature)).toBe(false);
    expect(verifyStandard(body, SECRET, 'msg_1', 'soon', signature)).toBe(false);
  });

  it('refuses a whsec_ secret that is not base64 when the dispatcher is made', async () => {
    const database = await webhookDatabase('sqlite');
    const store = await database.open();
    try {
      expect(() => new WebhookDispatcher({ store, secret: 'whsec_not base64!', now: () => new Date(), version: 'test' })).toThrow(
        /starts with whsec_.*the rest is not base64/,
      );
    } finally {
      await database.dispose();
    }
  });
});
