/**
 * payment.v1.PaymentService on grpc-js: ProcessPayment and RefundPayment (the
 * spec's) and GetPayment (an addition). A payment of an order goes through
 * the order (order/orders.ts, which sits above payments and is handed in as
 * `PaysOrders`), so that the order and its stock move with it; the rules
 * live in payments.ts.
 */
import type * as grpc from '@grpc/grpc-js';
import { timestampOf, unaryFactory, type Authenticate, type InternalLog } from '../kernel/grpc.js';
import type { Principal } from '../../auth/tokens.js';
import { requiredId, type Caller } from '../kernel/common.js';
import type { PaymentOutcome, PaymentRecord, Payments, RefundRecord } from './payments.js';

/** What ProcessPayment needs of the orders when a payment names one (order/orders.ts `Orders` is one). */
export interface PaysOrders {
  pay(caller: Caller, request: { orderId: string; amount?: string | number; currency?: string; method?: string; key: string }): Promise<PaymentOutcome>;
}

export interface PaymentRequestMessage {
  order_id: string;
  amount: string;
  currency: string;
  method: string;
  idempotency_key: string;
}

function refundMessage(refund: RefundRecord) {
  return { id: refund.id, amount: refund.amount, reason: refund.reason, status: refund.status, created_at: timestampOf(refund.createdAt) };
}

function paymentMessage(payment: PaymentRecord) {
  return {
    id: payment.id,
    order_id: payment.orderId ?? '',
    user_id: payment.userId ?? 0,
    status: payment.status,
    amount: payment.amount,
    balance: payment.balance,
    currency: payment.currency,
    method: payment.method,
    provider: payment.provider,
    provider_reference: payment.providerReference ?? '',
    failure_code: payment.failureCode ?? '',
    failure_message: payment.failureMessage ?? '',
    refunds: payment.refunds.map(refundMessage),
    created_at: timestampOf(payment.createdAt),
    updated_at: timestampOf(payment.updatedAt),
    approved_at: timestampOf(payment.approvedAt),
  };
}

function paymentResponse(outcome: PaymentOutcome) {
  return { payment: paymentMessage(outcome.payment), message: outcome.message };
}

/** ProcessPayment of either service: through the order when one is named (OrderService's always names one). */
export function processPayment(orders: PaysOrders, payments: Payments, options: { orderRequired?: boolean } = {}) {
  return (request: PaymentRequestMessage, principal: Principal) =>
    (request.order_id || options.orderRequired
      ? orders.pay(principal, {
          orderId: requiredId('order_id', request.order_id),
          amount: request.amount,
          currency: request.currency,
          method: request.method,
          key: request.idempotency_key,
        })
      : payments.processStandalone(principal, { amount: request.amount, currency: request.currency, method: request.method, key: request.idempotency_key })
    ).then(paymentResponse);
}
export interface PaymentServiceOptions {
  payments: Payments;
  orders: PaysOrders;
  authenticate: Authenticate;
  log?: InternalLog | undefined;
}

export class PaymentServiceImpl {
  constructor(private readonly options: PaymentServiceOptions) {}

  handlers(): grpc.UntypedServiceImplementation {
    const unary = unaryFactory(this.options.authenticate, this.options.log);
    const { payments, orders } = this.options;
    return {
      ProcessPayment: unary(processPayment(orders, payments)),
      RefundPayment: unary(async (request: { payment_id: string; amount: string; reason: string; idempotency_key: string }, principal) => {
        const outcome = await payments.refund(principal, {
          paymentId: requiredId('payment_id', request.payment_id),
          amount: request.amount,
          reason: request.reason,
          key: request.idempotency_key,
        });
        return { payment: paymentMessage(outcome.payment), refund: refundMessage(outcome.refund) };
      }),
      GetPayment: unary(async (request: { payment_id: string }, principal) =>
        paymentMessage(await payments.get(principal, requiredId('payment_id', request.payment_id))),
      ),
    };
  }
}
