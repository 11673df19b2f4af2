/**
 * The commerce commands from the CLI against a real `miniapp serve` process
 * on a fresh data dir (SQLite) or a fresh PostgreSQL database: set stock,
 * create an order, pay it, see it PAID, refund part of it, and watch the
 * stock and the payment change; bad flags exit 2 and send nothing.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Sandbox, plain } from '../helpers/cli.js';
import { BACKENDS, createTestDatabase, type TestDatabase } from '../helpers/postgres.js';

const bin = fileURLToPath(new URL('../../bin/miniapp.cjs', import.meta.url));

describe.each(BACKENDS)('miniapp inventory | orders | payments against serve on %s', (backend) => {
  let sb: Sandbox;
  let child: ChildProcess | undefined;
  let database: TestDatabase | undefined;

  beforeEach(async () => {
    sb = new Sandbox();
    database = backend === 'postgres' ? await createTestDatabase() : undefined;
    const args = [
      bin,
      'serve',
      '--port',
      '0',
      '--grpc-port',
      '0',
      '--json',
      '--log-level',
      'warn',
      '--drain',
      '0',
      ...(database ? ['--database', database.url] : []),
    ];
    child = spawn(process.execPath, args, {
      env: { PATH: process.env.PATH, HOME: sb.root, ...sb.env } as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
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
    expect(payment).toMatchObject({
      status: 'PARTIAL_CANCELED',
      balance: 12000,
      refunds: [{ amount: 12000, reason: 'one mug arrived broken', status: 'DONE' }],
    });
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
    // With --json, stderr is one JSON object, and the key made for the call rides in its hint, not a line of its own.
    const shortJson = await sb.run(['orders', 'create', '--item', 'TEA:2', '--json']);
    expect(shortJson.code).toBe(1);
    const failure = JSON.parse(shortJson.stderr) as { error: { code: string; hint: string } };
    expect(failure.error.code).toBe('FAILED_PRECONDITION');
    const madeKey = /--idempotency-key (\S+)$/.exec(failure.error.hint)![1]!;
    expect(madeKey).toMatch(/^[0-9a-f-]{36}$/);
    expect(shortJson.stderr).not.toContain('idempotency key:');
    const order = await json(['orders', 'create', '--item', 'TEA:1']);
    const declinedRun = await sb.run(['orders', 'pay', order.id, '--method', 'test_decline_card_declined', '--json']);
    expect(declinedRun.code).toBe(1);
    expect(JSON.parse(declinedRun.stdout)).toMatchObject({ status: 'ABORTED', failure_code: 'CARD_DECLINED' });
    expect(JSON.parse(declinedRun.stderr.trim().split('\n').at(-1)!)).toMatchObject({ error: { code: 'PAYMENT_DECLINED', exitCode: 1 } });
    expect((await json(['orders', 'get', order.id])).status).toBe('PAYMENT_FAILED');
    for (const argv of [
      ['orders', 'create'],
      ['orders', 'create', '--idempotency-key', 'no-items'],
      ['orders', 'create', '--item', 'TEA'],
      ['orders', 'create', '--item', 'TEA:0'],
      ['orders', 'create', '--item', 'TEA:1', '--item', 'TEA:2'],
      ['orders', 'create', '--item', 'TEA:1', '--idempotency-key', 'has space'],
      ['orders', 'get', '42'],
      ['orders', 'list', '--status', 'shipped'],
      ['inventory', 'set', 'TEA', '--quantity', '-3'],
      ['inventory', 'set', 'T E A', '--quantity', '3'],
      ['inventory', 'set', 'TEA'],
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
    // No --item: a usage error before anything is made or sent (no generated key on stderr).
    const none = await sb.run(['orders', 'create']);
    expect(none.stderr).toContain('orders create needs at least one --item SKU:QUANTITY');
    expect(none.stderr).not.toContain('idempotency key');
    expect(none.stdout).toBe('');
    const sent = await sb.run(['orders', 'create', '--idempotency-key', 'no-items']);
    expect(sent.code).toBe(2);
    // The key was never used: a real order may take it now.
    expect((await json(['orders', 'create', '--item', 'TEA:1', '--idempotency-key', 'no-items'])).status).toBe('RESERVED');
  });

  it('payment outcomes in exit codes: declined 1, unknown 5 with the exact retry command, which then succeeds', async () => {
    await json(['inventory', 'set', 'CUP', '--quantity', '5', '--price', '3000']);
    for (const method of ['test_decline_card_declined', 'test_decline_insufficient_funds']) {
      const order = await json(['orders', 'create', '--item', 'CUP:1']);
      const declined = await sb.run(['orders', 'pay', order.id, '--method', method]);
      expect(declined.code, declined.stderr).toBe(1);
      expect(declined.stdout).toMatch(/^status\tABORTED$/m);
      // The code once, then why, in the provider's words.
      expect(declined.stderr).toMatch(
        /^error: payment pay_\S+ of order ord_\S+ ABORTED \((?:CARD_DECLINED\): the card issuer declined the payment|INSUFFICIENT_FUNDS\): the card has not enough funds); the order is not paid$/m,
      );
      expect(declined.stderr.match(/CARD_DECLINED|INSUFFICIENT_FUNDS/g)).toHaveLength(1);
    }

    const order = await json(['orders', 'create', '--item', 'CUP:1']);
    const lost = await sb.run(['orders', 'pay', order.id, '--method', 'test_timeout', '--idempotency-key', 'pay-lost']);
    expect(lost.code, lost.stderr).toBe(5);
    expect(lost.stdout).toMatch(/^status\tIN_PROGRESS$/m);
    const retry = /ask again with exactly this command \(it never charges twice\): (miniapp .+)$/m.exec(lost.stderr)?.[1];
    expect(retry).toBe(`miniapp orders pay ${order.id} --method test_timeout --idempotency-key pay-lost`);
    // With --json the payment is still printed, and the exit code is the same.
    const other = await json(['orders', 'create', '--item', 'CUP:1']);
    const lostJson = await sb.run(['orders', 'pay', other.id, '--method', 'test_timeout', '--json']);
    expect(lostJson.code).toBe(5);
    expect(JSON.parse(lostJson.stdout)).toMatchObject({ order_id: other.id, status: 'IN_PROGRESS', method: 'test_timeout' });
    expect(lostJson.stderr).toContain('"code":"PAYMENT_OUTCOME_UNKNOWN"');
    // The printed command, run as printed, succeeds.
    const again = await sb.run(retry!.split(' ').slice(1));
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/^status\tDONE$/m);
    expect((await json(['orders', 'get', order.id])).status).toBe('PAID');

    const approved = await json(['orders', 'create', '--item', 'CUP:1']);
    const paid = await sb.run(['orders', 'pay', approved.id]);
    expect(paid.code, paid.stderr).toBe(0);
    expect(paid.stderr).toContain(`order ${approved.id} paid`);
  });

  it('orders list and users list keep ids, statuses and numbers whole at 60 and 120 columns, leaving whole columns out and naming them', async () => {
    await json(['inventory', 'set', 'LAMP', '--quantity', '9', '--price', '30000', '--name', 'A desk lamp with a long, long name']);
    const paid = await json(['orders', 'create', '--item', 'LAMP:1']);
    const payment = await json(['orders', 'pay', paid.id]);
    const failed = await json(['orders', 'create', '--item', 'LAMP:2']);
    expect((await sb.run(['orders', 'pay', failed.id, '--method', 'test_decline_card_declined'])).code).toBe(1);
    const reserved = await json(['orders', 'create', '--item', 'LAMP:3']);
    await json([
      'users',
      'create',
      '--username',
      'ann',
      '--email',
      'ann@example.com',
      '--password',
      'secret-pass-1',
      '--full-name',
      'Ann Long-Surname the Third',
    ]);

    const table = (stdout: string) => {
      const lines = plain(stdout).split('\n').filter(Boolean);
      const cells = (line: string) =>
        line
          .split('│')
          .slice(1, -1)
          .map((cell) => cell.trim());
      const headers = cells(lines[1]!);
      return { lines, headers, rows: lines.slice(2, -1).map((line) => Object.fromEntries(cells(line).map((cell, i) => [headers[i]!, cell]))) };
    };
    for (const width of [60, 120]) {
      const list = await sb.run(['orders', 'list', '--no-color'], { tty: true, columns: width });
      expect(list.code, list.stderr).toBe(0);
      const { lines, headers, rows } = table(list.stdout);
      for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(width);
      expect(list.stdout).not.toContain('…');
      expect(rows.map((r) => [r.id, r.status, r.total])).toEqual([
        [reserved.id, 'RESERVED', '90,000 KRW'],
        [failed.id, 'PAYMENT_FAILED', '60,000 KRW'],
        [paid.id, 'PAID', '30,000 KRW'],
      ]);
      const note = plain(list.stderr).replace(/\n/g, ' ');
      const omitted = ['user_id', 'items', 'payment_id', 'created_at'].filter((h) => !headers.includes(h));
      if (omitted.length) expect(note).toContain(`(not shown at ${width} columns: ${omitted.join(', ')}; a wider terminal or --json shows`);
      if (width === 120) expect(rows.map((r) => r.payment_id)).toEqual(['', expect.stringMatching(/^pay_/), payment.id]);

      const users = await sb.run(['users', 'list', '--no-color'], { tty: true, columns: width });
      expect(users.code, users.stderr).toBe(0);
      const u = table(users.stdout);
      for (const line of u.lines) expect(line.length, line).toBeLessThanOrEqual(width);
      expect(u.rows.map((r) => [r.id, r.username, r.email])).toEqual([['1', 'ann', 'ann@example.com']]);
      // Nobody has roles: the empty column takes no room.
      expect(u.headers).not.toContain('roles');
      if (width === 120) expect(u.rows[0]!.full_name).toBe('Ann Long-Surname the Third');
    }
  });

  it('refunds make the order PARTIALLY_REFUNDED, then REFUNDED, as payments refund and orders get|list say; cancelling it then restocks', async () => {
    await json(['inventory', 'set', 'BOWL', '--quantity', '4', '--price', '8000']);
    const order = await json(['orders', 'create', '--item', 'BOWL:2']);
    const payment = await json(['orders', 'pay', order.id]);
    const part = await sb.run(['payments', 'refund', payment.id, '--amount', '6000', '--reason', 'one chipped']);
    expect(part.code, part.stderr).toBe(0);
    expect(part.stderr).toContain(`refunded 6,000 KRW: payment ${payment.id} PARTIAL_CANCELED, balance 10,000 KRW; order ${order.id} PARTIALLY_REFUNDED`);
    expect((await json(['orders', 'list', '--status', 'partially_refunded'])).map((o: { id: string }) => o.id)).toEqual([order.id]);
    const refund = await sb.run(['payments', 'refund', payment.id, '--reason', 'never arrived']);
    expect(refund.code, refund.stderr).toBe(0);
    expect(refund.stdout).toMatch(/^status\tCANCELED$/m);
    expect(refund.stderr).toContain(`refunded 10,000 KRW: payment ${payment.id} CANCELED, balance 0 KRW; order ${order.id} REFUNDED`);
    const shown = await sb.run(['orders', 'get', order.id]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/^status\tREFUNDED$/m);
    expect(shown.stdout).toMatch(/^payment_status\tCANCELED$/m);
    expect(shown.stdout).toMatch(/^refunded\t16,000 KRW \(in full\)$/m);
    expect(shown.stderr).toContain(
      `refunded in full (payment CANCELED); its units stay sold until \`miniapp orders cancel ${order.id}\` puts them back on hand`,
    );
    expect(await json(['orders', 'get', order.id])).toMatchObject({
      status: 'REFUNDED',
      payment: { status: 'CANCELED', amount: 16000, balance: 0, refunded: 16000 },
    });
    expect((await json(['orders', 'list', '--status', 'refunded'])).map((o: { id: string }) => o.id)).toEqual([order.id]);
    expect(await json(['inventory', 'stock', 'BOWL'])).toEqual([expect.objectContaining({ on_hand: 2, reserved: 0 })]);
    expect(await json(['orders', 'cancel', order.id, '--reason', 'returned'])).toMatchObject({ status: 'CANCELLED' });
    expect(await json(['inventory', 'stock', 'BOWL'])).toEqual([expect.objectContaining({ on_hand: 4, reserved: 0 })]);
  });

  it('inventory set changes a price without --quantity, leaving the stock (and what orders reserved) as it is', async () => {
    await json(['inventory', 'set', 'MUG', '--quantity', '10', '--price', '12000', '--name', 'Mug']);
    await json(['orders', 'create', '--item', 'MUG:3']);
    const repriced = await sb.run(['inventory', 'set', 'MUG', '--price', '13000']);
    expect(repriced.code, repriced.stderr).toBe(0);
    expect(repriced.stdout).toMatch(/^price\t13,000 KRW$/m);
    expect(await json(['inventory', 'stock', 'MUG'])).toEqual([expect.objectContaining({ price: 13000, name: 'Mug', on_hand: 10, reserved: 3, available: 7 })]);
    // A new SKU still needs its quantity; naming nothing to set is a usage error.
    const fresh = await sb.run(['inventory', 'set', 'NEW', '--price', '100']);
    expect(fresh.code).toBe(1);
    expect(fresh.stderr).toContain('FAILED_PRECONDITION: SKU NEW is new: give its quantity on hand');
    const nothing = await sb.run(['inventory', 'set', 'MUG']);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toContain('inventory set needs --quantity, --price, --name or --currency');
  });

  it('a replayed orders create says so and shows the order as it is now', async () => {
    await json(['inventory', 'set', 'PEN', '--quantity', '5', '--price', '1500']);
    const first = await sb.run(['orders', 'create', '--item', 'PEN:1', '--idempotency-key', 'checkout-9']);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).not.toContain('replay');
    const orderId = /^id\t(ord_\S+)$/m.exec(first.stdout)![1]!;
    const still = await sb.run(['orders', 'create', '--item', 'PEN:1', '--idempotency-key', 'checkout-9']);
    expect(still.code, still.stderr).toBe(0);
    expect(still.stderr).toContain(`replay: idempotency key checkout-9 was used before; order ${orderId} was not placed again, and it is still RESERVED`);
    await json(['orders', 'pay', orderId]);
    await json(['orders', 'cancel', orderId, '--reason', 'changed my mind']);
    const replay = await sb.run(['orders', 'create', '--item', 'PEN:1', '--idempotency-key', 'checkout-9']);
    expect(replay.code, replay.stderr).toBe(0);
    expect(replay.stdout).toMatch(/^status\tRESERVED$/m);
    expect(replay.stdout).toMatch(/^current_status\tCANCELLED$/m);
    expect(replay.stderr).toContain('it is now CANCELLED (it was RESERVED when first answered)');
    expect(replay.stderr).not.toContain('pay it with');
    const replayJson = await json(['orders', 'create', '--item', 'PEN:1', '--idempotency-key', 'checkout-9']);
    expect(replayJson).toMatchObject({ id: orderId, status: 'RESERVED', replayed: true, current: { id: orderId, status: 'CANCELLED' } });
  });
});
