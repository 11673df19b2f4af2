/**
 * `miniapp webhooks list` and `miniapp webhooks verify` through the
 * in-process CLI; list on both backends (--data-dir, --database, and their
 * environment variables). They need the 'webhooks' entry in GROUPS
 * (src/cli/main.ts).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GROUPS } from '../../src/cli/main.js';
import { POST_CREATED } from '../../src/blog/posts.js';
import { signBody, signStandard } from '../../src/webhooks/signature.js';
import { WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { BACKENDS } from '../helpers/postgres.js';
import { Sandbox } from '../helpers/cli.js';
import { webhookDatabase, type WebhookTestDatabase } from './backend.js';

const SECRET = 'cli-test-secret';
const T0 = new Date('2026-11-21T12:00:00.000Z');

let sb: Sandbox;
let dir: string;

beforeEach(() => {
  sb = new Sandbox();
  dir = mkdtempSync(join(tmpdir(), 'miniapp-webhooks-cli-'));
});
afterEach(() => {
  sb.dispose();
  rmSync(dir, { recursive: true, force: true });
});

it('the webhooks group is registered in src/cli/main.ts GROUPS', () => {
  const group = GROUPS.find((g) => g.name === 'webhooks');
  expect(group, "add the 'webhooks' entry to GROUPS in src/cli/main.ts").toBeDefined();
  expect(group!.summary.length).toBeLessThan(50);
});

describe.each(BACKENDS)('webhooks list on %s', (backend) => {
  let database: WebhookTestDatabase;
  beforeEach(async () => {
    database = await webhookDatabase(backend);
  });
  afterEach(async () => {
    await database.dispose();
  });

  /** serve's database with three deliveries: delivered, pending after a refused connection, failed after four 500s. */
  async function fill(): Promise<{ body: string }> {
    let now = T0;
    const store = await database.open();
    const answers = new Map<string, () => Promise<{ status: number }>>([
      ['http://127.0.0.1:9/ok', async () => ({ status: 200 })],
      [
        'http://127.0.0.1:9/down',
        async () => {
          throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' });
        },
      ],
      ['http://127.0.0.1:9/broken', async () => ({ status: 500 })],
    ]);
    const hooks = new WebhookDispatcher({ store, secret: SECRET, now: () => now, version: '1.0.0', send: (url) => answers.get(url)!() });
    await hooks.outbox.enqueue(POST_CREATED, { id: 1, title: 'First' }, ['http://127.0.0.1:9/ok', 'http://127.0.0.1:9/down']);
    await hooks.outbox.enqueue(POST_CREATED, { id: 2, title: 'Second' }, ['http://127.0.0.1:9/broken']);
    await hooks.runDue();
    // Only the broken one is retried through to failure: the down one stays pending at +1 min.
    const postpone = (ms: number) =>
      store.sql.run(`UPDATE webhook_deliveries SET next_attempt_at = $1 WHERE url LIKE '%/down'`, [new Date(T0.getTime() + ms).toISOString()]);
    for (const minutes of [1, 6, 36]) {
      now = new Date(T0.getTime() + minutes * 60_000);
      await postpone(86_400_000);
      await hooks.runDue();
    }
    await postpone(60_000);
    const body = (await hooks.outbox.list())[0]!.body;
    await store.close();
    return { body };
  }

  const list = (argv: string[]) => sb.run(['webhooks', 'list', ...database.cliFlags, ...argv]);

  it('prints one tab-separated row per delivery, oldest first, when piped', async () => {
    await fill();
    const result = await list([]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const rows = result.stdout
      .trimEnd()
      .split('\n')
      .map((line) => line.split('\t'));
    expect(rows).toEqual([
      ['1', 'post.created', 'http://127.0.0.1:9/ok', 'delivered', '1', '', 'HTTP 200', T0.toISOString()],
      ['2', 'post.created', 'http://127.0.0.1:9/down', 'pending', '1', '2026-11-21T12:01:00.000Z', 'connect ECONNREFUSED 127.0.0.1:9', T0.toISOString()],
      ['3', 'post.created', 'http://127.0.0.1:9/broken', 'failed', '4', '', 'HTTP 500', T0.toISOString()],
    ]);
  });

  it('shows a table with headers on a terminal', async () => {
    await fill();
    const result = await sb.run(['webhooks', 'list', ...database.cliFlags, '--no-color'], { tty: true });
    expect(result.code).toBe(0);
    for (const header of ['id', 'event', 'url', 'state', 'attempts', 'next attempt', 'last result', 'created']) {
      expect(result.stdout).toContain(header);
    }
    expect(result.stdout).toContain('failed');
  });

  it('--json prints every delivery with its body and all its attempts', async () => {
    const { body } = await fill();
    const result = await list(['--json']);
    expect(result.code).toBe(0);
    const deliveries = JSON.parse(result.stdout) as any[];
    expect(deliveries).toHaveLength(3);
    expect(deliveries[0]).toEqual({
      id: 1,
      event: 'post.created',
      url: 'http://127.0.0.1:9/ok',
      body,
      state: 'delivered',
      attemptCount: 1,
      nextAttemptAt: null,
      createdAt: T0.toISOString(),
      updatedAt: T0.toISOString(),
      originalId: null,
      key: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
      attempts: [{ at: T0.toISOString(), statusCode: 200, error: null }],
    });
    expect(JSON.parse(deliveries[0].body)).toEqual({ event: 'post.created', timestamp: T0.toISOString(), data: { id: 1, title: 'First' } });
    expect(deliveries[1].attempts).toEqual([{ at: T0.toISOString(), statusCode: null, error: 'connect ECONNREFUSED 127.0.0.1:9' }]);
    expect(deliveries[2].attempts.map((a: any) => a.at)).toEqual([0, 1, 6, 36].map((m) => new Date(T0.getTime() + m * 60_000).toISOString()));
  });

  it('--state filters', async () => {
    await fill();
    const result = await list(['--state', 'failed', '--json']);
    expect((JSON.parse(result.stdout) as any[]).map((d) => d.id)).toEqual([3]);
    const bad = await list(['--state', 'lost']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--state must be one of pending, delivered, failed');
  });

  it("finds serve's database through the environment", async () => {
    await fill();
    const result = await sb.run(['webhooks', 'list', '--json'], { env: database.cliEnv });
    expect(result.stderr).toBe('');
    expect(JSON.parse(result.stdout)).toHaveLength(3);
  });
});

describe("webhooks list without serve's database", () => {
  it('says so when serve has not created the SQLite database yet', async () => {
    const result = await sb.run(['webhooks', 'list', '--data-dir', join(dir, 'nothing-here')]);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('no database at');
    const json = await sb.run(['webhooks', 'list', '--data-dir', join(dir, 'nothing-here'), '--json']);
    expect(JSON.parse(json.stdout)).toEqual([]);
  });

  it('says which PostgreSQL it could not reach, without its password', async () => {
    const result = await sb.run(['webhooks', 'list', '--database', 'postgres://miniapp:s3cret@127.0.0.1:1/miniapp']);
    expect(result.code).not.toBe(0);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('cannot reach the database at postgres://miniapp:***@127.0.0.1:1/miniapp');
    expect(result.stderr).not.toContain('s3cret');
  });
});

describe('webhooks verify', () => {
  const body = '{"event":"post.created","timestamp":"2026-11-21T12:00:00.000Z","data":{"id":1,"title":"Grüße"}}\n';
  const signature = signBody(body, SECRET);

  function bodyFile(content: string | Buffer = body): string {
    const file = join(dir, 'body.json');
    writeFileSync(file, content);
    return file;
  }

  it('exits 0 for a valid signature over a file', async () => {
    const result = await sb.run(['webhooks', 'verify', '--secret', SECRET, '--signature', signature, bodyFile()]);
    expect(result).toMatchObject({ code: 0, stdout: 'signature valid\n' });
  });

  it('reads stdin, takes the secret from MINIAPP_WEBHOOK_SECRET, prints JSON with --json', async () => {
    const result = await sb.run(['webhooks', 'verify', '--signature', signature, '-', '--json'], {
      stdin: body,
      env: { MINIAPP_WEBHOOK_SECRET: SECRET },
    });
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ valid: true, checked: ['X-Webhook-Signature'] });
    const implicit = await sb.run(['webhooks', 'verify', '--signature', signature], { stdin: body, env: { MINIAPP_WEBHOOK_SECRET: SECRET } });
    expect(implicit.code).toBe(0);
  });

  it('checks the raw bytes: a body that is not valid UTF-8 verifies as it is', async () => {
    const raw = Buffer.concat([Buffer.from('{"x":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}\r\n')]);
    const result = await sb.run(['webhooks', 'verify', '--secret', SECRET, '--signature', signBody(raw, SECRET), bodyFile(raw)]);
    expect(result.code).toBe(0);
  });

  it('tolerates an upper-case signature with whitespace around it', async () => {
    const result = await sb.run(['webhooks', 'verify', '--secret', SECRET, '--signature', ` ${signature.toUpperCase()} `, bodyFile()]);
    expect(result.code).toBe(0);
  });

  it('exits 1 for another secret', async () => {
    const result = await sb.run(['webhooks', 'verify', '--secret', 'wrong', '--signature', signature, bodyFile()]);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('signature does not match (X-Webhook-Signature)');
  });

  it('exits 1 for a tampered body, even one only re-formatted or without its final newline', async () => {
    for (const tampered of [body.replace('Grüße', 'Grusse'), body.trimEnd(), `${JSON.stringify(JSON.parse(body), null, 2)}\n`]) {
      const result = await sb.run(['webhooks', 'verify', '--secret', SECRET, '--signature', signature, bodyFile(tampered)]);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain('signature does not match');
    }
  });

  it('exits 2 without a secret, without a signature, or with a malformed one', async () => {
    const noSecret = await sb.run(['webhooks', 'verify', '--signature', signature, bodyFile()]);
    expect(noSecret.code).toBe(2);
    expect(noSecret.stderr).toContain('MINIAPP_WEBHOOK_SECRET');
    const noSignature = await sb.run(['webhooks', 'verify', '--secret', SECRET, bodyFile()]);
    expect(noSignature.code).toBe(2);
    expect(noSignature.stderr).toContain('--signature');
    const malformed = await sb.run(['webhooks', 'verify', '--secret', SECRET, '--signature', signature.slice(7), bodyFile()]);
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toContain('sha256=<64 hex digits>');
  });

  describe("Standard Webhooks' webhook-signature", () => {
    const at = new Date('2026-11-21T12:30:00.000Z');
    /** The headers a real attempt made at `at` carries. */
    const attempt = async () => {
      const database = await webhookDatabase('sqlite');
      const store = await database.open();
      const dispatcher = new WebhookDispatcher({ store, secret: SECRET, now: () => at, version: 'test' });
      const headers = dispatcher.headersFor({ id: 1, event: POST_CREATED, body, key: '0196a1f2-7c00-7000-8000-000000000001' }, at);
      await database.dispose();
      return headers;
    };
    const standardArgs = (headers: Record<string, string>) => [
      '--webhook-id',
      headers['webhook-id']!,
      '--webhook-timestamp',
      headers['webhook-timestamp']!,
      '--webhook-signature',
      headers['webhook-signature']!,
    ];

    it('exits 0 when the headers of a delivery match its body, checking both signatures when both are given', async () => {
      const headers = await attempt();
      const standard = await sb.run(['webhooks', 'verify', '--secret', SECRET, ...standardArgs(headers), bodyFile()], { now: at });
      expect(standard).toMatchObject({ code: 0, stdout: 'valid: webhook-signature\n', stderr: '' });
      const both = await sb.run(['webhooks', 'verify', '--signature', headers['x-webhook-signature']!, ...standardArgs(headers), bodyFile(), '--json'], {
        env: { MINIAPP_WEBHOOK_SECRET: SECRET },
        now: at,
      });
      expect(both.code).toBe(0);
      expect(JSON.parse(both.stdout)).toEqual({ valid: true, checked: ['X-Webhook-Signature', 'webhook-signature'] });
    });

    it("takes a secret in the libraries' form (whsec_ and base64) as they do", async () => {
      const secret = `whsec_${Buffer.from('k'.repeat(32)).toString('base64')}`;
      const signature = signStandard('msg_1', 1_795_000_000, body, secret);
      const args = ['--webhook-id', 'msg_1', '--webhook-timestamp', '1795000000', '--webhook-signature', signature];
      expect((await sb.run(['webhooks', 'verify', '--secret', secret, ...args, bodyFile()], { now: new Date(1_795_000_000_000) })).code).toBe(0);
      expect((await sb.run(['webhooks', 'verify', '--secret', 'k'.repeat(32), ...args, bodyFile()], { now: new Date(1_795_000_000_000) })).code).toBe(0);
    });

    it('exits 1 when the id, the timestamp or the body is not the one signed', async () => {
      const headers = await attempt();
      for (const [what, change] of [
        ['id', { 'webhook-id': 'another-delivery' }],
        ['timestamp', { 'webhook-timestamp': String(Number(headers['webhook-timestamp']) + 60) }],
      ] as const) {
        const result = await sb.run(['webhooks', 'verify', '--secret', SECRET, ...standardArgs({ ...headers, ...change }), bodyFile()], { now: at });
        expect({ code: result.code, stdout: result.stdout }, what).toEqual({ code: 1, stdout: '' });
        expect(result.stderr).toContain('webhook-signature does not match');
      }
      const tampered = await sb.run(['webhooks', 'verify', '--secret', SECRET, ...standardArgs(headers), bodyFile(body.trimEnd())], { now: at });
      expect(tampered.code).toBe(1);
    });

    it('says when the timestamp is past the standard 5-minute tolerance, and still exits 0 for a valid signature', async () => {
      const headers = await attempt();
      const later = new Date(at.getTime() + 42 * 60_000);
      const result = await sb.run(['webhooks', 'verify', '--secret', SECRET, ...standardArgs(headers), bodyFile()], { now: later });
      expect(result).toMatchObject({ code: 0, stdout: 'valid: webhook-signature\n' });
      expect(result.stderr).toContain(
        "the webhook-timestamp (2026-11-21T12:30:00.000Z) is 42m old: a receiver with Standard Webhooks' 5-minute tolerance refuses it now",
      );
    });

    it('exits 2 without its id or timestamp, or with a malformed signature or timestamp', async () => {
      const headers = await attempt();
      const noId = await sb.run([
        'webhooks',
        'verify',
        '--secret',
        SECRET,
        '--webhook-signature',
        headers['webhook-signature']!,
        '--webhook-timestamp',
        '1',
        bodyFile(),
      ]);
      expect(noId.code).toBe(2);
      expect(noId.stderr).toContain('pass --webhook-id too');
      const onlyId = await sb.run(['webhooks', 'verify', '--secret', SECRET, '--webhook-id', 'x', bodyFile()]);
      expect(onlyId.stderr).toContain('pass --webhook-signature and --webhook-timestamp too');
      const malformed = await sb.run([
        'webhooks',
        'verify',
        '--secret',
        SECRET,
        ...standardArgs({ ...headers, 'webhook-signature': headers['x-webhook-signature']! }),
        bodyFile(),
      ]);
      expect(malformed.code).toBe(2);
      expect(malformed.stderr).toContain('--webhook-signature must hold v1,<base64 of 32 bytes>');
      const when = await sb.run([
        'webhooks',
        'verify',
        '--secret',
        SECRET,
        ...standardArgs({ ...headers, 'webhook-timestamp': '2026-11-21T12:30:00Z' }),
        bodyFile(),
      ]);
      expect(when.code).toBe(2);
      expect(when.stderr).toContain('--webhook-timestamp must be whole seconds since 1970');
    });
  });

  it('exits 2 for a missing file or no input at all', async () => {
    const missing = await sb.run(['webhooks', 'verify', '--secret', SECRET, '--signature', signature, join(dir, 'nope.json')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no such file');
    const tty = await sb.run(['webhooks', 'verify', '--secret', SECRET, '--signature', signature]);
    expect(tty.code).toBe(2);
    expect(tty.stderr).toContain('pass a FILE argument or pipe it on stdin');
  });
});
