/**
 * inventory.v1.InventoryService on grpc-js: CheckStock and ReserveItems (the
 * spec's), stock management and the reservation's end for admins
 * (additions). The rules live in inventory.ts and orders.ts.
 */
import type * as grpc from '@grpc/grpc-js';
import { actorOf, checkCurrency, checkItems, checkSku, checkText, integer, invalid, MAX_AMOUNT, notFound, precondition, requiredId } from '../kernel/common.js';
import { requireAdmin, timestampOf, unaryFactory, type Authenticate, type InternalLog } from '../kernel/grpc.js';
import type { Inventory, ReservationRecord, StockLevel, StockMovement } from './inventory.js';

const MAX_TTL_SECONDS = 86_400;
const MAX_STOCK = 1_000_000_000;

function stockLevelMessage(level: StockLevel) {
  return {
    sku: level.sku,
    name: level.name,
    price: level.price,
    currency: level.currency,
    on_hand: level.onHand,
    reserved: level.reserved,
    available: level.available,
    updated_at: timestampOf(level.updatedAt),
  };
}

function reservationMessage(reservation: ReservationRecord) {
  return {
    id: reservation.id,
    state: reservation.state.toUpperCase(),
    items: reservation.items.map((item) => ({ sku: item.sku, quantity: item.quantity })),
    expires_at: timestampOf(reservation.expiresAt),
    order_id: reservation.orderId ?? '',
    created_at: timestampOf(reservation.createdAt),
    updated_at: timestampOf(reservation.updatedAt),
  };
}

function movementMessage(movement: StockMovement) {
  return {
    id: movement.id,
    sku: movement.sku,
    delta: movement.delta,
    on_hand: movement.onHand,
    reason: movement.reason,
    actor: movement.actor,
    at: timestampOf(movement.at),
  };
}

export interface InventoryServiceOptions {
  inventory: Inventory;
  sql: import('../../store/sql.js').Sql;
  authenticate: Authenticate;
  /** Expires reservations past their time (and their orders), before stock is read. */
  expireDue: () => Promise<number>;
  log?: InternalLog | undefined;
}

export class InventoryServiceImpl {
  constructor(private readonly options: InventoryServiceOptions) {}

  handlers(): grpc.UntypedServiceImplementation {
    const unary = unaryFactory(this.options.authenticate, this.options.log);
    const { inventory } = this.options;
    return {
      CheckStock: unary(async (request: { skus: string[] }) => {
        const skus = request.skus ?? [];
        if (skus.length > 100) throw invalid(`skus must name at most 100 SKUs; got ${skus.length}`);
        for (const [i, sku] of skus.entries()) checkSku(sku, `skus[${i}]`);
        await this.options.expireDue();
        return { items: (await inventory.levels(skus)).map(stockLevelMessage) };
      }),
      ReserveItems: unary(async (request: { items: { sku: string; quantity: string }[]; ttl_seconds: string }, principal) => {
        requireAdmin(principal, 'reserving stock outside an order');
        const items = checkItems(request.items);
        const ttl = integer('ttl_seconds', request.ttl_seconds, 0, MAX_TTL_SECONDS);
        await this.options.expireDue();
        const reservation = await this.options.sql.transaction((tx) => inventory.reserve(tx, items, ttl === 0 ? {} : { ttlMs: ttl * 1000 }));
        return { reservation: reservationMessage(reservation) };
      }),
      SetStock: unary(
        async (
          request: { sku: string; quantity: string; price: string; has_price: boolean; name: string; currency: string; reason: string; keep_quantity: boolean },
          principal,
        ) => {
          requireAdmin(principal, 'setting stock');
          const change = {
            sku: checkSku(request.sku),
            quantity: request.keep_quantity ? undefined : integer('quantity', request.quantity, 0, MAX_STOCK),
            price: request.has_price ? integer('price', request.price, 0, MAX_AMOUNT) : undefined,
            name: checkText('name', request.name),
            currency: checkCurrency(request.currency, ''),
            reason: checkText('reason', request.reason) || 'set',
            actor: actorOf(principal),
          };
          return stockLevelMessage(await inventory.set(change));
        },
      ),
      AdjustStock: unary(async (request: { sku: string; delta: string; reason: string }, principal) => {
        requireAdmin(principal, 'adjusting stock');
        const sku = checkSku(request.sku);
        const delta = integer('delta', request.delta, -MAX_STOCK, MAX_STOCK);
        if (delta === 0) throw invalid('delta must not be 0: give the units added (positive) or removed (negative)');
        const reason = checkText('reason', request.reason, { required: true });
        return stockLevelMessage(await inventory.adjust(sku, delta, reason, actorOf(principal)));
      }),
      ReleaseReservation: unary(async (request: { reservation_id: string }, principal) =>
        this.#end(requiredId('reservation_id', request.reservation_id), principal, 'release'),
      ),
      CommitReservation: unary(async (request: { reservation_id: string }, principal) =>
        this.#end(requiredId('reservation_id', request.reservation_id), principal, 'commit'),
      ),
      ListStockMovements: unary(async (request: { sku: string; page_size: number }, principal) => {
        // The ledger names every user's orders: the admin's, as the proto's header says of all but CheckStock.
        requireAdmin(principal, 'reading the stock ledger');
        const sku = checkSku(request.sku);
        const size = integer('page_size', request.page_size, 0, 100) || 50;
        return { movements: (await inventory.movements(sku, size)).map(movementMessage) };
      }),
    };
  }

  async #end(id: string, principal: import('../../auth/tokens.js').Principal, action: 'release' | 'commit') {
    requireAdmin(principal, `${action === 'release' ? 'releasing' : 'committing'} a reservation`);
    const { inventory } = this.options;
    const reservation = id ? await inventory.reservation(id) : undefined;
    if (!reservation) throw notFound(`no reservation with id "${(id ?? '').slice(0, 64)}"`);
    if (reservation.orderId)
      throw precondition(`reservation ${id} belongs to order ${reservation.orderId}: ${action === 'release' ? 'cancel' : 'pay'} the order instead`);
    await this.options.expireDue();
    const done = await this.options.sql.transaction((tx) =>
      action === 'release' ? inventory.release(tx, id) : inventory.commit(tx, id, `reservation ${id} committed`, actorOf(principal)),
    );
    const now = (await inventory.reservation(id))!;
    if (!done)
      throw precondition(
        `reservation ${id} is ${now.state.toUpperCase()}: only an ACTIVE reservation can be ${action === 'release' ? 'released' : 'committed'}`,
      );
    return reservationMessage(now);
  }
}
