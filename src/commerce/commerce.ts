/**
 * The commerce services of `serve` put together over one store: inventory,
 * payments (through a provider; the sandbox by default), orders, their
 * idempotency keys, and the housekeeping that runs beside them: payments
 * left in progress by a stopped process are reconciled at start, and every
 * `sweepMs` reservations that ran out are expired, stale in-progress
 * payments reconciled and keys older than 15 days forgotten.
 *
 * Domain module: nothing here prints or reads the environment.
 */
import type { Sql } from '../store/sql.js';
import { IdempotencyKeys } from './kernel/idempotency.js';
import { Inventory } from './inventory/inventory.js';
import { InventoryServiceImpl } from './inventory/service.js';
import { Orders } from './order/orders.js';
import { OrderServiceImpl } from './order/service.js';
import { Payments, type CommerceObserver, type Publish } from './payment/payments.js';
import { SandboxProvider, type PaymentProvider } from './payment/provider.js';
import { PaymentServiceImpl } from './payment/service.js';
import { tracedProvider } from './payment/traced-provider.js';
import type { Telemetry } from '../telemetry/telemetry.js';
import type { Authenticate, InternalLog } from './kernel/grpc.js';

const DEFAULT_SWEEP_MS = 30_000;

export interface CommerceOptions {
  sql: Sql;
  now: () => Date;
  authenticate: Authenticate;
  /** The payment provider; the sandbox (its books in the store) by default. */
  provider?: PaymentProvider | undefined;
  /** Webhook events (order.paid, ...), written in the transactions that make them; none without webhooks. */
  publish?: Publish | undefined;
  observe?: CommerceObserver | undefined;
  reservationTtlMs?: number | undefined;
  /** How often the housekeeping runs (0: never; tests drive it). */
  sweepMs?: number | undefined;
  log?: InternalLog | undefined;
  warn?: InternalLog | undefined;
  /** A span for each of the provider's charges and refunds (payment/traced-provider.ts); none when tracing is off. */
  telemetry?: Telemetry | undefined;
}

export class Commerce {
  readonly keys: IdempotencyKeys;
  readonly inventory: Inventory;
  readonly payments: Payments;
  readonly orders: Orders;
  readonly inventoryService: InventoryServiceImpl;
  readonly paymentService: PaymentServiceImpl;
  readonly orderService: OrderServiceImpl;
  #timer: NodeJS.Timeout | undefined;
  #sweeping: Promise<void> | undefined;

  /** The store the services keep their state in. */
  readonly sql: Sql;

  constructor(private readonly options: CommerceOptions) {
    const { sql, now } = options;
    this.sql = sql;
    this.keys = new IdempotencyKeys(sql, now);
    this.inventory = new Inventory(sql, now);
    const provider = options.provider ?? new SandboxProvider(sql, now);
    this.payments = new Payments({
      sql,
      now,
      provider: options.telemetry ? tracedProvider(provider, options.telemetry) : provider,
      keys: this.keys,
      publish: options.publish,
      observe: options.observe,
    });
    this.orders = new Orders({
      sql,
      now,
      inventory: this.inventory,
      payments: this.payments,
      keys: this.keys,
      publish: options.publish,
      observe: options.observe,
      reservationTtlMs: options.reservationTtlMs,
    });
    const common = { authenticate: options.authenticate, log: options.log };
    this.inventoryService = new InventoryServiceImpl({ ...common, inventory: this.inventory, sql, expireDue: () => this.orders.expireDue() });
    this.paymentService = new PaymentServiceImpl({ ...common, payments: this.payments, orders: this.orders });
    this.orderService = new OrderServiceImpl({ ...common, payments: this.payments, orders: this.orders });
  }

  /** Reconciles what a stopped process left in progress, then starts the housekeeping. */
  async start(): Promise<void> {
    await this.sweep();
    const every = this.options.sweepMs ?? DEFAULT_SWEEP_MS;
    if (every > 0) {
      this.#timer = setInterval(() => void this.sweep(), every);
      this.#timer.unref();
    }
  }

  /** One round of housekeeping; a round already running is awaited instead of doubled. */
  sweep(): Promise<void> {
    this.#sweeping ??= (async () => {
      try {
        const left = await this.payments.reconcileAll();
        if (left.payments + left.refunds > 0) this.options.warn?.('reconciled payments left in progress', left);
        await this.orders.expireDue();
        await this.keys.purge();
      } catch (error) {
        this.options.warn?.('commerce housekeeping failed; next round later', { error: String(error) });
      } finally {
        this.#sweeping = undefined;
      }
    })();
    return this.#sweeping;
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#sweeping;
  }
}
