/**
 * How the commerce services print from the CLI (`miniapp inventory`,
 * `orders`, `payments`): `--json` with the proto's field names, amounts and
 * quantities as numbers and times in ISO 8601; tables and field/value
 * records otherwise, money shown in the currency's major unit (12,000 KRW;
 * 10.00 USD). Also the connection the three command groups share.
 */
import { randomUUID } from 'node:crypto';
import type { CommandContext } from '../context.js';
import type { Column, Output } from '../render/output.js';
import { connectionOf, readLightFirst, type ConnectionFlags } from '../connect/grpc-connection.js';
import { isoOf } from './grpc-user-view.js';
import { MiniappError, UsageError } from '../../errors.js';
import type { CommerceClient, OrderMessage, PaymentMessage, StockLevelMessage } from '../../commerce/client.js';
import type { ConnectOptions } from '../../grpc/client/channel.js';

const SERVICE = 'the commerce services';

export const COMMERCE_HELP = `
Connection: the flags of \`miniapp users\` (--addr, --token, --deadline,
--tls, --ca; the profile's grpc-addr and grpc-token by default, which
\`miniapp serve\` writes). Exit codes: 2 bad flags; 4 UNAUTHENTICATED;
5 UNAVAILABLE or DEADLINE_EXCEEDED; 1 any other status, printed with its
name (e.g. "FAILED_PRECONDITION: not enough stock: MUG (asked 2, available 1)").`;

export function checkSkuArgument(sku: string): string {
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(sku)) throw new UsageError(`SKU must be 1 to 64 letters, digits, ".", "_" or "-"; got "${sku}"`);
  return sku;
}

/** An order's or a payment's id as the server makes them ("ord_...", "pay_..."); exit 2 otherwise. */
export function checkIdArgument(id: string, prefix: 'ord' | 'pay'): string {
  if (!new RegExp(`^${prefix}_[A-Za-z0-9_-]{1,60}$`).test(id)) {
    throw new UsageError(`${prefix === 'ord' ? 'ORDER_ID must be an order' : 'PAYMENT_ID must be a payment'} id ("${prefix}_..."); got "${id}"`);
  }
  return id;
}

export async function withCommerce<T>(cc: CommandContext, flags: ConnectionFlags, run: (client: CommerceClient) => Promise<T>): Promise<T> {
  return commerceOn(cc, await connectionOf(cc, flags, { service: SERVICE }), run);
}

async function commerceOn<T>(cc: CommandContext, connection: ConnectOptions, run: (client: CommerceClient) => Promise<T>): Promise<T> {
  const [{ CommerceClient }, { quietGrpcLogs }] = await Promise.all([import('../../commerce/client.js'), import('../connect/grpc-logging.js')]);
  await quietGrpcLogs(cc.env);
  const client = new CommerceClient(connection);
  try {
    return await run(client);
  } catch (error) {
    // With --json the key made for this call was not said before it (stderr carries one JSON object): it rides in the
    // error's hint, so that a script can retry safely.
    const key = unsaidKeys.get(cc);
    if (key !== undefined && error instanceof MiniappError) {
      Object.defineProperty(error, 'hint', { value: [error.hint, `${RETRY_WITH_KEY}${key}`].filter(Boolean).join('; ') });
    }
    throw error;
  } finally {
    client.close();
  }
}

/**
 * A read (it changes nothing) on the light path (grpc/client/light-call.ts:
 * node:http2, no grpc-js): the answer of `path` (/package.Service/Method),
 * or the server's status as the same typed error; through the grpc-js
 * client (`run`) when the light path cannot make it (TLS, tracing, or the
 * call did not reach an answering server, which grpc-js then words).
 */
export async function readCommerce<T>(
  cc: CommandContext,
  flags: ConnectionFlags,
  read: { path: string; request: object },
  run: (client: CommerceClient) => Promise<T>,
): Promise<T> {
  return readLightFirst(
    cc,
    flags,
    { service: SERVICE },
    async (connection) => {
      const { lightCommerceRead } = await import('../../commerce/client-light.js');
      return lightCommerceRead<T>(connection, read.path, read.request);
    },
    (connection) => commerceOn(cc, connection, run),
  );
}

const RETRY_WITH_KEY = 'to retry safely, run the same command with --idempotency-key ';
/** Keys made for a command run with --json, which carries them in its error (withCommerce) rather than in a line of its own. */
const unsaidKeys = new WeakMap<CommandContext, string>();

/** The key given, else a new one, said on stderr so that a retry can reuse it. */
export function idempotencyKeyOf(cc: CommandContext, given: string | undefined): string {
  if (given !== undefined) {
    if (!/^[A-Za-z0-9:._-]{1,64}$/.test(given)) throw new UsageError(`--idempotency-key must be 1 to 64 letters, digits, "-", "_", ":" or "."; got "${given}"`);
    return given;
  }
  const key = randomUUID();
  if (cc.out.json) unsaidKeys.set(cc, key);
  else cc.out.info(`idempotency key: ${key} (${RETRY_WITH_KEY}${key})`);
  return key;
}

const digitsCache = new Map<string, number>();
/** Digits of the currency's minor unit (KRW 0, USD 2), as ISO 4217 has them; 2 for a code Intl does not know. */
function minorDigits(currency: string): number {
  let digits = digitsCache.get(currency);
  if (digits === undefined) {
    try {
      digits = new Intl.NumberFormat('en-US', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2;
    } catch {
      digits = 2;
    }
    digitsCache.set(currency, digits);
  }
  return digits;
}

/** An amount in minor units as people read it: "12,000 KRW", "10.00 USD". */
export function money(amount: number | string, currency: string): string {
  const digits = minorDigits(currency);
  const value = Number(amount) / 10 ** digits;
  return `${value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })} ${currency}`;
}

const n = (value: string | number) => Number(value);

export function stockJson(level: StockLevelMessage) {
  return {
    sku: level.sku,
    name: level.name,
    price: n(level.price),
    currency: level.currency,
    on_hand: n(level.on_hand),
    reserved: n(level.reserved),
    available: n(level.available),
    updated_at: isoOf(level.updated_at),
  };
}
type StockJson = ReturnType<typeof stockJson>;

export const STOCK_COLUMNS: readonly Column<StockJson>[] = [
  { header: 'sku', value: (s) => s.sku },
  { header: 'name', value: (s) => s.name, maxWidth: 30 },
  { header: 'price', value: (s) => money(s.price, s.currency), drop: -1 },
  { header: 'on_hand', value: (s) => s.on_hand },
  { header: 'reserved', value: (s) => s.reserved },
  { header: 'available', value: (s) => s.available, drop: -1 },
  { header: 'updated_at', value: (s) => s.updated_at, drop: 3 },
];

export function printStock(out: Output, level: StockLevelMessage): void {
  const json = stockJson(level);
  out.record(
    STOCK_COLUMNS.map((column) => [column.header, column.value(json)] as const),
    json,
  );
}

export function orderJson(order: OrderMessage) {
  return {
    id: order.id,
    user_id: n(order.user_id),
    status: order.status,
    items: order.items.map((item) => ({ sku: item.sku, name: item.name, quantity: n(item.quantity), unit_price: n(item.unit_price), amount: n(item.amount) })),
    total_amount: n(order.total_amount),
    currency: order.currency,
    reservation_id: order.reservation_id,
    reservation_expires_at: isoOf(order.reservation_expires_at),
    payment_id: order.payment_id,
    created_at: isoOf(order.created_at),
    updated_at: isoOf(order.updated_at),
    paid_at: isoOf(order.paid_at),
    cancelled_at: isoOf(order.cancelled_at),
    cancel_reason: order.cancel_reason,
  };
}
type OrderJson = ReturnType<typeof orderJson>;

const itemsText = (order: OrderJson) => order.items.map((item) => `${item.sku} x${item.quantity}`).join(', ');

/** On a narrow terminal the items give way first, then created_at, payment_id and user_id go; id, status and total stay whole. */
export const ORDER_COLUMNS: readonly Column<OrderJson>[] = [
  { header: 'id', value: (o) => o.id },
  { header: 'status', value: (o) => o.status, drop: -1 },
  { header: 'user_id', value: (o) => o.user_id },
  { header: 'items', value: itemsText, maxWidth: 40 },
  { header: 'total', value: (o) => money(o.total_amount, o.currency), drop: -1 },
  { header: 'payment_id', value: (o) => o.payment_id, drop: 2 },
  { header: 'created_at', value: (o) => o.created_at, drop: 3 },
];

/**
 * One order as field/value pairs. A replayed CreateOrder (`replay`) prints
 * the key's first answer, marked as such, with the order's current status
 * and time beside it; under --json, `replayed: true` and `current` (the
 * order as it is now) are added to the first answer's fields.
 */
export function printOrder(out: Output, order: OrderMessage, replay?: { replayed: true; current: OrderMessage }, payment?: PaymentMessage): void {
  const json = orderJson(order);
  const current = replay && orderJson(replay.current);
  const paid = payment && { status: payment.status, amount: n(payment.amount), balance: n(payment.balance), refunded: n(payment.amount) - n(payment.balance) };
  out.record(
    [
      ...ORDER_COLUMNS.map((column) => [column.header, column.value(json)] as const),
      ['reservation_expires_at', json.reservation_expires_at],
      ['paid_at', json.paid_at],
      ['cancelled_at', json.cancelled_at],
      ['cancel_reason', json.cancel_reason],
      ...(current
        ? ([
            ['replayed', 'yes: the first answer of this idempotency key'],
            ['current_status', current.status],
            ['current_updated_at', current.updated_at],
          ] as const)
        : []),
      ...(paid
        ? ([
            ['payment_status', paid.status],
            ['refunded', paid.refunded > 0 ? `${money(paid.refunded, order.currency)}${paid.balance === 0 ? ' (in full)' : ''}` : ''],
          ] as const)
        : []),
    ],
    current ? { ...json, replayed: true, current } : paid ? { ...json, payment: paid } : json,
  );
}

function paymentJson(payment: PaymentMessage) {
  return {
    id: payment.id,
    order_id: payment.order_id,
    user_id: n(payment.user_id),
    status: payment.status,
    amount: n(payment.amount),
    balance: n(payment.balance),
    currency: payment.currency,
    method: payment.method,
    provider: payment.provider,
    provider_reference: payment.provider_reference,
    failure_code: payment.failure_code,
    failure_message: payment.failure_message,
    refunds: payment.refunds.map((r) => ({ id: r.id, amount: n(r.amount), reason: r.reason, status: r.status, created_at: isoOf(r.created_at) })),
    created_at: isoOf(payment.created_at),
    updated_at: isoOf(payment.updated_at),
    approved_at: isoOf(payment.approved_at),
  };
}

export function printPayment(out: Output, payment: PaymentMessage): void {
  const json = paymentJson(payment);
  out.record(
    [
      ['id', json.id],
      ['order_id', json.order_id],
      ['status', json.status],
      ['amount', money(json.amount, json.currency)],
      ['balance', money(json.balance, json.currency)],
      ['method', json.method],
      ['provider', json.provider],
      ['failure', json.failure_code ? `${json.failure_code}: ${json.failure_message}` : ''],
      ['refunds', json.refunds.map((r) => `${money(r.amount, json.currency)} (${r.reason}, ${r.status})`).join('; ')],
      ['created_at', json.created_at],
      ['approved_at', json.approved_at],
    ],
    json,
  );
}
