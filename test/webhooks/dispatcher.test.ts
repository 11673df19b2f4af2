/**
 * The dispatcher on both backends, one suite, against a real receiving
 * server on 127.0.0.1:0 that checks each signature with verifySignature,
 * and an injected clock: delivery, retries 1, 5 and 30 minutes apart,
 * failure after the fourth attempt, a restart in the middle of the schedule,
 * several dispatchers on one database, and the wake-ups through the store.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Store } from '../../src/store/store.js';
import { POST_CREATED } from '../../src/blog/posts.js';
import { SENDER_TTL_MS, WebhookOutbox } from '../../src/webhooks/outbox.js';
import { signBody, verifySignature } from '../../src/webhooks/signature.js';
import { type DispatcherOptions, type Timers, WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { BACKENDS } from '../helpers/postgres.js';
import { webhookDatabase, type WebhookTestDatabase } from './backend.js';

const SECRET = 'receiver-shared-secret';
const VERSION = '1.2.3';
const T0 = new Date('2026-11-21T12:00:00.000Z');
const MINUTE = 60_000;
const POST = {
  id: 42,
  title: 'Launch day',
  content: 'We shipped — finally. 🚀',
  author: 'alice',
  created_at: T0.toISOString(),
  updated_at: T0.toISOString(),
  tags: ['news'],
  is_published: true,
};

interface Received {
  /** The injected clock's time when the request arrived. */
  at: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** What the receiver concluded from X-Webhook-Signature. */
  valid: boolean;
}

/** What a test receiver does with one request: answer a status, never answer, or drop the connection. */
type Behaviour = number | 'hang' | 'drop' | { status: number; delayMs: number } | { status: number; after: Promise<unknown> };

class Receiver {
  readonly received: Received[] = [];
  /** Consumed one per request; `fallback` once empty. */
  readonly script: Behaviour[] = [];
  fallback: Behaviour = 200;
  readonly #server: Server;
  readonly #hanging = new Set<ServerResponse>();
  url = '';

  constructor(private readonly clock: () => Date) {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const signature = req.headers['x-webhook-signature'];
        this.received.push({
          at: this.clock().toISOString(),
          path: req.url ?? '',
          headers: req.headers,
          body,
          valid: typeof signature === 'string' && verifySignature(body, SECRET, signature),
        });
        const behaviour = this.script.shift() ?? this.fallback;
        if (behaviour === 'hang') {
          this.#hanging.add(res);
        } else if (behaviour === 'drop') {
          req.socket.destroy();
        } else if (typeof behaviour === 'number') {
          res.writeHead(behaviour, behaviour >= 300 && behaviour < 400 ? { location: '/elsewhere' } : {}).end('ok');
        } else {
          const answer = () => res.writeHead(behaviour.status).end();
          if ('after' in behaviour) void behaviour.after.then(answer);
          else setTimeout(answer, behaviour.delayMs);
        }
      });
    });
  }

  async listen(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/hooks/blog`;
    return this;
  }

  async close(): Promise<void> {
    for (const res of this.#hanging) res.socket?.destroy();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/** A port where nothing listens: bound, then released. */
async function deadUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}/gone`;
}

async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe.each(BACKENDS)('the dispatcher on %s', (backend) => {
  let now: Date;
  const clock = () => new Date(now.getTime());
  const at = (ms: number) => new Date(T0.getTime() + ms);
  let receiver: Receiver;
  let database: WebhookTestDatabase;
  let store: Store;
  const dispatchers: WebhookDispatcher[] = [];

  function dispatcher(options: Partial<DispatcherOptions> = {}): WebhookDispatcher {
    const made = new WebhookDispatcher({ store, secret: SECRET, now: clock, version: VERSION, ...options });
    dispatchers.push(made);
    return made;
  }

  /** Timers that never fire by themselves: the loop wakes only when told to. */
  const asleep: Timers = { setTimeout: () => ({}), clearTimeout: () => undefined };

  beforeEach(async () => {
    now = T0;
    receiver = await new Receiver(clock).listen();
    database = await webhookDatabase(backend);
    store = await database.open();
  });
  afterEach(async () => {
    for (const d of dispatchers.splice(0)) await d.stop();
    await receiver.close();
    await database.dispose();
  });

  describe('delivery', () => {
    it("POSTs the stored bytes with a signature the receiver verifies, and the spec's headers", async () => {
      const hooks = dispatcher();
      const [id] = await hooks.outbox.enqueue(POST_CREATED, POST, [receiver.url]);
      const { body: stored, key } = (await hooks.outbox.get(id!))!;
      // A UUIDv7 (RFC 9562): unique across databases, unlike the row's id.
      expect(key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);

      expect(await hooks.runDue()).toBe(1);

      expect(receiver.received).toHaveLength(1);
      const [request] = receiver.received;
      expect(request!.valid).toBe(true);
      expect(request!.body.equals(Buffer.from(stored, 'utf8'))).toBe(true);
      expect(request!.headers).toMatchObject({
        'content-type': 'application/json',
        'x-webhook-event': 'post.created',
        'x-webhook-signature': signBody(stored, SECRET),
        'x-webhook-delivery': key,
        'user-agent': `miniapp-webhooks/${VERSION}`,
        'content-length': String(Buffer.byteLength(stored)),
      });
      expect(request!.path).toBe('/hooks/blog');
      expect(JSON.parse(request!.body.toString('utf8'))).toEqual({ event: 'post.created', timestamp: T0.toISOString(), data: POST });

      expect(await hooks.outbox.get(id!)).toMatchObject({
        state: 'delivered',
        attemptCount: 1,
        nextAttemptAt: null,
        attempts: [{ at: T0.toISOString(), statusCode: 200, error: null }],
      });
      expect(await hooks.runDue()).toBe(0);
      expect(receiver.received).toHaveLength(1);
    });

    it('sends every URL the same bytes and signature, each with its own delivery id', async () => {
      const hooks = dispatcher();
      const ids = await hooks.outbox.enqueue(POST_CREATED, POST, [receiver.url, `${receiver.url}?second=1`]);
      expect(await hooks.runDue()).toBe(2);
      expect(receiver.received).toHaveLength(2);
      const [a, b] = receiver.received;
      expect(a!.body.equals(b!.body)).toBe(true);
      expect(a!.headers['x-webhook-signature']).toBe(b!.headers['x-webhook-signature']);
      const keys = await Promise.all(ids.map(async (id) => (await hooks.outbox.get(id))!.key));
      expect(new Set(keys).size).toBe(2);
      expect([a!.headers['x-webhook-delivery'], b!.headers['x-webhook-delivery']].sort()).toEqual(keys.sort());
      expect(receiver.received.every((r) => r.valid)).toBe(true);
    });

    it('counts any 2xx as success', async () => {
      receiver.script.push(204);
      const hooks = dispatcher();
      const [id] = await hooks.outbox.enqueue(POST_CREATED, POST, [receiver.url]);
      await hooks.runDue();
      expect(await hooks.outbox.get(id!)).toMatchObject({ state: 'delivered', attempts: [{ statusCode: 204 }] });
    });

    it('a receiver with another secret sees an invalid signature', async () => {
      const hooks = dispatcher({ secret: 'not-the-receivers-secret' });
      await hooks.outbox.enqueue(POST_CREATED, POST, [receiver.url]);
      await hooks.runDue();
      expect(receiver.received[0]!.valid).toBe(false);
    });

    it('refuses an empty secret', () => {
      expect(() => dispatcher({ secret: '' })).toThrow(/secret is empty/);
    });
  });

  describe('retries', () => {
    it('retries at t0+1m, t0+6m and t0+36m, sends nothing in between, then marks the delivery failed', async () => {
      receiver.fallback = 500;
      const hooks = dispatcher();
      const [id] = await hooks.outbox.enqueue(POST_CREATED, POST, [receiver.url]);

      const schedule = [0, 1 * MINUTE, 6 * MINUTE, 36 * MINUTE];
      for (const [i, due] of schedule.entries()) {
        if (i > 0) {
          now = at(due - 1);
          expect(await hooks.runDue(), `nothing is due just before attempt ${i + 1}`).toBe(0);
          expect(receiver.received).toHaveLength(i);
        }
        now = at(due);
        expect(await hooks.runDue()).toBe(1);
        expect(receiver.received).toHaveLength(i + 1);
        const delivery = (await hooks.outbox.get(id!))!;
        expect(delivery.attemptCount).toBe(i + 1);
        expect(delivery.state).toBe(i < 3 ? 'pending' : 'failed');
        expect(delivery.nextAttemptAt).toBe(i < 3 ? at(schedule[i + 1]!).toISOString() : null);
      }

      expect(receiver.received.map((r) => r.at)).toEqual(schedule.map((ms) => at(ms).toISOString()));
      expect(receiver.received.every((r) => r.valid)).toBe(true);
      // Every retry carries the very same bytes and signature.
      expect(new Set(receiver.received.map((r) => r.body.toString('base64'))).size).toBe(1);
      expect(new Set(receiver.received.map((r) => r.headers['x-webhook-signature'])).size).toBe(1);

      expect((await hooks.outbox.get(id!))!.attempts).toEqual(schedule.map((ms) => ({ at: at(ms).toISOString(), statusCode: 500, error: null })));
      now = at(30 * 24 * 60 * MINUTE);
      expect(await hooks.runDue()).toBe(0);
      expect(receiver.received).toHaveLength(4);
    });

    it('stops retrying once a retry succeeds', async () => {
      receiver.script.push(503, 200);
      const hooks = dispatcher();
      const [id] = await hooks.outbox.enqueue(POST_CREATED, POST, [receiver.url]);
      await hooks.runDue();
      now = at(MINUTE);
      await hooks.runDue();
      now = at(60 * MINUTE);
      expect(await hooks.runDue()).toBe(0);
      expect(await hooks.outbox.get(id!)).toMatchObject({
        state: 'delivered',
        attemptCount: 2,
        attempts: [{ statusCode: 503 }, { statusCode: 200 }],
      });
    });

    it('treats a redirect as a failure and does not follow it', async () => {
      receiver.script.push(302);
      const hooks = dispatcher();
      const [id] = await hooks.outbox.enqueue(POST_CREATED, POST, [receiver.url]);
      await hooks.runDue();
      expect(receiver.received).toHaveLength(1);
      expect(await hooks.outbox.get(id!)).toMatchObject({ state: 'pending', nextAttemptAt: at(MINUTE).toISOString(), attempts: [{ statusCode: 302 }] });
    });

    it('records a refused connection as an error and retries it', async () => {
      const hooks = dispatcher();
      const [id] = await hooks.outbox.enqueue(POST_CREATED, POST, [await deadUrl()]);
      expect(await hooks.runDue()).toBe(1);
      const delivery = (await hooks.outbox.get(id!))!;
      expect(delivery).toMatchObject({ state: 'pending', nextAttemptAt: at(MINUTE).toISOString() });
      expect(delivery.attempts[0]).toMatchObject({ statusCode: null, error: expect.stringMatching(/ECONNREFUSED/) });
    });

    it('records a dropped connection and a time-out as errors', async () => {
      receiver.script.push('drop', 'hang');
      const hooks = dispatcher({ timeoutMs: 300 });
      const [id] = await hooks.outbox.enqueue(POST_CREATED, POST, [receiver.url]);
      await hooks.runDue();
      now = at(MINUTE);
      const started = Date.now();
      await hooks.runDue();
      expect(Date.now() - started).toBeLessThan(3_000);
      const delivery = (await hooks.outbox.get(id!))!;
      expect(delivery.attempts.map((a) => a.statusCode)).toEqual([null, null]);
      expect(delivery.attempts[0]!.error).toBeTruthy();
      expect(delivery.attempts[1]!.error).toBe('no answer within 0.3 s');
      expect(delivery).toMatchObject({ state: 'pending', nextAttemptAt: at(6 * MINUTE).toISOString() });
    });

    it('schedules the next attempt from when the failed one ended', async () => {
      const hooks = dispatcher({
        send: async () => {
          now = new Date(now.getTime() + 10_000); // the receiver took 10 s to fail
          return { status: 500 };
        },
      });
      const [id] = await hooks.outbox.enqueue(POST_CREATED, POST, ['http://127.0.0.1:1/unused']);
      await hooks.runDue();
      expect(await hooks.outbox.get(id!)).toMatchObject({
        attempts: [{ at: T0.toISOString(), statusCode: 500 }],
        nextAttemptAt: at(10_000 + MINUTE).toISOString(),
      });
    });
  });

  describe('restart in the middle of the schedule', () => {
    it('resumes from the database: two failures, close everything, reopen, the third attempt delivers on time', async () => {
      receiver.script.push(500, 500, 200);
      const before = dispatcher();
      before.start();
      const [id] = await before.outbox.enqueue(POST_CREATED, POST, [receiver.url]);
      before.notify();
      await until(() => receiver.received.length === 1, 'the first attempt');
      await before.stop();
      now = at(MINUTE);
      expect(await before.runDue()).toBe(1);
      expect(await before.outbox.get(id!)).toMatchObject({ state: 'pending', attemptCount: 2, nextAttemptAt: at(6 * MINUTE).toISOString() });

      // The process goes away: dispatcher stopped, database closed.
      await before.stop();
      await store.close();

      // A new process: new database handle, new outbox, new dispatcher.
      store = await database.open();
      const after = dispatcher();
      now = at(6 * MINUTE - 1);
      expect(await after.runDue()).toBe(0);
      expect(receiver.received).toHaveLength(2);
      now = at(6 * MINUTE);
      expect(await after.runDue()).toBe(1);

      expect(receiver.received.map((r) => r.at)).toEqual([0, MINUTE, 6 * MINUTE].map((ms) => at(ms).toISOString()));
      expect(receiver.received.every((r) => r.valid)).toBe(true);
      expect(await after.outbox.get(id!)).toMatchObject({
        state: 'delivered',
        attemptCount: 3,
        attempts: [{ statusCode: 500 }, { statusCode: 500 }, { statusCode: 200 }],
      });
    });

    it('sends what became due while the process was down as soon as the loop starts', async () => {
      receiver.script.push(500);
      const before = dispatcher();
      const [id] = await before.outbox.enqueue(POST_CREATED, POST, [receiver.url]);
      await before.runDue();
      await store.close();

      now = at(3 * 60 * MINUTE); // down for three hours
      store = await database.open();
      const after = dispatcher();
      await after.start();
      await until(() => receiver.received.length === 2, 'the overdue retry');
      await after.stop();
      expect(await new WebhookOutbox(store).get(id!)).toMatchObject({ state: 'delivered', attemptCount: 2 });
    });
  });

  describe('the loop', () => {
    it('delivers without a manual runDue, woken by notify()', async () => {
      const hooks = dispatcher({ now: () => new Date() });
      hooks.start();
      expect(hooks.running).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 20)); // let it go to sleep (for 30 s)
      const [id] = await hooks.outbox.enqueue(POST_CREATED, POST, [receiver.url]);
      hooks.notify();
      await until(async () => (await hooks.outbox.get(id!))?.state === 'delivered', 'the delivery');
      expect(receiver.received).toHaveLength(1);
      expect(receiver.received[0]!.valid).toBe(true);
      await hooks.stop();
      expect(hooks.running).toBe(false);
    });

    it('also finds deliveries enqueued without notify(), after at most maxSleepMs', async () => {
      const hooks = dispatcher({ now: () => new Date(), maxSleepMs: 30 });
      hooks.start();
      await hooks.outbox.enqueue(POST_CREATED, POST, [receiver.url]);
      await until(() => receiver.received.length === 1, 'the delivery');
    });

    it('sleeps until the next attempt is due, capped by maxSleepMs', async () => {
      const sleeps: { ms: number; fire: () => void; cleared: boolean }[] = [];
      const timers: Timers = {
        setTimeout: (fire, ms) => {
          const entry = { ms, fire, cleared: false };
          sleeps.push(entry);
          return entry;
        },
        clearTimeout: (handle) => {
          (handle as { cleared: boolean }).cleared = true;
        },
      };
      receiver.fallback = 500;
      const hooks = dispatcher({ timers, maxSleepMs: 10 * MINUTE });
      await hooks.outbox.enqueue(POST_CREATED, POST, [receiver.url]);
      hooks.start();
      await until(() => sleeps.length === 1, 'the first sleep');
      expect(receiver.received).toHaveLength(1);
      expect(sleeps[0]!.ms).toBe(MINUTE);

      now = at(MINUTE);
      sleeps[0]!.fire();
      await until(() => sleeps.length === 2, 'the second sleep');
      expect(receiver.received).toHaveLength(2);
      expect(sleeps[1]!.ms).toBe(5 * MINUTE);

      now = at(2 * MINUTE); // woken early: 4 minutes still to go
      sleeps[1]!.fire();
      await until(() => sleeps.length === 3, 'the third sleep');
      expect(receiver.received).toHaveLength(2);
      expect(sleeps[2]!.ms).toBe(4 * MINUTE);

      const capped = dispatcher({ timers, maxSleepMs: 30_000 });
      capped.start();
      await until(() => sleeps.length === 4, 'the capped sleep');
      expect(sleeps[3]!.ms).toBe(30_000);

      await hooks.stop();
      await capped.stop();
      expect(sleeps[2]!.cleared && sleeps[3]!.cleared).toBe(true);
    });

    it('stop() waits for the attempt in flight to be recorded', async () => {
      // The receiver answers when the test says so, however slow the machine: the attempt is in flight until then.
      let answer!: () => void;
      receiver.script.push({ status: 200, after: new Promise<void>((resolve) => (answer = resolve)) });
      const hooks = dispatcher({ now: () => new Date() });
      const [id] = await hooks.outbox.enqueue(POST_CREATED, POST, [receiver.url]);
      hooks.start();
      await until(() => receiver.received.length === 1, 'the request to arrive');
      expect((await hooks.outbox.get(id!))!.state).toBe('pending');
      let stopped = false;
      const stopping = hooks.stop().then(() => (stopped = true));
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(stopped).toBe(false);
      answer();
      await stopping;
      expect(await hooks.outbox.get(id!)).toMatchObject({ state: 'delivered', attemptCount: 1 });
    });

    it('two dispatchers on one database send a delivery once (claims)', async () => {
      receiver.script.push({ status: 200, delayMs: 50 });
      const one = dispatcher();
      const two = dispatcher({ store: await database.instance(store) });
      const [id] = await one.outbox.enqueue(POST_CREATED, POST, [receiver.url]);
      const counts = await Promise.all([one.runDue(), two.runDue()]);
      expect(counts.sort()).toEqual([0, 1]);
      expect(receiver.received).toHaveLength(1);
      expect(await one.outbox.get(id!)).toMatchObject({ state: 'delivered', attemptCount: 1 });
    });

    it('overlapping runDue calls on one dispatcher do not send twice', async () => {
      receiver.script.push({ status: 200, delayMs: 50 });
      const hooks = dispatcher();
      await hooks.outbox.enqueue(POST_CREATED, POST, [receiver.url]);
      const counts = await Promise.all([hooks.runDue(), hooks.runDue()]);
      expect(counts).toEqual([1, 0]);
      expect(receiver.received).toHaveLength(1);
    });

    it('logs each outcome without the body or the secret', async () => {
      const lines: { level: string; fields: object; message: string }[] = [];
      const log = {
        info: (fields: object, message: string) => lines.push({ level: 'info', fields, message }),
        warn: (fields: object, message: string) => lines.push({ level: 'warn', fields, message }),
        error: (fields: object, message: string) => lines.push({ level: 'error', fields, message }),
      };
      receiver.script.push(500);
      const hooks = dispatcher({ log });
      await hooks.outbox.enqueue(POST_CREATED, POST, [receiver.url]);
      await hooks.runDue();
      now = at(MINUTE);
      await hooks.runDue();
      expect(lines.map((l) => [l.level, l.message])).toEqual([
        ['warn', 'webhook attempt failed; will retry'],
        ['info', 'webhook delivered'],
      ]);
      const text = JSON.stringify(lines);
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain('Launch day');
    });

    it('tells its observer what each attempt led to, and the outbox counts what is pending', async () => {
      const attempts: string[] = [];
      // One at a time, so that the attempts are reported in the outbox's order.
      const hooks = dispatcher({ concurrency: 1, observe: ({ event, outcome, seconds }) => attempts.push(`${event} ${outcome} ${seconds >= 0}`) });
      receiver.fallback = 500;
      receiver.script.push(204);
      await hooks.outbox.enqueue(POST_CREATED, POST, [receiver.url]);
      await hooks.outbox.enqueue(POST_CREATED, POST, [`${receiver.url}/failing`]);
      expect(await hooks.outbox.pendingCount()).toBe(2);
      await hooks.runDue();
      expect(await hooks.outbox.pendingCount()).toBe(1);
      for (const due of [1, 6, 36]) {
        now = at(due * MINUTE);
        await hooks.runDue();
      }
      expect(await hooks.outbox.pendingCount()).toBe(0);
      expect(attempts).toEqual([
        'post.created delivered true',
        'post.created retry_scheduled true',
        'post.created retry_scheduled true',
        'post.created retry_scheduled true',
        'post.created failed true',
      ]);
    });
  });

  describe('several dispatchers on one database', () => {
    it('is woken through the store when anything is enqueued, without notify() and with timers that never fire', async () => {
      const hooks = dispatcher({ now: () => new Date(), timers: asleep });
      await hooks.start();
      // Another outbox object over the store: the only link to the dispatcher is the store's signals.
      const other = new WebhookOutbox(store);
      const [id] = await other.enqueue(POST_CREATED, POST, [receiver.url]);
      await until(async () => (await other.get(id!))?.state === 'delivered', 'the delivery');
      expect(receiver.received.map((r) => r.headers['x-webhook-delivery'])).toEqual([(await other.get(id!))!.key]);
    });

    it('sends a delivery whose sender died mid-send once the lease ends, with the same X-Webhook-Delivery and body', async () => {
      const LEASE = MINUTE;
      let release!: (answer: { status: number }) => void;
      let sends = 0;
      // A sends and never hears back: as good as dead, holding its claim.
      const a = dispatcher({
        leaseMs: LEASE,
        send: () => {
          sends++;
          return new Promise((resolve) => (release = resolve));
        },
      });
      const b = dispatcher({ store: await database.instance(store), leaseMs: LEASE });
      const [id] = await a.outbox.enqueue(POST_CREATED, POST, [receiver.url]);
      const stuck = a.runDue();
      await until(() => sends === 1, "A's request");
      expect(await b.runDue()).toBe(0);
      now = at(LEASE - 1);
      expect(await b.runDue()).toBe(0);
      expect(receiver.received).toHaveLength(0);

      now = at(LEASE);
      expect(await b.runDue()).toBe(1);
      expect(receiver.received).toHaveLength(1);
      const [got] = receiver.received;
      expect(got!.headers['x-webhook-delivery']).toBe((await b.outbox.get(id!))!.key);
      expect(got!.body.toString('utf8')).toBe((await b.outbox.get(id!))!.body);
      expect(got!.valid).toBe(true);
      expect(await b.outbox.get(id!)).toMatchObject({ state: 'delivered', attemptCount: 1 });

      // A comes back with a failure: recorded, and the delivery stays delivered.
      release({ status: 503 });
      expect(await stuck).toBe(1);
      expect(await b.outbox.get(id!)).toMatchObject({ state: 'delivered', attemptCount: 2, nextAttemptAt: null });
      expect(receiver.received).toHaveLength(1);
    });

    it('never holds what another running dispatcher sends; holds it once none does, resumes it when one is back', async () => {
      const one = receiver.url;
      const two = `${receiver.url}?two`;
      const a = dispatcher({ urls: [one, two] });
      const b = dispatcher({ urls: [one], store: await database.instance(store) });
      expect(await a.runDue()).toBe(0);
      const [first, second] = await a.outbox.enqueue(POST_CREATED, POST, [one, two]);

      // B sends only its URL, and leaves A's alone, even though B was not started with it.
      expect(await b.runDue()).toBe(1);
      expect((await b.outbox.get(second!))?.state).toBe('pending');
      expect(await a.runDue()).toBe(1);
      expect(await Promise.all([first, second].map(async (id) => (await a.outbox.get(id!))?.state))).toEqual(['delivered', 'delivered']);

      // A stops: no one sends to `two` any more, and B holds what is queued for it.
      await a.stop();
      const [third, fourth] = await b.outbox.enqueue(POST_CREATED, POST, [one, two]);
      expect(await b.runDue()).toBe(1);
      expect(await b.outbox.get(third!)).toMatchObject({ state: 'delivered' });
      expect(await b.outbox.get(fourth!)).toMatchObject({ state: 'held', attemptCount: 0 });

      // A is back (a new process): it resumes the held delivery and sends it.
      const again = dispatcher({ urls: [one, two] });
      expect(await again.runDue()).toBe(1);
      expect(await again.outbox.get(fourth!)).toMatchObject({ state: 'delivered', attemptCount: 1 });
      expect(receiver.received.map((r) => r.path)).toEqual(['/hooks/blog', '/hooks/blog?two', '/hooks/blog', '/hooks/blog?two']);
    });

    it('sleeps past what only another dispatcher sends, and wakes to renew its word among the senders before it lapses', async () => {
      const sleeps: { ms: number; fire: () => void }[] = [];
      const timers: Timers = {
        setTimeout: (fire, ms) => {
          sleeps.push({ ms, fire });
          return {};
        },
        clearTimeout: () => undefined,
      };
      const other = dispatcher({ urls: [`${receiver.url}?other`], store: await database.instance(store) });
      await other.runDue();
      await other.outbox.enqueue(POST_CREATED, POST, [`${receiver.url}?other`]);
      const hooks = dispatcher({ urls: [receiver.url], timers, maxSleepMs: 10 * MINUTE });
      await hooks.start();
      await until(() => sleeps.length === 1, 'the first sleep');
      // The other's delivery is due now, yet this one sleeps: until its word among the senders needs renewing.
      expect(sleeps.map((sleep) => sleep.ms)).toEqual([SENDER_TTL_MS / 3]);
      expect(receiver.received).toHaveLength(0);
      const expiries = async () =>
        (await store.sql.all<{ expires_at: string }>('SELECT expires_at FROM webhook_senders ORDER BY expires_at')).map((row) => row.expires_at);
      expect(await expiries()).toEqual([at(SENDER_TTL_MS).toISOString(), at(SENDER_TTL_MS).toISOString()]);

      now = at(SENDER_TTL_MS / 3);
      sleeps[0]!.fire();
      await until(() => sleeps.length === 2, 'the second sleep');
      expect(await expiries()).toEqual([at(SENDER_TTL_MS).toISOString(), at((4 * SENDER_TTL_MS) / 3).toISOString()]);
    });
  });
});
