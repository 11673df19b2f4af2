/**
 * Two instances, A and B, on one PostgreSQL (issue 12): each is a process of
 * its own (test/fixtures/webhook-instance.mjs, serve's webhook side built
 * from dist/), both dispatchers run, and the receivers are real HTTP servers
 * on 127.0.0.1 that check every signature. A post created on one instance
 * is delivered once per URL; an instance killed with SIGKILL in the middle
 * of a send loses its claim when the lease ends and the other delivers; a
 * resend by the CLI wakes them at once (their own timers would sleep an
 * hour).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fork, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { openStore, type Store } from '../../src/store/store.js';
import { verifySignature } from '../../src/webhooks/signature.js';
import { WebhookOutbox } from '../../src/webhooks/outbox.js';
import type { Delivery } from '../../src/webhooks/delivery.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { Sandbox } from '../helpers/cli.js';

const SECRET = 'whsec-two-instances';
const INSTANCE = fileURLToPath(new URL('../fixtures/webhook-instance.mjs', import.meta.url));
const HOUR = 3_600_000;

interface Request {
  /** Which instance sent it: the name after miniapp-webhooks/ in its user-agent. */
  from: string;
  headers: IncomingHttpHeaders;
  body: string;
  valid: boolean;
}

class Receiver {
  readonly received: Request[] = [];
  /** Requests left unanswered (the first `hold` of them); the rest get 204. */
  hold = 0;
  readonly #server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const signature = req.headers['x-webhook-signature'];
      this.received.push({
        from: String(req.headers['user-agent']).replace('miniapp-webhooks/', ''),
        headers: req.headers,
        body,
        valid: typeof signature === 'string' && verifySignature(body, SECRET, signature),
      });
      if (this.hold > 0) {
        this.hold--;
        this.#held.push(res);
      } else {
        res.writeHead(204).end();
      }
    });
  });
  readonly #held: ServerResponse[] = [];
  url = '';

  async listen(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/hook`;
    return this;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/** One instance: a child process, its answers to orders, its log and stderr (shown when a test fails). */
class Instance {
  readonly #answers: Record<string, unknown>[] = [];
  readonly logs: { level: string; message: string }[] = [];
  stderr = '';
  exited: Promise<NodeJS.Signals | number | null>;

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    child.stderr!.on('data', (chunk: Buffer) => (this.stderr += chunk.toString()));
    child.on('message', (message: Record<string, unknown>) => {
      if (message.log) this.logs.push(message.log as { level: string; message: string });
      else this.#answers.push(message);
    });
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  }

  /** The next answer with this key. */
  async answer<T>(key: string): Promise<T> {
    await until(() => this.#answers.some((a) => key in a || 'error' in a) || this.child.exitCode !== null, `${this.name} to answer ${key}`, this);
    const index = this.#answers.findIndex((a) => key in a || 'error' in a);
    if (index < 0) throw new Error(`${this.name} exited (${this.child.exitCode}) before answering ${key}:\n${this.stderr}`);
    const [answer] = this.#answers.splice(index, 1);
    if ('error' in answer!) throw new Error(`${this.name}: ${String(answer.error)}`);
    return answer![key] as T;
  }

  async publish(post: object): Promise<number[]> {
    this.child.send({ publish: post });
    return this.answer<number[]>('published');
  }

  async runDue(): Promise<number> {
    this.child.send({ runDue: true });
    return this.answer<number>('ran');
  }
}

let database: TestDatabase;
let store: Store;
let outbox: WebhookOutbox;
const instances: Instance[] = [];
const receivers: Receiver[] = [];

async function start(name: string, urls: string[], options: { leaseMs?: number; maxSleepMs?: number } = {}): Promise<Instance> {
  const config = { database: database.url, name, urls, secret: SECRET, ...options };
  const child = fork(INSTANCE, [JSON.stringify(config)], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  const instance = new Instance(name, child);
  instances.push(instance);
  expect(await instance.answer<boolean>('ready')).toBe(true);
  return instance;
}

async function receiver(): Promise<Receiver> {
  const made = await new Receiver().listen();
  receivers.push(made);
  return made;
}

async function delivered(ids: number[]): Promise<Delivery[]> {
  let deliveries: Delivery[] = [];
  await until(
    async () => {
      deliveries = await Promise.all(ids.map(async (id) => (await outbox.get(id))!));
      return deliveries.every((d) => d.state === 'delivered');
    },
    `deliveries ${ids.join(', ')} to be delivered`,
  );
  return deliveries;
}

beforeEach(async () => {
  database = await createTestDatabase();
  store = await openStore({ kind: 'postgres', url: database.url, poolSize: 2 });
  outbox = new WebhookOutbox(store);
});
afterEach(async () => {
  for (const instance of instances.splice(0)) {
    if (instance.child.exitCode === null && instance.child.signalCode === null) instance.child.kill('SIGKILL');
    await instance.exited;
  }
  for (const r of receivers.splice(0)) await r.close();
  await store.close();
  await database.drop();
});

describe('two instances on one PostgreSQL, both dispatchers running', () => {
  it('posts created on A give exactly one delivery per URL', async () => {
    const [one, two] = await Promise.all([receiver(), receiver()]);
    const urls = [one.url, two.url];
    const [a, b] = await Promise.all([start('A', urls), start('B', urls)]);
    const posts = Array.from({ length: 6 }, (_, i) => ({ id: i + 1, title: `Post ${i + 1}`, content: 'Body', tags: [], is_published: true }));
    const ids = (await Promise.all(posts.map((post) => a.publish(post)))).flat();
    expect(ids).toHaveLength(12);

    const deliveries = await delivered(ids);
    // Whatever either dispatcher was doing has finished: nothing more is sent.
    expect(await Promise.all([a.runDue(), b.runDue()])).toEqual([0, 0]);
    expect(deliveries.every((d) => d.attemptCount === 1)).toBe(true);
    for (const r of [one, two]) {
      const sent = deliveries.filter((d) => d.url === r.url).map((d) => d.key!);
      expect(sent).toHaveLength(6);
      expect(r.received.map((got) => got.headers['x-webhook-delivery']).sort()).toEqual(sent.sort());
      expect(r.received.every((got) => got.valid)).toBe(true);
      expect(new Set(r.received.map((got) => JSON.parse(got.body).data.id))).toEqual(new Set([1, 2, 3, 4, 5, 6]));
    }
    expect(await outbox.count()).toBe(12);
  });

  it('when the instance that claimed a delivery is killed with SIGKILL mid-send, the other sends it once the lease ends: same X-Webhook-Delivery, body and signature', async () => {
    const hook = await receiver();
    hook.hold = 1;
    const LEASE = 1_500;
    // Their own timers would sleep an hour: only the lease's end (or a signal) wakes them.
    const [a, b] = await Promise.all([
      start('A', [hook.url], { leaseMs: LEASE, maxSleepMs: HOUR }),
      start('B', [hook.url], { leaseMs: LEASE, maxSleepMs: HOUR }),
    ]);
    const [id] = await a.publish({ id: 1, title: 'Claimed, then killed', content: 'Body', tags: [], is_published: true });

    await until(() => hook.received.length === 1, 'the first request');
    // Usually A (woken at its own commit), sometimes B (woken by NOTIFY): the claimer is killed, the other must deliver.
    const claimer = hook.received[0]!.from === 'A' ? a : b;
    const survivor = claimer === a ? b : a;
    claimer.child.kill('SIGKILL');
    expect(await claimer.exited).toBe('SIGKILL');
    const inFlight = await outbox.get(id!);
    expect(inFlight).toMatchObject({ state: 'pending', attemptCount: 0 });

    const [done] = await delivered([id!]);
    expect(hook.received).toHaveLength(2);
    const [first, second] = hook.received;
    expect(second!.from).toBe(survivor.name);
    expect(second!.headers['x-webhook-delivery']).toBe(inFlight!.key);
    expect(first!.headers['x-webhook-delivery']).toBe(inFlight!.key);
    expect(second!.body).toBe(first!.body);
    expect(second!.headers['x-webhook-signature']).toBe(first!.headers['x-webhook-signature']);
    expect(second!.valid).toBe(true);
    // The killed instance never recorded its attempt: one attempt, the survivor's, under the second claim.
    expect(done).toMatchObject({ state: 'delivered', attemptCount: 1, attempts: [{ statusCode: 204, error: null }] });
    expect(Date.parse(done!.attempts[0]!.at)).toBeGreaterThanOrEqual(Date.parse(inFlight!.nextAttemptAt!));
    expect((await store.sql.one<{ claims: number }>('SELECT claims FROM webhook_deliveries WHERE id = $1', [id!]))!.claims).toBe(2);
    expect(await survivor.runDue()).toBe(0);
    expect(hook.received).toHaveLength(2);
    expect(await outbox.count()).toBe(1);
  });

  it('a resend by the CLI wakes the instances at once, and one of them sends it with the same X-Webhook-Delivery', async () => {
    const hook = await receiver();
    await Promise.all([start('A', [hook.url], { maxSleepMs: HOUR }), start('B', [hook.url], { maxSleepMs: HOUR })]);
    const [id] = await instances[0]!.publish({ id: 1, title: 'Sent, then resent', content: 'Body', tags: [], is_published: true });
    await delivered([id!]);

    const sb = new Sandbox();
    try {
      const result = await sb.run(['webhooks', 'resend', String(id), '--database', database.url, '--json']);
      expect(result.code, result.stderr).toBe(0);
      const [queued] = (JSON.parse(result.stdout) as { queued: Delivery[] }).queued;
      await delivered([queued!.id]);
      const key = (await outbox.get(id!))!.key;
      expect(queued!.key).toBe(key);
      expect(hook.received.map((got) => got.headers['x-webhook-delivery'])).toEqual([key, key]);
      expect(hook.received[1]!.body).toBe(hook.received[0]!.body);
    } finally {
      sb.dispose();
    }
  });
});

async function until(condition: () => boolean | Promise<boolean>, what: string, instance?: Instance): Promise<void> {
  for (let i = 0; i < 1_500; i++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const stderr = [instance, ...instances]
    .filter(Boolean)
    .map((i) => `${i!.name}: ${i!.stderr}${JSON.stringify(i!.logs)}`)
    .join('\n');
  throw new Error(`gave up waiting for ${what}\n${stderr}`);
}
