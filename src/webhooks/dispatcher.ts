/**
 * The dispatcher that drains the webhook outbox (outbox.ts): one per
 * instance of serve, sharing the outbox with the others through claims.
 * See the class's comment for the delivery guarantees.
 */
import { redactUrl } from '../url-redaction.js';
import { randomUUID } from 'node:crypto';
import { ConfigError } from '../errors.js';
import { deliveryKey, type Claim, type Delivery, type DeliveryState } from './delivery.js';
import { SENDER_TTL_MS, WebhookOutbox, afterAttempt, type OutboxStore } from './outbox.js';
import { DEFAULT_SEND_TIMEOUT_MS, describeSendError, undiciSender, type SendWebhook } from './sender.js';
import { signBody, signStandard, standardKey } from './signature.js';
import { SPAN_KIND, type Telemetry } from '../telemetry/telemetry.js';

/** The longest the loop sleeps before it looks at the outbox again. */
const DEFAULT_MAX_SLEEP_MS = 30_000;
/**
 * The lease of a claim: how long a claimed delivery stays out of other
 * dispatchers' reach while it is being sent. Far above the send time-out;
 * it only matters when a process dies mid-send (the delivery is then sent
 * again, by whichever instance looks first, once the lease has ended).
 */
const DEFAULT_LEASE_MS = 2 * 60_000;

export interface Timers {
  setTimeout: (callback: () => void, ms: number) => unknown;
  clearTimeout: (handle: unknown) => void;
}

/** What an attempt led to: delivered, another attempt scheduled, or no attempts left. */
type AttemptOutcome = 'delivered' | 'retry_scheduled' | 'failed';

interface WebhookAttempt {
  event: string;
  outcome: AttemptOutcome;
  /** How long the request took, answered or not. */
  seconds: number;
}

export type WebhookAttemptObserver = (attempt: WebhookAttempt) => void;

// An attempt that failed at a delivery cancelled (or held) meanwhile is its last one: to a dashboard, a failure.
const OUTCOMES: Readonly<Record<DeliveryState, AttemptOutcome>> = {
  delivered: 'delivered',
  pending: 'retry_scheduled',
  failed: 'failed',
  cancelled: 'failed',
  held: 'failed',
};

/** Pino-shaped, so that serve can pass its Fastify logger (`app.log`). */
export interface WebhookLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

export interface DispatcherOptions {
  /** The outbox, or the store to build one over (with `now`). */
  outbox?: WebhookOutbox;
  store?: OutboxStore;
  /** The HMAC key the receivers share. */
  secret: string;
  /**
   * The URLs serve sends to. Pending deliveries to a URL that neither this
   * list nor another running instance has (one dropped from serve's flags)
   * are held rather than retried, and held ones to these URLs resume.
   * Undefined: every URL is sent to, and nothing is held.
   */
  urls?: readonly string[] | undefined;
  now: () => Date;
  /** miniapp's version, for the user-agent. */
  version: string;
  /** How a request goes out; default: undici with `timeoutMs`. */
  send?: SendWebhook;
  /** Time-out of the default sender (default 10 s). */
  timeoutMs?: number;
  /** The loop's timers (default: the global ones, unref'd). */
  timers?: Timers;
  /** The longest the loop sleeps between looks at the outbox (default 30 s). */
  maxSleepMs?: number;
  /** See DEFAULT_LEASE_MS. */
  leaseMs?: number;
  /** Deliveries sent at once by one run (default 4). */
  concurrency?: number;
  log?: WebhookLog;
  /** Told about every recorded attempt (serve counts them). */
  observe?: WebhookAttemptObserver | undefined;
  /** A span for every delivery attempt, linked to the span that made the event; none when tracing is off. */
  telemetry?: Telemetry | undefined;
}

const quiet: WebhookLog = { info() {}, warn() {}, error() {} };

const defaultTimers: Timers = {
  setTimeout: (callback, ms) => {
    const handle = setTimeout(callback, ms);
    // The dispatcher never keeps the process alive on its own: the server does.
    handle.unref();
    return handle;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};
/**
 * Drains the outbox: `runDue()` makes one attempt at every due delivery;
 * `start()` keeps doing that, sleeping until the next one is due (at most
 * `maxSleepMs`), and wakes at once when `notify()` is called or any
 * instance sharing the store enqueues, resends or cancels (the store's
 * signals: an in-process emitter for SQLite, LISTEN/NOTIFY for PostgreSQL).
 *
 * Every instance runs one; they share the outbox through claims (see
 * `WebhookOutbox.claim`): a delivery is sent by one dispatcher at a time,
 * under a lease of `leaseMs`.
 *
 * At-least-once: an attempt is recorded only after the receiver answered
 * (or failed to). If the process dies mid-send, the delivery stays pending
 * with no attempt recorded and is sent again, by any instance, once its
 * lease has ended, so a receiver may see a body twice; receivers
 * deduplicate by X-Webhook-Delivery, which is the same on every attempt.
 */
export class WebhookDispatcher {
  readonly outbox: WebhookOutbox;
  readonly #secret: string;
  readonly #now: () => Date;
  readonly #send: SendWebhook;
  readonly #timers: Timers;
  readonly #maxSleepMs: number;
  readonly #leaseMs: number;
  readonly #telemetry: Telemetry | undefined;
  readonly #concurrency: number;
  readonly #timeoutMs: number;
  readonly #userAgent: string;
  readonly #log: WebhookLog;
  readonly #observe: WebhookAttemptObserver | undefined;
  readonly #urls: readonly string[] | undefined;
  /** This dispatcher among the senders of the store. */
  readonly #senderId = randomUUID();
  /** When the word must be renewed (epoch ms); undefined while this dispatcher is not among the senders. */
  #renewAt: number | undefined;

  /** The run in progress (runs never overlap within a dispatcher). */
  #run: Promise<number> | undefined;
  #loop: Promise<void> | undefined;
  #listening: Promise<void> | undefined;
  #unlisten: (() => Promise<void>) | undefined;
  #stopping = false;
  /** Set while `stop` runs: no new claims (a later `runDue` of its own claims again). */
  #closing = false;
  /** The attempts being sent now, each with what cuts it short (stop, past its deadline). */
  readonly #sending = new Set<AbortController>();
  /** Set by notify(): look again before sleeping. */
  #poked = false;
  #wake: (() => void) | undefined;

  constructor(options: DispatcherOptions) {
    if (!options.outbox && !options.store) throw new TypeError('WebhookDispatcher needs an outbox or a store');
    if (!options.secret) {
      throw new ConfigError('the webhook secret is empty: receivers could not verify X-Webhook-Signature', {
        hint: 'set --webhook-secret or MINIAPP_WEBHOOK_SECRET',
      });
    }
    // A whsec_ secret that is not base64 is refused now, not at the first attempt.
    standardKey(options.secret);
    this.outbox = options.outbox ?? new WebhookOutbox(options.store!, options.now);
    this.#secret = options.secret;
    this.#now = options.now;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_SEND_TIMEOUT_MS;
    this.#send = options.send ?? undiciSender(this.#timeoutMs);
    this.#timers = options.timers ?? defaultTimers;
    this.#maxSleepMs = options.maxSleepMs ?? DEFAULT_MAX_SLEEP_MS;
    this.#leaseMs = Math.max(1, options.leaseMs ?? DEFAULT_LEASE_MS);
    this.#concurrency = Math.max(1, Math.floor(options.concurrency ?? 4));
    this.#userAgent = `miniapp-webhooks/${options.version}`;
    this.#log = options.log ?? quiet;
    this.#observe = options.observe;
    this.#urls = options.urls === undefined ? undefined : [...new Set(options.urls)];
    this.#telemetry = options.telemetry;
  }

  /**
   * The headers of one attempt at a delivery, made at `at`: its event, its id, the spec's signature of the stored
   * body, and Standard Webhooks' three: the id (the same on every attempt and resend), the attempt's own time, and
   * their signature with the body's, so a receiver that refuses stale timestamps takes a retry 30 minutes later.
   */
  headersFor(delivery: Pick<Delivery, 'id' | 'event' | 'body'> & Partial<Pick<Delivery, 'originalId' | 'key'>>, at: Date): Record<string, string> {
    const id = String(deliveryKey(delivery));
    const timestamp = Math.floor(at.getTime() / 1000);
    return {
      'content-type': 'application/json',
      'user-agent': this.#userAgent,
      'x-webhook-event': delivery.event,
      'x-webhook-signature': signBody(delivery.body, this.#secret),
      'x-webhook-delivery': id,
      'webhook-id': id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signStandard(id, timestamp, delivery.body, this.#secret),
    };
  }

  /**
   * Makes one attempt at every delivery due now (that another dispatcher
   * has not claimed) and resolves with how many were attempted. A call
   * while a run is in progress waits for it, then runs again (so what was
   * enqueued meanwhile is not missed).
   */
  runDue(): Promise<number> {
    const previous = this.#run ?? Promise.resolve(0);
    const run = previous.catch(() => 0).then(() => this.#runOnce());
    this.#run = run;
    const clear = () => {
      if (this.#run === run) this.#run = undefined;
    };
    run.then(clear, clear);
    return run;
  }

  async #runOnce(): Promise<number> {
    if (this.#urls) await this.#holdOthers(this.#urls);
    // Each hand claims one delivery, sends it, records it, and claims the next; a hand that finds work calls
    // another (up to `concurrency`), so an empty outbox costs one query and a lease starts when sending does.
    let attempted = 0;
    let drained = false;
    const failures: unknown[] = [];
    const hands = new Set<Promise<void>>();
    const work = async (): Promise<void> => {
      // A stopping dispatcher claims nothing more: what is left is for the other instances, or the next start.
      while (!drained && !this.#closing) {
        const claimed = await this.#claim();
        if (!claimed) {
          drained = true;
          return;
        }
        if (hands.size < this.#concurrency) hand();
        await this.#attempt(claimed);
        attempted++;
      }
    };
    const hand = () => {
      const running: Promise<void> = work()
        .catch((problem: unknown) => {
          failures.push(problem);
          drained = true;
        })
        .finally(() => hands.delete(running));
      hands.add(running);
    };
    hand();
    while (hands.size > 0) await Promise.all(hands);
    if (failures.length > 0) throw failures[0];
    return attempted;
  }

  #claim(): Promise<Claim | undefined> {
    const now = this.#now();
    return this.outbox.claim(now, new Date(now.getTime() + this.#leaseMs), this.#urls);
  }

  async #holdOthers(urls: readonly string[]): Promise<void> {
    const now = this.#now().getTime();
    if (this.#renewAt === undefined || now >= this.#renewAt) {
      await this.outbox.registerSender(this.#senderId, urls, SENDER_TTL_MS);
      this.#renewAt = now + SENDER_TTL_MS / 3;
    }
    const { held, resumed } = await this.outbox.holdOthers(urls);
    const byUrl = (deliveries: Delivery[]) => [...new Set(deliveries.map((d) => d.url))];
    if (held.length > 0) {
      this.#log.warn(
        { deliveryIds: held.map((d) => d.id), urls: byUrl(held) },
        `holding ${held.length} webhook deliver${held.length === 1 ? 'y' : 'ies'} to URLs no running serve sends to; resend or cancel them with \`miniapp webhooks\``,
      );
    }
    if (resumed.length > 0) {
      this.#log.info(
        { deliveryIds: resumed.map((d) => d.id), urls: byUrl(resumed) },
        `resuming ${resumed.length} held webhook deliver${resumed.length === 1 ? 'y' : 'ies'}`,
      );
    }
  }

  #attempt(claimed: Claim): Promise<unknown> {
    const telemetry = this.#telemetry;
    if (!telemetry) return this.#attemptOnce(claimed);
    const { delivery } = claimed;
    // A trace of its own (the dispatcher's loop has none), linked to the one that made the event; the POST's client
    // span nests below it and carries its traceparent to the receiver. The URL's host only: a path may hold a secret.
    const url = new URL(delivery.url);
    return telemetry.inSpan(
      `webhook deliver ${delivery.event}`,
      {
        kind: SPAN_KIND.PRODUCER,
        links: telemetry.linkTo(claimed.traceparent),
        attributes: {
          'messaging.system': 'webhook',
          'messaging.operation.type': 'send',
          'messaging.destination.name': delivery.event,
          'messaging.message.id': String(deliveryKey(delivery)),
          'webhook.attempt': delivery.attemptCount + 1,
          'server.address': url.hostname,
          ...(url.port ? { 'server.port': Number(url.port) } : {}),
        },
      },
      async (span) => {
        const state = await this.#attemptOnce(claimed);
        if (span) {
          span.setAttribute('webhook.state', state);
          if (state !== 'delivered') telemetry.fail(span, state === 'pending' ? 'retry' : state);
        }
      },
    );
  }

  /** One attempt; the delivery's state after it, or 'released' when the stop cut it short. */
  async #attemptOnce({ delivery, claim }: Claim): Promise<DeliveryState | 'released'> {
    const started = this.#now();
    let statusCode: number | null = null;
    let error: string | null = null;
    // A monotonic clock for the duration: `now` may be a test's fixed or stepped clock.
    const sendStarted = performance.now();
    const cut = new AbortController();
    this.#sending.add(cut);
    try {
      statusCode = (await this.#send(delivery.url, this.headersFor(delivery, started), delivery.body, cut.signal)).status;
    } catch (problem) {
      error = describeSendError(problem, this.#timeoutMs);
    } finally {
      this.#sending.delete(cut);
    }
    if (cut.signal.aborted) {
      // Cut short by stop: not the receiver's failure, so no attempt is counted; the claim goes back at once, so that
      // another instance sends it now rather than when the lease ends (the receiver may have had it: it deduplicates
      // by X-Webhook-Delivery, as after a crash).
      const released = await this.outbox.release({ id: delivery.id, claim }).catch(() => false);
      this.#log.warn(
        { deliveryId: delivery.id, event: delivery.event, url: redactUrl(delivery.url), released },
        'webhook attempt cut short by the stop; released for another instance',
      );
      return 'released';
    }
    const seconds = (performance.now() - sendStarted) / 1000;
    const finished = this.#now();
    const succeeded = statusCode !== null && statusCode >= 200 && statusCode < 300;
    const attemptsMade = delivery.attemptCount + 1;
    const next = afterAttempt(attemptsMade, succeeded, finished);
    const state = await this.outbox.recordAttempt(
      { id: delivery.id, claim },
      { at: started.toISOString(), statusCode, error },
      { ...next, at: finished.toISOString() },
    );
    this.#observe?.({ event: delivery.event, outcome: OUTCOMES[state], seconds });
    const fields = { deliveryId: delivery.id, event: delivery.event, url: redactUrl(delivery.url), attempt: attemptsMade, statusCode, error };
    if (state === 'delivered') this.#log.info(fields, 'webhook delivered');
    else if (state === 'failed') this.#log.error(fields, `webhook failed after ${attemptsMade} attempts; giving up`);
    else if (state === 'pending') this.#log.warn({ ...fields, nextAttemptAt: next.nextAttemptAt }, 'webhook attempt failed; will retry');
    else this.#log.warn(fields, `webhook attempt failed; the delivery was ${state} meanwhile, so no retry`);
    return state;
  }

  /** Whether the loop is running. */
  get running(): boolean {
    return this.#loop !== undefined;
  }

  /**
   * Starts the loop (once): due deliveries, including those left by an
   * earlier process, go out at once. Resolves when the dispatcher hears
   * the other instances (or knows it cannot, and polls).
   */
  async start(): Promise<void> {
    if (!this.#loop) {
      this.#stopping = false;
      const listening = this.#listen();
      this.#listening = listening;
      // Listening first: what is enqueued between the loop's first look and the subscription is not missed.
      this.#loop = listening.then(() => this.#runLoop());
    }
    await this.#listening;
  }

  async #listen(): Promise<void> {
    try {
      this.#unlisten = await this.outbox.listen(() => this.notify());
    } catch (problem) {
      this.#log.warn(
        { error: (problem as Error).message },
        `cannot hear the other instances; looking at the outbox every ${this.#maxSleepMs / 1000} s instead`,
      );
    }
  }

  /** Says that something was enqueued: the loop looks at the outbox now instead of when it would wake. */
  notify(): void {
    this.#poked = true;
    this.#wake?.();
  }

  /**
   * Stops the loop: nothing more is claimed; the attempts in flight are
   * recorded when they end, and those still running after `deadlineMs`
   * (default: no limit but the send time-out) are cut short and their
   * claims released for another instance (see `WebhookOutbox.release`).
   * Then it leaves the senders.
   */
  async stop(options: { deadlineMs?: number | undefined } = {}): Promise<void> {
    this.#stopping = true;
    this.#closing = true;
    this.#wake?.();
    let deadline: unknown;
    if (options.deadlineMs !== undefined) {
      deadline = this.#timers.setTimeout(() => {
        for (const cut of this.#sending) cut.abort();
      }, options.deadlineMs);
    }
    try {
      await this.#loop;
      await this.#run?.catch(() => 0);
    } finally {
      this.#closing = false;
      if (deadline !== undefined) this.#timers.clearTimeout(deadline);
    }
    const unlisten = this.#unlisten;
    this.#unlisten = undefined;
    await unlisten?.();
    if (this.#renewAt !== undefined) {
      this.#renewAt = undefined;
      // Failing that (the database is away), the word lapses by itself.
      await this.outbox.removeSender(this.#senderId).catch(() => undefined);
    }
    this.#loop = undefined;
    this.#listening = undefined;
  }

  async #runLoop(): Promise<void> {
    while (!this.#stopping) {
      this.#poked = false;
      try {
        await this.runDue();
      } catch (problem) {
        this.#log.error({ error: (problem as Error).message }, 'webhook dispatch failed; will look again');
      }
      if (this.#stopping) break;
      if (this.#poked) continue;
      const ms = await this.#sleepMs();
      if (this.#stopping) break;
      if (this.#poked) continue;
      await this.#sleep(ms);
    }
  }

  async #sleepMs(): Promise<number> {
    let dueAt: Date | undefined;
    try {
      // Only what this dispatcher may send: a delivery to another instance's URL is that instance's to wake for.
      dueAt = await this.outbox.nextDueAt(this.#urls);
    } catch {
      dueAt = undefined;
    }
    // The senders' list is renewed before its word lapses, even when nothing is due.
    const limit = this.#renewAt === undefined ? this.#maxSleepMs : Math.min(this.#maxSleepMs, Math.max(0, this.#renewAt - this.#now().getTime()));
    if (!dueAt) return limit;
    return Math.min(limit, Math.max(0, dueAt.getTime() - this.#now().getTime()));
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      let handle: unknown;
      const done = () => {
        this.#timers.clearTimeout(handle);
        this.#wake = undefined;
        resolve();
      };
      this.#wake = done;
      handle = this.#timers.setTimeout(done, ms);
    });
  }
}
