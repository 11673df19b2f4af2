/**
 * The gRPC client of the commerce services of `miniapp serve`
 * (inventory.v1, order.v1, payment.v1) for the CLI: one connection, on the
 * channel, metadata and error mapping every client of serve shares
 * (grpc/client/): UNAUTHENTICATED exit 4, UNAVAILABLE and DEADLINE_EXCEEDED exit 5, any
 * other status exit 1 reading "FAILED_PRECONDITION: ...". Messages are in
 * proto-loader form (snake_case, int64 as strings, enums as names).
 *
 * Nothing here prints or reads the environment.
 */
import type * as grpc from '@grpc/grpc-js';
import type { Timestamp } from '../grpc/protos.js';
import { ServiceConnection, type ConnectOptions } from '../grpc/client/channel.js';
import { COMMERCE_SERVICE } from './client-light.js';

export interface StockLevelMessage {
  sku: string;
  name: string;
  price: string;
  currency: string;
  on_hand: string;
  reserved: string;
  available: string;
  updated_at: Timestamp | null;
}

export interface OrderMessage {
  id: string;
  user_id: string;
  status: string;
  items: { sku: string; name: string; quantity: string; unit_price: string; amount: string }[];
  total_amount: string;
  currency: string;
  reservation_id: string;
  reservation_expires_at: Timestamp | null;
  payment_id: string;
  created_at: Timestamp | null;
  updated_at: Timestamp | null;
  paid_at: Timestamp | null;
  cancelled_at: Timestamp | null;
  cancel_reason: string;
}

export interface RefundMessage {
  id: string;
  amount: string;
  reason: string;
  status: string;
  created_at: Timestamp | null;
}

export interface PaymentMessage {
  id: string;
  order_id: string;
  user_id: string;
  status: string;
  amount: string;
  balance: string;
  currency: string;
  method: string;
  provider: string;
  provider_reference: string;
  failure_code: string;
  failure_message: string;
  refunds: RefundMessage[];
  created_at: Timestamp | null;
  updated_at: Timestamp | null;
  approved_at: Timestamp | null;
}

export interface PaymentResponse {
  payment: PaymentMessage;
  message: string;
}

/** Response metadata of serve's answer to an idempotency key seen before (commerce/kernel/grpc.ts). */
const REPLAYED_METADATA = 'idempotent-replayed';

type Service = 'inventory' | 'order' | 'payment';
const NAMES = { inventory: 'inventory.v1.InventoryService', order: 'order.v1.OrderService', payment: 'payment.v1.PaymentService' } as const;
type RawClient = grpc.Client &
  Record<
    string,
    (
      request: unknown,
      metadata: grpc.Metadata,
      options: grpc.CallOptions,
      callback: (error: grpc.ServiceError | null, response?: unknown) => void,
    ) => grpc.ClientUnaryCall
  >;

export class CommerceClient {
  readonly #clients = new Map<Service, RawClient>();
  readonly #connection: ServiceConnection;

  constructor(options: ConnectOptions) {
    this.#connection = new ServiceConnection(options, COMMERCE_SERVICE);
  }

  /** One connection for the three services: the later clients ride on the first one's channel. */
  #client(service: Service): RawClient {
    let client = this.#clients.get(service);
    if (!client) {
      client = this.#connection.client<RawClient>(NAMES[service]);
      this.#clients.set(service, client);
    }
    return client;
  }

  #call<Res>(service: Service, method: string, request: object, onMetadata?: (metadata: grpc.Metadata) => void): Promise<Res> {
    const client = this.#client(service);
    return new Promise((resolve, reject) => {
      const call = client[method]!.call(client, request, this.#connection.metadata(), { deadline: this.#connection.deadline() }, (error, response) => {
        if (error) reject(this.#connection.error(error));
        else resolve(response as Res);
      });
      if (onMetadata) call.on('metadata', onMetadata);
    });
  }

  checkStock(skus: string[]): Promise<StockLevelMessage[]> {
    return this.#call<{ items: StockLevelMessage[] }>('inventory', 'CheckStock', { skus }).then((r) => r.items);
  }

  /** Without a quantity, an existing SKU keeps its on-hand count (keep_quantity). */
  setStock(request: {
    sku: string;
    quantity?: number | undefined;
    price?: number | undefined;
    name?: string | undefined;
    currency?: string | undefined;
    reason?: string | undefined;
  }): Promise<StockLevelMessage> {
    return this.#call('inventory', 'SetStock', {
      ...request,
      quantity: request.quantity ?? 0,
      keep_quantity: request.quantity === undefined,
      has_price: request.price !== undefined,
      price: request.price ?? 0,
    });
  }

  adjustStock(request: { sku: string; delta: number; reason: string }): Promise<StockLevelMessage> {
    return this.#call('inventory', 'AdjustStock', request);
  }

  /** The order; `replayed` when the key was seen before and this is its first answer, stored (the order may have moved on since). */
  async createOrder(request: {
    items: { sku: string; quantity: number }[];
    user_id?: string;
    idempotency_key: string;
  }): Promise<{ order: OrderMessage; replayed: boolean }> {
    let replayed = false;
    const order = await this.#call<OrderMessage>('order', 'CreateOrder', request, (metadata) => {
      replayed = metadata.get(REPLAYED_METADATA).some((value) => String(value) === 'true');
    });
    return { order, replayed };
  }

  getOrder(orderId: string): Promise<OrderMessage> {
    return this.#call('order', 'GetOrder', { order_id: orderId });
  }

  listOrders(request: {
    page_size?: number;
    page_token?: string;
    status?: string;
    user_id?: string;
  }): Promise<{ orders: OrderMessage[]; next_page_token: string }> {
    return this.#call('order', 'ListOrders', request);
  }

  payOrder(request: { order_id: string; method?: string; idempotency_key: string }): Promise<PaymentResponse> {
    return this.#call('order', 'ProcessPayment', request);
  }

  cancelOrder(orderId: string, reason?: string): Promise<OrderMessage> {
    return this.#call('order', 'CancelOrder', { order_id: orderId, reason: reason ?? '' });
  }

  getPayment(paymentId: string): Promise<PaymentMessage> {
    return this.#call('payment', 'GetPayment', { payment_id: paymentId });
  }

  refundPayment(request: {
    payment_id: string;
    amount?: number;
    reason: string;
    idempotency_key: string;
  }): Promise<{ payment: PaymentMessage; refund: RefundMessage }> {
    return this.#call('payment', 'RefundPayment', request);
  }

  close(): void {
    this.#connection.close();
  }
}
