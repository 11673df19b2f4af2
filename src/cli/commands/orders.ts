/**
 * `miniapp orders ...`: orders of the commerce services over
 * order.v1.OrderService of `miniapp serve`: create, get, list, pay, cancel.
 * Commander wiring and rendering only (client: src/commerce/client.ts;
 * views: commerce-view.ts).
 */
import type { Command } from 'commander';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import { MiniappError, UpstreamError, UsageError } from '../../errors.js';
import { withConnection, type ConnectionFlags } from '../connect/grpc-connection.js';
import { parseId, parseInteger } from '../flags.js';
import { ORDER_STATUSES } from '../../commerce/order/order-rows.js';
import {
  checkIdArgument,
  checkSkuArgument,
  COMMERCE_HELP,
  idempotencyKeyOf,
  money,
  ORDER_COLUMNS,
  orderJson,
  printOrder,
  printPayment,
  readCommerce,
  withCommerce,
} from '../views/commerce-view.js';

const STATUSES: readonly string[] = ORDER_STATUSES;

const collect = (value: string, all: string[]) => [...all, value];

export function registerOrders(program: Command, bind: Bind): void {
  const orders = program
    .command('orders')
    .description(
      'Orders of the commerce services (order.v1.OrderService of `miniapp serve`): an order is priced from the catalogue and its items reserved ' +
        '(RESERVED, 15 minutes), then paid (PAID) or declined (PAYMENT_FAILED), or it expires (EXPIRED) or is cancelled (CANCELLED, refunded when paid); a paid order refunded by the admin ' +
        '(`miniapp payments refund`) is PARTIALLY_REFUNDED, then REFUNDED once all of it is.',
    )
    .addHelpText('after', COMMERCE_HELP);

  withConnection(
    orders
      .command('create')
      .description('place an order: priced from the catalogue, its items reserved; prints the order')
      .requiredOption('--item <sku:qty>', 'a SKU and a quantity (repeatable)', collect, [] as string[])
      .option('--user <id>', 'order for this user (admin token only)')
      .option('--idempotency-key <key>', 'retry safely with the same key; generated and printed when not given'),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp orders create --item MUG:2 --item TEA:1\n  miniapp orders create --item MUG:1 --idempotency-key checkout-42 --json',
    )
    .action(bind(runCreate));

  withConnection(orders.command('get').description('show one order').argument('<order-id>', 'the order ("ord_...")')).action(bind(runGet));

  withConnection(
    orders
      .command('list')
      .description('orders, newest first (a user token sees its own)')
      .option('--status <status>', `only orders in this status: ${STATUSES.join(', ')}`)
      .option('--user <id>', "only this user's orders (admin token)")
      .option('--limit <n>', 'at most this many (1 to 100)', '50'),
  ).action(bind(runList));

  withConnection(
    orders
      .command('pay')
      .description("pay an order's total; the reservation is committed (PAID), or released on a decline (PAYMENT_FAILED)")
      .argument('<order-id>', 'the order ("ord_...")')
      .option(
        '--method <method>',
        'payment method; with the sandbox provider: test_approve (default), test_decline_insufficient_funds, test_decline_card_declined, test_timeout',
      )
      .option('--idempotency-key <key>', 'retry safely with the same key; generated and printed when not given'),
  )
    .addHelpText(
      'after',
      '\nA payment whose provider did not answer stays IN_PROGRESS (the order PAYMENT_PENDING): run the same\ncommand with the printed --idempotency-key; it asks the provider again and never charges twice.',
    )
    .action(bind(runPay));

  withConnection(
    orders
      .command('cancel')
      .description(
        'cancel a RESERVED order (units released) or, with the admin token, a PAID, PARTIALLY_REFUNDED or REFUNDED one (what is left refunded, units back in stock)',
      )
      .argument('<order-id>', 'the order ("ord_...")')
      .option('--reason <text>', 'why'),
  ).action(bind(runCancel));
}

function parseItem(text: string): { sku: string; quantity: number } {
  const colon = text.lastIndexOf(':');
  if (colon <= 0) throw new UsageError(`--item must be SKU:QUANTITY, e.g. MUG:2; got "${text}"`);
  return { sku: checkSkuArgument(text.slice(0, colon)), quantity: parseInteger(text.slice(colon + 1), `the quantity of --item ${text}`, 1, 1_000_000) };
}

async function runCreate(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags & { item: string[]; user?: string; idempotencyKey?: string }>();
  // commander takes the empty default of a repeatable option as given: the check is ours, before any key is made or sent.
  if (flags.item.length === 0) throw new UsageError('orders create needs at least one --item SKU:QUANTITY, e.g. --item MUG:2');
  const items = flags.item.map(parseItem);
  const duplicate = items.find((item, i) => items.findIndex((other) => other.sku === item.sku) !== i);
  if (duplicate) throw new UsageError(`--item names ${duplicate.sku} twice: give it once with the total quantity`);
  const request = {
    items,
    user_id: flags.user === undefined ? '0' : parseId(flags.user, '--user'),
    idempotency_key: idempotencyKeyOf(cc, flags.idempotencyKey),
  };
  const { order, current } = await withCommerce(cc, flags, async (client) => {
    const answer = await client.createOrder(request);
    // A replay answers what the key first answered: the order as it is now is read beside it (Stripe's Idempotent-Replayed).
    return { order: answer.order, current: answer.replayed ? await client.getOrder(answer.order.id) : undefined };
  });
  if (!current) {
    printOrder(cc.out, order);
    if (!cc.out.json)
      cc.out.success(`order ${order.id} ${order.status}: ${money(order.total_amount, order.currency)}; pay it with \`miniapp orders pay ${order.id}\``);
    return;
  }
  printOrder(cc.out, order, { replayed: true, current });
  if (cc.out.json) return;
  const now = current.status === order.status ? `still ${current.status}` : `now ${current.status} (it was ${order.status} when first answered)`;
  cc.out.warn(`replay: idempotency key ${request.idempotency_key} was used before; order ${order.id} was not placed again, and it is ${now}`);
  if (current.status === 'RESERVED') cc.out.info(`pay it with \`miniapp orders pay ${order.id}\``);
}

async function runGet(cc: CommandContext, command: Command): Promise<void> {
  const id = checkIdArgument(command.processedArgs[0] as string, 'ord');
  // A refund moves money, not stock: a REFUNDED order keeps its units sold until cancelled (which restocks), so its
  // payment's state is shown beside it.
  const flags = command.opts<ConnectionFlags>();
  const order = await readCommerce(cc, flags, { path: '/order.v1.OrderService/GetOrder', request: { order_id: id } }, (client) => client.getOrder(id));
  const paymentId = order.payment_id;
  const payment = paymentId
    ? await readCommerce(cc, flags, { path: '/payment.v1.PaymentService/GetPayment', request: { payment_id: paymentId } }, (client) =>
        client.getPayment(paymentId),
      )
    : undefined;
  printOrder(cc.out, order, undefined, payment);
  if (!cc.out.json && order.status === 'REFUNDED') {
    cc.out.info(
      `refunded in full (payment ${payment?.status ?? 'CANCELED'}); its units stay sold until \`miniapp orders cancel ${id}\` puts them back on hand`,
    );
  }
}

async function runList(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags & { status?: string; user?: string; limit: string }>();
  const status = flags.status?.toUpperCase();
  if (status !== undefined && !STATUSES.includes(status)) throw new UsageError(`--status must be one of ${STATUSES.join(', ')}; got "${flags.status}"`);
  const limit = parseInteger(flags.limit, '--limit', 1, 100);
  const request = {
    page_size: limit,
    status: status ?? 'ORDER_STATUS_UNSPECIFIED',
    user_id: flags.user === undefined ? '0' : parseId(flags.user, '--user'),
  };
  const page = await readCommerce(cc, flags, { path: '/order.v1.OrderService/ListOrders', request }, (client) => client.listOrders(request));
  cc.out.table(page.orders.map(orderJson), ORDER_COLUMNS);
}

/** A payment the provider declined: the payment is printed, and the command fails (exit 1) so that `orders pay X && ship` does not ship. */
export class PaymentDeclinedError extends MiniappError {
  override readonly code: string = 'PAYMENT_DECLINED';
}

/** The exact command that asks again for the payment of `key` (the same request, so the same key is accepted). */
function retryCommand(cc: CommandContext, id: string, method: string, key: string, flags: ConnectionFlags): string {
  const words = ['miniapp'];
  if (cc.profile !== 'default') words.push('--profile', cc.profile);
  words.push('orders', 'pay', id, '--method', method, '--idempotency-key', key);
  if (flags.addr !== undefined) words.push('--addr', flags.addr);
  if (flags.tls) words.push('--tls');
  if (flags.ca !== undefined) words.push('--ca', flags.ca);
  if (flags.token !== undefined) words.push('--token', '"$TOKEN"');
  return words.map((word) => (/^[A-Za-z0-9@%+=:,./_"$-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`)).join(' ');
}

/**
 * Why a payment was declined, without what the line already says: the
 * service's message ("declined: CARD_DECLINED: the card issuer declined the
 * payment") repeats the outcome and the code the line names.
 */
function declineReason(code: string, message: string): string {
  let reason = message.replace(/^declined:\s*/, '');
  if (code && reason.startsWith(`${code}:`)) reason = reason.slice(code.length + 1).trim();
  return reason || 'declined';
}

async function runPay(cc: CommandContext, command: Command): Promise<void> {
  const id = checkIdArgument(command.processedArgs[0] as string, 'ord');
  const flags = command.opts<ConnectionFlags & { method?: string; idempotencyKey?: string }>();
  const key = idempotencyKeyOf(cc, flags.idempotencyKey);
  const answer = await withCommerce(cc, flags, (client) => client.payOrder({ order_id: id, method: flags.method ?? '', idempotency_key: key }));
  const { payment } = answer;
  printPayment(cc.out, payment);
  if (payment.status === 'DONE') {
    if (!cc.out.json) cc.out.success(`order ${id} paid: ${money(payment.amount, payment.currency)} (payment ${payment.id})`);
    return;
  }
  if (payment.status === 'IN_PROGRESS') {
    // Charged or not, nobody knows yet: a network-class outcome (exit 5), never a success a script would ship on.
    throw new UpstreamError(`payment ${payment.id} of order ${id}: outcome unknown (${answer.message}); the order stays PAYMENT_PENDING`, {
      code: 'PAYMENT_OUTCOME_UNKNOWN',
      hint: `ask again with exactly this command (it never charges twice): ${retryCommand(cc, id, payment.method || flags.method || 'test_approve', key, flags)}`,
    });
  }
  throw new PaymentDeclinedError(
    `payment ${payment.id} of order ${id} ${payment.status}${payment.failure_code ? ` (${payment.failure_code})` : ''}: ${declineReason(payment.failure_code, payment.failure_message || answer.message)}; the order is not paid`,
    { hint: 'its units were released (PAYMENT_FAILED); place a new order to try another method' },
  );
}

async function runCancel(cc: CommandContext, command: Command): Promise<void> {
  const id = checkIdArgument(command.processedArgs[0] as string, 'ord');
  const flags = command.opts<ConnectionFlags & { reason?: string }>();
  const order = await withCommerce(cc, flags, (client) => client.cancelOrder(id, flags.reason));
  printOrder(cc.out, order);
  if (!cc.out.json) cc.out.success(`order ${id} ${order.status}`);
}
