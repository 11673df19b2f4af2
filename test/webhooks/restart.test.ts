/**
 * Deliveries to URLs serve no longer has (issue 11, item 16), on both
 * backends: a restart without a URL holds its deliveries instead of
 * retrying them for ever, and `webhooks resend|cancel|list` work on them
 * while serve runs. "serve" here is what serve builds over its store (the
 * outbox and a dispatcher with serve's URLs; the blog's side, a post and
 * its deliveries in one transaction, is test/blog/webhook-flow.test.ts);
 * its runs are driven by hand, so the injected clock alone decides what is
 * due. The CLI runs in-process on the same database, and the receivers are
 * real HTTP servers on 127.0.0.1.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { POST_CREATED } from '../../src/blog/posts.js';
import { verifySignature } from '../../src/webhooks/signature.js';
import { WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import type { Delivery } from '../../src/webhooks/delivery.js';
import { BACKENDS } from '../helpers/postgres.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { Sandbox, plain } from '../helpers/cli.js';
import { webhookDatabase, type WebhookTestDatabase } from './backend.js';

const SECRET = 'whsec-restart-test';
const T0 = Date.parse('2026-11-21T12:00:00.000Z');
const MINUTE = 60_000;

/** What serve keeps of the outbox: its store, its URLs, its dispatcher. */
interface Serve {
  store: Store;
  urls: string[];
  webhooks: WebhookDispatcher;
}

describe.each(BACKENDS)('on %s', (backend) => {
  let database: WebhookTestDatabase;
  let sb: Sandbox;
  let clock: number;
  let serve: Serve | undefined;
  let posts = 0;
  const receivers: WebhookReceiver[] = [];

  async function receiver(status: number): Promise<WebhookReceiver> {
    const r = await startWebhookReceiver(status);
    receivers.push(r);
    return r;
  }

  async function stopServe(): Promise<void> {
    if (!serve) return;
    await serve.webhooks.stop();
    await serve.store.close();
    serve = undefined;
  }

  /** (Re)starts serve on the database, sending to `urls`, and makes its dispatcher's first run. */
  async function startServe(urls: string[]): Promise<Serve> {
    await stopServe();
    const store = await database.open();
    const webhooks = new WebhookDispatcher({ store, urls, secret: SECRET, now: () => new Date(clock), version: 'test' });
    serve = { store, urls, webhooks };
    await webhooks.runDue();
    return serve;
  }

  /** What creating a post does to the outbox (its deliveries, in the post's transaction), then serve's run. */
  async function publish(title: string): Promise<void> {
    const { store, urls, webhooks } = serve!;
    const post = { id: ++posts, title, content: 'Body', tags: [], is_published: true };
    await store.sql.transaction((tx) => webhooks.outbox.enqueue(POST_CREATED, post, urls, tx));
    await webhooks.runDue();
  }

  function cli(argv: string[], options: { tty?: boolean } = {}) {
    return sb.run(['webhooks', ...argv, ...database.cliFlags], { now: new Date(clock), tty: options.tty ?? false, columns: 120 });
  }

  async function list(...argv: string[]): Promise<Delivery[]> {
    const result = await cli(['list', '--json', ...argv]);
    expect(result.code, result.stderr).toBe(0);
    return JSON.parse(result.stdout) as Delivery[];
  }

  /**
   * Runs `resend --wait` while serve makes its runs, once the resend is in
   * the outbox (before that, on SQLite, serve's writes would wait on the
   * CLI's transaction in this one thread).
   */
  async function resendAndServe(argv: string[], options: { tty?: boolean } = {}) {
    const before = (await serve!.webhooks.outbox.list()).length;
    const waiting = cli(['resend', ...argv], options);
    let done = false;
    void waiting.finally(() => (done = true));
    while (!done && (await serve!.webhooks.outbox.list()).length === before) await new Promise((resolve) => setTimeout(resolve, 10));
    while (!done) {
      await serve!.webhooks.runDue();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return waiting;
  }

  beforeEach(async () => {
    database = await webhookDatabase(backend);
    sb = new Sandbox();
    clock = T0;
    posts = 0;
  });
  afterEach(async () => {
    await stopServe();
    for (const r of receivers.splice(0)) await r.close();
    sb.dispose();
    await database.dispose();
  });

  describe('a restart without a URL', () => {
    it('holds the deliveries to it instead of retrying them, and resumes them when the URL is back', async () => {
      const gone = await receiver(500);
      const kept = await receiver(204);
      await startServe([gone.url, kept.url]);
      await publish('First');
      expect(gone.received).toHaveLength(1);
      expect(kept.received).toHaveLength(1);

      // Restarted without `gone`, after its retry fell due: it is held, not attempted.
      clock = T0 + 2 * MINUTE;
      await startServe([kept.url]);
      await serve!.webhooks.runDue();
      expect(gone.received).toHaveLength(1);
      const held = await list('--state', 'held');
      expect(held.map((d) => [d.url, d.attemptCount, d.nextAttemptAt])).toEqual([[gone.url, 1, null]]);
      expect(await list('--state', 'pending')).toEqual([]);

      // The URL is back (and answers now): the held delivery resumes, its first attempt still counted.
      gone.status = 204;
      clock = T0 + 3 * MINUTE;
      await startServe([gone.url, kept.url]);
      expect(gone.received).toHaveLength(2);
      expect(gone.received[1]!.headers['x-webhook-delivery']).toBe(held[0]!.key);
      expect(gone.received[0]!.headers['x-webhook-delivery']).toBe(held[0]!.key);
      expect((await list('--url', gone.url)).map((d) => [d.state, d.attemptCount])).toEqual([['delivered', 2]]);
    });
  });

  describe('webhooks resend and cancel, while serve runs', () => {
    it('resends a held delivery to the receiver that replaced its URL: same body, signature and X-Webhook-Delivery', async () => {
      const old = await receiver(503);
      const moved = await receiver(204);
      await startServe([old.url]);
      await publish('Moved');
      clock = T0 + 2 * MINUTE;
      await startServe([moved.url]);
      const [held] = await list('--state', 'held');
      expect(held).toBeDefined();

      const resent = await cli(['resend', String(held!.id), '--to', moved.url, '--json']);
      expect(resent.code, resent.stderr).toBe(0);
      const { queued } = JSON.parse(resent.stdout) as { queued: Delivery[] };
      expect(queued).toHaveLength(1);
      expect(queued[0]).toMatchObject({ url: moved.url, state: 'pending', originalId: held!.id, key: held!.key, attemptCount: 0, body: held!.body });
      // The held one is closed, or serve would also resume it once its URL came back.
      expect((await list('--state', 'cancelled')).map((d) => d.id)).toEqual([held!.id]);

      await serve!.webhooks.runDue();
      expect(moved.received).toHaveLength(1);
      const got = moved.received[0]!;
      expect(got.body).toBe(old.received[0]!.body);
      expect(got.headers['x-webhook-signature']).toBe(old.received[0]!.headers['x-webhook-signature']);
      expect(verifySignature(got.body, SECRET, String(got.headers['x-webhook-signature']))).toBe(true);
      expect(got.headers['x-webhook-delivery']).toBe(held!.key);
      expect(old.received[0]!.headers['x-webhook-delivery']).toBe(held!.key);

      // A delivered one can be resent again: a receiver that de-duplicates sees the same id.
      const again = await cli(['resend', String(queued[0]!.id)]);
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).toMatch(new RegExp(`^\\d+\\tpending\\t${moved.url}\\n$`));
      await serve!.webhooks.runDue();
      expect(moved.received.map((r) => r.headers['x-webhook-delivery'])).toEqual([held!.key, held!.key]);
    });

    it('cancels every pending delivery to a URL, and serve makes no further attempt', async () => {
      const failing = await receiver(500);
      const ok = await receiver(204);
      await startServe([failing.url, ok.url]);
      await publish('One');
      await publish('Two');
      expect(failing.received).toHaveLength(2);

      const cancelled = await cli(['cancel', '--url', failing.url, '--json']);
      expect(cancelled.code, cancelled.stderr).toBe(0);
      const { cancelled: gone, already_cancelled: already } = JSON.parse(cancelled.stdout) as { cancelled: Delivery[]; already_cancelled: number[] };
      expect(already).toEqual([]);
      expect(gone.map((d) => [d.url, d.state])).toEqual([
        [failing.url, 'cancelled'],
        [failing.url, 'cancelled'],
      ]);

      clock = T0 + 10 * MINUTE;
      await serve!.webhooks.runDue();
      expect(failing.received).toHaveLength(2);
      expect(await list('--state', 'pending')).toEqual([]);

      // Nothing left: not an error. A delivered one cannot be cancelled; an unknown one is not there.
      const none = await cli(['cancel', '--url', failing.url]);
      expect(none).toMatchObject({ code: 0, stdout: '' });
      expect(none.stderr).toContain('nothing to cancel');
      const [delivered] = await list('--state', 'delivered');
      const refused = await cli(['cancel', String(delivered!.id)]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`cannot cancel delivery ${delivered!.id}: it is delivered`);
      const unknown = await cli(['cancel', '999']);
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toContain('cannot cancel delivery 999: no such delivery');
      const again = await cli(['cancel', String(gone[0]!.id)]);
      expect(again, again.stderr).toMatchObject({ code: 0, stdout: '' });
      expect(again.stderr).toContain(`delivery ${gone[0]!.id} was already cancelled: nothing to do`);
      const againJson = await cli(['cancel', String(gone[0]!.id), '--json']);
      expect(JSON.parse(againJson.stdout)).toEqual({ cancelled: [], already_cancelled: [gone[0]!.id], refused: [] });
    });

    it('refuses to resend a delivery that is still pending, and says how to go on', async () => {
      const failing = await receiver(500);
      await startServe([failing.url]);
      await publish('Pending');
      const [pending] = await list('--state', 'pending');
      const result = await cli(['resend', String(pending!.id)]);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`cannot resend delivery ${pending!.id}: it is still pending`);
      expect(result.stderr).toContain('cancel it first');
      expect((await list()).length).toBe(1);
    });

    it('--wait follows the resent deliveries with a progress line until serve has delivered them', async () => {
      const flaky = await receiver(500);
      await startServe([flaky.url]);
      await publish('Retry me');
      clock = T0 + 2 * MINUTE;
      const other = await receiver(204);
      await startServe([other.url]);
      const [held] = await list('--state', 'held');

      flaky.status = 204;
      await startServe([flaky.url, other.url]);
      // Resumed on start and delivered; resend it once more, and wait for that.
      expect(flaky.received).toHaveLength(2);
      const result = await resendAndServe([String(held!.id), '--wait', '--no-color'], { tty: true });
      expect(result.code, result.stderr).toBe(0);
      const stderr = plain(result.stderr);
      expect(stderr).toContain('\r\x1b[2Kresending · deliveries 0/1 (0%) · waiting for serve to send them · delivered 0 · failed 0');
      expect(stderr).toMatch(/✓ delivery \d+ \(X-Webhook-Delivery [0-9a-f-]{36}\) delivered after 1 attempt, HTTP 204/);
      expect(result.stdout).toBe('');
      expect(flaky.received).toHaveLength(3);
    });

    it('--wait ends, exit 1, when the resent delivery is held because serve does not send to its URL', async () => {
      const a = await receiver(204);
      const b = await receiver(204);
      await startServe([a.url]);
      await publish('Delivered');
      await startServe([b.url]);
      const [delivered] = await list('--state', 'delivered');
      const result = await resendAndServe([String(delivered!.id), '--wait', '--json']);
      expect(result.code).toBe(1);
      expect((JSON.parse(result.stdout) as { queued: Delivery[] }).queued.map((d) => d.state)).toEqual(['held']);
      expect(result.stderr).toContain('1 of 1 resent deliveries were not delivered');
      expect(a.received).toHaveLength(1);
    });
  });

  describe('webhooks list --limit', () => {
    it('lists the N most recent, oldest first, and says on a terminal how many there are', async () => {
      const ok = await receiver(204);
      await startServe([ok.url]);
      for (const title of ['a', 'b', 'c', 'd']) await publish(title);
      expect((await list('--limit', '2')).map((d) => d.id)).toEqual([3, 4]);
      const tty = await cli(['list', '--limit', '3', '--no-color'], { tty: true });
      expect(tty.code).toBe(0);
      expect(
        plain(tty.stdout)
          .split('\n')
          .filter((l) => /^│ \d/.test(l))
          .map((l) => l.split('│')[1]!.trim()),
      ).toEqual(['2', '3', '4']);
      expect(tty.stderr).toContain('the 3 most recent of 4; a larger --limit shows more');
      const bad = await cli(['list', '--limit', '0']);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('--limit must be a whole number of at least 1');
    });
  });
});
