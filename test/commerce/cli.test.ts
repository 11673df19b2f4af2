/**
 * The commerce commands from the CLI against a real `miniapp serve` process
 * on a fresh data dir (SQLite) or a fresh PostgreSQL database: set stock,
 * create an order, pay it, see it PAID, refund part of it, and watch the
 * stock and the payment change; bad flags exit 2 and send nothing.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Sandbox } from '../helpers/cli.js';
import { BACKENDS, createTestDatabase, type TestDatabase } from '../helpers/postgres.js';

const bin = fileURLToPath(new URL('../../bin/miniapp.cjs', import.meta.url));

describe.each(BACKENDS)('miniapp inventory | orders | payments against serve on %s', (backend) => {
  let sb: Sandbox;
  let child: ChildProcess | undefined;
  let database: TestDatabase | undefined;

  beforeEach(async () => {
    sb = new Sandbox();
    database = backend === 'postgres' ? await createTestDatabase() : undefined;
    const args = [bin, 'serve', '--port', '0', '--grpc-port', '0', '--json', '--log-level', 'warn', '--drain', '0', ...(database ? ['--database', database.url] : [])];
    child = spawn(process.execPath, args, { env: { PATH: process.env.PATH, HOME: sb.root, ...sb.env } as NodeJS.ProcessEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stderr!.on('data', (chunk) => (err += chunk));
    await new Promise<void>((resolve, reject) => {
      child!.stdout!.on('data', (chunk) => {
        out += chunk;
        if (out.includes('\n')) resolve();
      });
      child!.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${err}`)));
    });
  });
  afterEach(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child!.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    await database?.drop();
    sb.dispose();
  });

  const json = async (argv: string[]) => {
    const result = await sb.run([...argv, '--json']);
    expect(result.code, `${argv.join(' ')}: ${result.stderr}`).toBe(0);
    return JSON.parse(result.stdout);
  };

  it('set stock, create an order, pay it, see it PAID, refund part of it; the stock and the payment change', async () => {
    const set = await json(['inventory', 'set', 'MUG', '--quantity', '10', '--price', '12000', '--name', 'Mug']);
    expect(set).toMatchObject({ sku: 'MUG', name: 'Mug', price: 12000, currency: 'KRW', on_hand: 10, reserved: 0, available: 10 });
    await json(['inventory', 'adjust', 'MUG', '--by', '-1', '--reason', 'broken in the shop']);

    const created = await sb.run(['orders', 'create', '--item', 'MUG:2']);
    expect(created.code, created.stderr).toBe(0);
    const key = /idempotency key: (\S+)/.exec(created.stderr)![1]!;
    const orderId = /^id\t(ord_\S+)$/m.exec(created.stdout)![1]!;
    expect(created.stdout).toMatch(/^status\tRESERVED$/m);
    expect(created.stdout).toMatch(/^total\t24,000 KRW$/m);
    // The printed key retries safely: the same order, nothing reserved twice.
    expect((await json(['orders', 'create', '--item', 'MUG:2', '--idempotency-key', key])).id).toBe(orderId);
    expect(await json(['inventory', 'stock', 'MUG'])).toEqual([expect.objectContaining({ on_hand: 9, reserved: 2, available: 7 })]);

    const paid = await json(['orders', 'pay', orderId, '--idempotency-key', 'pay-1']);
    expect(paid).toMatchObject({ status: 'DONE', amount: 24000, balance: 24000, method: 'test_approve', order_id: orderId });
    expect(await json(['orders', 'get', orderId])).toMatchObject({ status: 'PAID', payment_id: paid.id, total_amount: 24000 });
    expect((await json(['orders', 'list', '--status', 'paid'])).map((o: { id: string }) => o.id)).toEqual([orderId]);
    expect(await json(['inventory', 'stock'])).toEqual([expect.objectContaining({ sku: 'MUG', on_hand: 7, reserved: 0, available: 7 })]);

    const refund = await sb.run(['payments', 'refund', paid.id, '--amount', '12000', '--reason', 'one mug arrived broken']);
    expect(refund.code, refund.stderr).toBe(0);
    expect(refund.stdout).toMatch(/^status\tPARTIAL_CANCELED$/m);
    expect(refund.stdout).toMatch(/^balance\t12,000 KRW$/m);
    expect(refund.stderr).toContain('refunded 12,000 KRW');
    const payment = await json(['payments', 'get', paid.id]);
    expect(payment).toMatchObject({ status: 'PARTIAL_CANCELED', balance: 12000, refunds: [{ amount: 12000, reason: 'one mug arrived broken', status: 'DONE' }] });
    const above = await sb.run(['payments', 'refund', paid.id, '--amount', '12001', '--reason', 'too much']);
    expect(above.code).toBe(1);
    expect(above.stderr).toContain(`FAILED_PRECONDITION: a refund of 12001 KRW is more than the balance of payment ${paid.id} (12000 KRW)`);

    const cancelled = await json(['orders', 'cancel', orderId, '--reason', 'returned']);
    expect(cancelled).toMatchObject({ status: 'CANCELLED', cancel_reason: 'returned' });
    expect(await json(['payments', 'get', paid.id])).toMatchObject({ status: 'CANCELED', balance: 0 });
    expect(await json(['inventory', 'stock', 'MUG'])).toEqual([expect.objectContaining({ on_hand: 9, reserved: 0 })]);
  });

  it('a declined payment and a short order exit 1 with the status; bad flags exit 2 and send nothing', async () => {
    await json(['inventory', 'set', 'TEA', '--quantity', '1', '--price', '4500']);
    const short = await sb.run(['orders', 'create', '--item', 'TEA:2', '--idempotency-key', 'k1']);
    expect(short.code).toBe(1);
    expect(short.stderr).toContain('FAILED_PRECONDITION: not enough stock: TEA (asked 2, available 1)');
    const order = await json(['orders', 'create', '--item', 'TEA:1']);
    const declined = await json(['orders', 'pay', order.id, '--method', 'test_decline_card_declined']);
    expect(declined).toMatchObject({ status: 'ABORTED', failure_code: 'CARD_DECLINED' });
    expect((await json(['orders', 'get', order.id])).status).toBe('PAYMENT_FAILED');
    for (const argv of [
      ['orders', 'create', '--item', 'TEA'],
      ['orders', 'create', '--item', 'TEA:0'],
      ['orders', 'create', '--item', 'TEA:1', '--item', 'TEA:2'],
      ['orders', 'create', '--item', 'TEA:1', '--idempotency-key', 'has space'],
      ['orders', 'get', '42'],
      ['orders', 'list', '--status', 'shipped'],
      ['inventory', 'set', 'TEA', '--quantity', '-3'],
      ['inventory', 'set', 'T E A', '--quantity', '3'],
      ['inventory', 'adjust', 'TEA', '--by', '0', '--reason', 'x'],
      ['inventory', 'adjust', 'TEA', '--by', '2'],
      ['payments', 'refund', 'pay_x', '--amount', '0', '--reason', 'x'],
      ['payments', 'refund', 'nope', '--reason', 'x'],
    ]) {
      const result = await sb.run(argv);
      expect(result.code, argv.join(' ')).toBe(2);
    }
    expect(await json(['orders', 'list'])).toHaveLength(1);
    expect(await json(['inventory', 'stock', 'TEA'])).toEqual([expect.objectContaining({ on_hand: 1, reserved: 0 })]);
  });
});
