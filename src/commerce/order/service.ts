/**
 * order.v1.OrderService on grpc-js: CreateOrder, GetOrder and ProcessPayment
 * (the spec's), ListOrders and CancelOrder (additions). The rules live in
 * orders.ts; ProcessPayment is PaymentService's, one implementation.
 */
import type * as grpc from '@grpc/grpc-js';
import { markReplayed, wasReplayed } from '../kernel/idempotency.js';
import { timestampOf, unaryFactory, type Authenticate, type InternalLog } from '../kernel/grpc.js';
import { processPayment } from '../payment/service.js';
import { requiredId } from '../kernel/common.js';
import type { Payments } from '../payment/payments.js';
import type { OrderRecord, Orders } from './orders.js';

function orderMessage(order: OrderRecord) {
  return {
    id: order.id,
    user_id: order.userId ?? 0,
    status: order.status,
    items: order.items.map((item) => ({ sku: item.sku, name: item.name, quantity: item.quantity, unit_price: item.unitPrice, amount: item.amount })),
    total_amount: order.totalAmount,
    currency: order.currency,
    reservation_id: order.reservationId,
    reservation_expires_at: timestampOf(order.reservationExpiresAt),
    payment_id: order.paymentId ?? '',
    created_at: timestampOf(order.createdAt),
    updated_at: timestampOf(order.updatedAt),
    paid_at: timestampOf(order.paidAt),
    cancelled_at: timestampOf(order.cancelledAt),
    cancel_reason: order.cancelReason ?? '',
  };
}

export interface OrderServiceOptions {
  orders: Orders;
  payments: Payments;
  authenticate: Authenticate;
  log?: InternalLog | undefined;
}

export class OrderServiceImpl {
  constructor(private readonly options: OrderServiceOptions) {}

  handlers(): grpc.UntypedServiceImplementation {
    const unary = unaryFactory(this.options.authenticate, this.options.log);
    const { orders, payments } = this.options;
    return {
      CreateOrder: unary(async (request: { items: { sku: string; quantity: string }[]; user_id: string; idempotency_key: string }, principal) => {
        const order = await orders.create(principal, { items: request.items, userId: request.user_id, key: request.idempotency_key });
        const message = orderMessage(order);
        return wasReplayed(order) ? markReplayed(message) : message;
      }),
      GetOrder: unary(async (request: { order_id: string }, principal) => orderMessage(await orders.get(principal, requiredId('order_id', request.order_id)))),
      // The order's service pays orders only (its contract: "order_id is required"); a payment without one is PaymentService's.
      ProcessPayment: unary(processPayment(orders, payments, { orderRequired: true })),
      ListOrders: unary(async (request: { page_size: number; page_token: string; status: string; user_id: string }, principal) => {
        const page = await orders.list(principal, {
          pageSize: request.page_size,
          pageToken: request.page_token,
          status: request.status,
          userId: request.user_id,
        });
        return { orders: page.orders.map(orderMessage), next_page_token: page.nextPageToken };
      }),
      CancelOrder: unary(async (request: { order_id: string; reason: string }, principal) =>
        orderMessage(await orders.cancel(principal, requiredId('order_id', request.order_id), request.reason)),
      ),
    };
  }
}
