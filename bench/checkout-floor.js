/**
 * The floor of a checkout (bench/commerce.bench.js): a bare grpc-js server
 * with the two RPCs the load calls, order.v1.OrderService/CreateOrder and
 * ProcessPayment (also offered as payment.v1.PaymentService/ProcessPayment,
 * the same handler), written by hand against miniapp's own schema, with no
 * miniapp code on the request path: no auth, no interceptor, no service
 * layer, no store seam. Its database is a fresh one migrated by miniapp's
 * migrations (openDatabase on SQLite, openStore on PostgreSQL), then used
 * directly through better-sqlite3 or pg.
 *
 * It writes the rows a checkout of `miniapp serve` writes (traced from
 * serve's statements on both backends; serve in the benchmark has no
 * webhooks, so no outbox event on either side): CreateOrder the order, its
 * item, the reservation and its item, the SKU's hold (stock_holds) and the
 * idempotency key with its answer; ProcessPayment the payment (DONE), the
 * sandbox provider's charge (the INSERT into sandbox_charges that its
 * charge makes), the order PAID, the reservation committed, the units off
 * on_hand (products) with a ledger line (stock_movements), and the key with
 * its answer. One transaction per call, in the fewest statements it can:
 * on PostgreSQL one statement per call (data-modifying CTEs), on SQLite one
 * BEGIN IMMEDIATE ... COMMIT of prepared statements. Where serve records a
 * payment IN_PROGRESS and commits before it asks the provider (so that a
 * crash never charges twice), the floor does all of it in one transaction:
 * the ratio includes what that crash safety costs.
 *
 * Durability as serve's: on SQLite WAL with synchronous = NORMAL and an
 * fdatasync of the -wal file off the event loop before any answer (one in
 * flight at a time, covering every commit made before it began, as serve's
 * store does); on PostgreSQL its defaults (fsync and synchronous_commit on).
 * The floor takes orders of one item only (the benchmark's); anything else
 * is UNIMPLEMENTED.
 */
import { randomBytes } from 'node:crypto';
import { open } from 'node:fs/promises';
import { join } from 'node:path';

const RESERVATION_TTL_MS = 15 * 60_000;
const KEY_TTL_MS = 15 * 24 * 3600_000;
const OWNER = 'admin';
const PROVIDER = 'sandbox';
const METHOD = 'test_approve';

/** ProcessPayment's answer for an approved payment, as serve gives it. */
function approved({ paymentId, orderId, amount, currency, reference, at }) {
  return {
    payment: {
      id: paymentId,
      orderId,
      status: 'DONE',
      amount,
      balance: amount,
      currency,
      method: METHOD,
      provider: PROVIDER,
      providerReference: reference,
      createdAt: at,
      updatedAt: at,
      approvedAt: at,
    },
    message: 'approved',
  };
}

const id = (prefix) => `${prefix}_${randomBytes(12).toString('base64url')}`;
const timestamp = (iso) => {
  if (!iso) return null;
  const ms = Date.parse(iso);
  return { seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 };
};

class RpcFailure extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

function orderMessage(order) {
  return {
    id: order.id,
    user_id: '0',
    status: order.status,
    items: order.items.map((i) => ({ sku: i.sku, name: i.name, quantity: String(i.quantity), unit_price: String(i.unitPrice), amount: String(i.amount) })),
    total_amount: String(order.totalAmount),
    currency: order.currency,
    reservation_id: order.reservationId,
    reservation_expires_at: timestamp(order.reservationExpiresAt),
    payment_id: '',
    created_at: timestamp(order.createdAt),
    updated_at: timestamp(order.updatedAt),
    paid_at: null,
    cancelled_at: null,
    cancel_reason: '',
  };
}

function paymentMessage({ payment, message }) {
  return {
    payment: {
      id: payment.id,
      order_id: payment.orderId,
      user_id: '0',
      status: payment.status,
      amount: String(payment.amount),
      balance: String(payment.balance),
      currency: payment.currency,
      method: payment.method,
      provider: payment.provider,
      provider_reference: payment.providerReference,
      failure_code: '',
      failure_message: '',
      refunds: [],
      created_at: timestamp(payment.createdAt),
      updated_at: timestamp(payment.updatedAt),
      approved_at: timestamp(payment.approvedAt),
    },
    message,
  };
}

/** The one item of a CreateOrder request; UNIMPLEMENTED for more. */
function oneItem(request) {
  if (request.items.length !== 1) throw new RpcFailure('UNIMPLEMENTED', 'the checkout floor takes orders of one item');
  const quantity = Number(request.items[0].quantity);
  if (!Number.isSafeInteger(quantity) || quantity < 1) throw new RpcFailure('INVALID_ARGUMENT', 'quantity must be a positive whole number');
  return { sku: request.items[0].sku, quantity };
}

// ---------------------------------------------------------------- SQLite

/** An fdatasync of `path` off the event loop, one in flight at a time; a call waits for one that began after it. */
function walFlusher(path) {
  let handle;
  let current;
  let next;
  const flush = async () => {
    handle ??= await open(path, 'r');
    await handle.datasync();
  };
  const durable = () => {
    if (!current) {
      current = flush().finally(() => {
        current = undefined;
      });
      return current;
    }
    next ??= current
      .catch(() => {})
      .then(() => {
        next = undefined;
        return durable();
      });
    return next;
  };
  return { durable, close: async () => handle?.close() };
}

async function sqliteBackend(dataDir, { openDatabase }) {
  const db = openDatabase({ dataDir });
  // What serve's store does for a database in a file (store/sql.ts): SQLite writes each commit to the log, the flush makes it last.
  db.pragma('synchronous = NORMAL');
  const flusher = walFlusher(join(dataDir, 'miniapp.db-wal'));
  const s = (text) => db.prepare(text);
  const product = s('SELECT name, price, currency FROM products WHERE sku = ?');
  const take = s(`UPDATE stock_holds SET reserved_total = reserved_total + @quantity, updated_at = @at
    WHERE sku = @sku AND EXISTS (SELECT 1 FROM products p WHERE p.sku = @sku AND p.on_hand - (stock_holds.reserved_total - p.released_total) >= @quantity)`);
  const claim = s(`INSERT INTO idempotency_keys (scope, owner, key, request_hash, resource_id, response, created_at, expires_at)
    VALUES (@scope, '${OWNER}', @key, @hash, @resource, @response, @at, @expires) ON CONFLICT (scope, owner, key) DO NOTHING`);
  const reservation = s(
    `INSERT INTO reservations (id, order_id, state, expires_at, created_at, updated_at) VALUES (@reservationId, @id, 'active', @expiresAt, @at, @at)`,
  );
  const reservationItem = s('INSERT INTO reservation_items (reservation_id, sku, quantity) VALUES (@reservationId, @sku, @quantity)');
  const order = s(`INSERT INTO orders (id, user_id, state, currency, total_amount, reservation_id, created_at, updated_at)
    VALUES (@id, NULL, 'RESERVED', @currency, @total, @reservationId, @at, @at)`);
  const orderItem = s(
    'INSERT INTO order_items (order_id, position, sku, name, quantity, unit_price, amount) VALUES (@id, 0, @sku, @name, @quantity, @price, @total)',
  );
  const pay = s(`UPDATE orders SET state = 'PAID', payment_id = @paymentId, paid_at = @at, updated_at = @at WHERE id = @orderId AND state = 'RESERVED'
    RETURNING total_amount, currency, reservation_id`);
  const commit = s(`UPDATE reservations SET state = 'committed', updated_at = @at WHERE id = @reservationId AND state = 'active' AND expires_at > @at`);
  const charge = s(`INSERT INTO sandbox_charges (key, amount, currency, method, outcome, failure_code, reference, answered, created_at)
    VALUES (@paymentId, @amount, @currency, '${METHOD}', 'approved', NULL, @reference, 0, @at) ON CONFLICT (key) DO NOTHING`);
  const payment =
    s(`INSERT INTO payments (id, order_id, user_id, status, amount, balance, currency, method, provider, provider_reference, approved_at, created_at, updated_at)
    VALUES (@paymentId, @orderId, NULL, 'DONE', @amount, @amount, @currency, '${METHOD}', '${PROVIDER}', @reference, @at, @at, @at)`);
  const sold = s(`UPDATE products SET on_hand = products.on_hand - i.quantity, released_total = products.released_total + i.quantity, updated_at = @at
    FROM reservation_items i WHERE i.reservation_id = @reservationId AND i.sku = products.sku`);
  const ledger = s(`INSERT INTO stock_movements (sku, delta, on_hand, reason, actor, at)
    SELECT p.sku, -i.quantity, p.on_hand, @reason, 'system', @at FROM reservation_items i JOIN products p ON p.sku = i.sku WHERE i.reservation_id = @reservationId`);
  const stored = s('SELECT response FROM idempotency_keys WHERE scope = ? AND owner = ? AND key = ?');

  /** `work` in one BEGIN IMMEDIATE transaction; its answer once the commit is on the disk. */
  const transact = async (work) => {
    const answer = db.transaction(work).immediate();
    await flusher.durable();
    return answer;
  };
  const replay = (scope, key) => JSON.parse(stored.get(scope, OWNER, key).response);

  return {
    createOrder: (request) =>
      transact(() => {
        const { sku, quantity } = oneItem(request);
        const item = product.get(sku);
        if (!item) throw new RpcFailure('NOT_FOUND', `no SKU ${sku}`);
        const now = new Date();
        const at = now.toISOString();
        const total = item.price * quantity;
        const answer = {
          id: id('ord'),
          status: 'RESERVED',
          items: [{ sku, name: item.name, quantity, unitPrice: item.price, amount: total }],
          totalAmount: total,
          currency: item.currency,
          reservationId: id('res'),
          reservationExpiresAt: new Date(now.getTime() + RESERVATION_TTL_MS).toISOString(),
          createdAt: at,
          updatedAt: at,
        };
        const keyed = claim.run({
          scope: 'order.create',
          key: request.idempotency_key,
          hash: request.idempotency_key,
          resource: answer.id,
          response: JSON.stringify(answer),
          at,
          expires: new Date(now.getTime() + KEY_TTL_MS).toISOString(),
        });
        if (keyed.changes === 0) return replay('order.create', request.idempotency_key);
        const row = { ...answer, sku, quantity, name: item.name, price: item.price, total, at, expiresAt: answer.reservationExpiresAt };
        reservation.run(row);
        reservationItem.run(row);
        order.run(row);
        orderItem.run(row);
        if (take.run(row).changes !== 1) throw new RpcFailure('FAILED_PRECONDITION', `not enough of ${sku} in stock`);
        return answer;
      }),
    pay: (request) =>
      transact(() => {
        const now = new Date();
        const at = now.toISOString();
        const paymentId = id('pay');
        const paid = pay.get({ paymentId, at, orderId: request.order_id });
        if (!paid) {
          const again = stored.get('payment.process', OWNER, request.idempotency_key);
          if (again) return JSON.parse(again.response);
          throw new RpcFailure('FAILED_PRECONDITION', `order ${request.order_id} is not RESERVED`);
        }
        const row = { paymentId, orderId: request.order_id, at, amount: paid.total_amount, currency: paid.currency, reservationId: paid.reservation_id };
        if (commit.run(row).changes !== 1) throw new RpcFailure('FAILED_PRECONDITION', `the reservation of order ${request.order_id} expired`);
        const reference = id('sbx');
        charge.run({ ...row, reference });
        payment.run({ ...row, reference });
        sold.run(row);
        ledger.run({ ...row, reason: `order ${request.order_id} paid` });
        const answer = approved({ paymentId, orderId: request.order_id, amount: paid.total_amount, currency: paid.currency, reference, at });
        const keyed = claim.run({
          scope: 'payment.process',
          key: request.idempotency_key,
          hash: request.idempotency_key,
          resource: paymentId,
          response: JSON.stringify(answer),
          at,
          expires: new Date(now.getTime() + KEY_TTL_MS).toISOString(),
        });
        if (keyed.changes === 0) throw new RpcFailure('ALREADY_EXISTS', `idempotency_key ${request.idempotency_key} was used for another order`);
        return answer;
      }),
    seed: async ({ sku, quantity, price, name }) => {
      const at = new Date().toISOString();
      db.transaction(() => {
        db.prepare(
          "INSERT INTO products (sku, name, price, currency, on_hand, released_total, created_at, updated_at) VALUES (?, ?, ?, 'KRW', ?, 0, ?, ?)",
        ).run(sku, name, price, quantity, at, at);
        db.prepare('INSERT INTO stock_holds (sku, reserved_total, updated_at) VALUES (?, 0, ?)').run(sku, at);
      })();
      await flusher.durable();
    },
    close: async () => {
      await flusher.close();
      db.close();
    },
  };
}

// ---------------------------------------------------------------- PostgreSQL

/** CreateOrder as one statement: the hold, the reservation and its item, the order and its item, the key with its answer (built here). */
const CREATE_ORDER = `WITH taken AS (
    UPDATE stock_holds h SET reserved_total = h.reserved_total + $2, updated_at = $3
    FROM products p WHERE h.sku = $1 AND p.sku = h.sku AND p.on_hand - (h.reserved_total - p.released_total) >= $2
    RETURNING p.name, p.price, p.currency),
  reservation AS (INSERT INTO reservations (id, order_id, state, expires_at, created_at, updated_at) SELECT $6, $5, 'active', $4, $3, $3 FROM taken RETURNING id),
  reservation_item AS (INSERT INTO reservation_items (reservation_id, sku, quantity) SELECT id, $1, $2 FROM reservation),
  placed AS (INSERT INTO orders (id, user_id, state, currency, total_amount, reservation_id, created_at, updated_at)
    SELECT $5, NULL, 'RESERVED', t.currency, t.price * $2, r.id, $3, $3 FROM taken t, reservation r RETURNING id),
  order_item AS (INSERT INTO order_items (order_id, position, sku, name, quantity, unit_price, amount)
    SELECT o.id, 0, $1, t.name, $2, t.price, t.price * $2 FROM placed o, taken t),
  claim AS (INSERT INTO idempotency_keys (scope, owner, key, request_hash, resource_id, response, created_at, expires_at)
    SELECT 'order.create', '${OWNER}', $7, $7, o.id, json_build_object('id', o.id, 'status', 'RESERVED',
      'items', json_build_array(json_build_object('sku', $1::text, 'name', t.name, 'quantity', $2::bigint, 'unitPrice', t.price, 'amount', t.price * $2)),
      'totalAmount', t.price * $2, 'currency', t.currency, 'reservationId', $6::text, 'reservationExpiresAt', $4::text, 'createdAt', $3::text, 'updatedAt', $3::text)::text,
      $3, $8 FROM placed o, taken t
    ON CONFLICT (scope, owner, key) DO NOTHING RETURNING response)
  SELECT t.name, t.price, t.currency, 1 / (SELECT count(*) FROM claim)::int AS claimed FROM taken t`;

/** ProcessPayment as one statement: the order PAID, its reservation committed, the provider's charge, the payment, the stock and its ledger line, the key. */
const PAY = `WITH paid AS (
    UPDATE orders SET state = 'PAID', payment_id = $2, paid_at = $3, updated_at = $3 WHERE id = $1 AND state = 'RESERVED'
    RETURNING id, total_amount, currency, reservation_id),
  committed AS (UPDATE reservations r SET state = 'committed', updated_at = $3 FROM paid
    WHERE r.id = paid.reservation_id AND r.state = 'active' AND r.expires_at > $3 RETURNING r.id),
  charge AS (INSERT INTO sandbox_charges (key, amount, currency, method, outcome, failure_code, reference, answered, created_at)
    SELECT $2, total_amount, currency, '${METHOD}', 'approved', NULL, $4, 0, $3 FROM paid ON CONFLICT (key) DO NOTHING RETURNING reference),
  payment AS (INSERT INTO payments (id, order_id, user_id, status, amount, balance, currency, method, provider, provider_reference, approved_at, created_at, updated_at)
    SELECT $2, p.id, NULL, 'DONE', p.total_amount, p.total_amount, p.currency, '${METHOD}', '${PROVIDER}', c.reference, $3, $3, $3 FROM paid p, charge c
    RETURNING id, amount, currency),
  stocked AS (UPDATE products SET on_hand = products.on_hand - i.quantity, released_total = products.released_total + i.quantity, updated_at = $3
    FROM reservation_items i, committed c WHERE i.reservation_id = c.id AND i.sku = products.sku RETURNING products.sku, products.on_hand, i.quantity),
  ledger AS (INSERT INTO stock_movements (sku, delta, on_hand, reason, actor, at) SELECT sku, -quantity, on_hand, 'order ' || $1 || ' paid', 'system', $3 FROM stocked),
  claim AS (INSERT INTO idempotency_keys (scope, owner, key, request_hash, resource_id, response, created_at, expires_at)
    SELECT 'payment.process', '${OWNER}', $5, $5, p.id, json_build_object('payment', json_build_object('id', p.id, 'orderId', $1::text, 'status', 'DONE',
      'amount', p.amount, 'balance', p.amount, 'currency', p.currency, 'method', '${METHOD}', 'provider', '${PROVIDER}', 'providerReference', $4::text,
      'createdAt', $3::text, 'updatedAt', $3::text, 'approvedAt', $3::text), 'message', 'approved')::text, $3, $6 FROM payment p
    ON CONFLICT (scope, owner, key) DO NOTHING RETURNING 1)
  SELECT p.amount, p.currency, 1 / ((SELECT count(*) FROM claim) * (SELECT count(*) FROM stocked))::int AS done FROM payment p`;

async function postgresBackend(url, { openStore }) {
  // Migrated by miniapp's own migrations, then left alone.
  const store = await openStore({ kind: 'postgres', url, poolSize: 1 });
  await store.close();
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  const query = (name, text, values) => pool.query({ name, text, values });
  return {
    createOrder: async (request) => {
      const { sku, quantity } = oneItem(request);
      const now = new Date();
      const at = now.toISOString();
      const orderId = id('ord');
      const reservationId = id('res');
      const expiresAt = new Date(now.getTime() + RESERVATION_TTL_MS).toISOString();
      const keyExpires = new Date(now.getTime() + KEY_TTL_MS).toISOString();
      const { rows } = await query('floor_create_order', CREATE_ORDER, [
        sku,
        quantity,
        at,
        expiresAt,
        orderId,
        reservationId,
        request.idempotency_key,
        keyExpires,
      ]);
      if (rows.length === 0) throw new RpcFailure('FAILED_PRECONDITION', `not enough of ${sku} in stock`);
      const { name, price, currency } = rows[0];
      const total = Number(price) * quantity;
      return {
        id: orderId,
        status: 'RESERVED',
        items: [{ sku, name, quantity, unitPrice: Number(price), amount: total }],
        totalAmount: total,
        currency,
        reservationId,
        reservationExpiresAt: expiresAt,
        createdAt: at,
        updatedAt: at,
      };
    },
    pay: async (request) => {
      const now = new Date();
      const at = now.toISOString();
      const paymentId = id('pay');
      const reference = id('sbx');
      const { rows } = await query('floor_pay', PAY, [
        request.order_id,
        paymentId,
        at,
        reference,
        request.idempotency_key,
        new Date(now.getTime() + KEY_TTL_MS).toISOString(),
      ]);
      if (rows.length === 0) throw new RpcFailure('FAILED_PRECONDITION', `order ${request.order_id} is not RESERVED`);
      const amount = Number(rows[0].amount);
      return approved({ paymentId, orderId: request.order_id, amount, currency: rows[0].currency, reference, at });
    },
    seed: async ({ sku, quantity, price, name }) => {
      const at = new Date().toISOString();
      await pool.query(
        `WITH p AS (INSERT INTO products (sku, name, price, currency, on_hand, released_total, created_at, updated_at) VALUES ($1, $2, $3, 'KRW', $4, 0, $5, $5))
         INSERT INTO stock_holds (sku, reserved_total, updated_at) VALUES ($1, 0, $5)`,
        [sku, name, price, quantity, at],
      );
    },
    close: () => pool.end(),
  };
}

// ---------------------------------------------------------------- the server

/**
 * Starts the floor on `store` ({ kind: 'sqlite', dataDir } or { kind:
 * 'postgres', url }: a fresh database) with `sku` in stock, gRPC on
 * 127.0.0.1:0. `dist` imports a module of dist/ (the migrations and the
 * service definitions, loaded once at start).
 */
export async function startCheckoutFloor({ store, stock }, dist) {
  const grpc = await import('@grpc/grpc-js');
  const [{ serviceDefinition }, { openDatabase }, { openStore }] = await Promise.all([
    dist('grpc/protos.js'),
    dist('store/database.js'),
    dist('store/store.js'),
  ]);
  const backend = store.kind === 'sqlite' ? await sqliteBackend(store.dataDir, { openDatabase }) : await postgresBackend(store.url, { openStore });
  await backend.seed(stock);
  const unary = (work, toMessage) => (call, callback) => {
    work(call.request).then(
      (answer) => callback(null, toMessage(answer)),
      (error) =>
        callback({
          code: error instanceof RpcFailure ? grpc.status[error.code] : grpc.status.INTERNAL,
          details: error instanceof RpcFailure ? error.message : String(error),
        }),
    );
  };
  const server = new grpc.Server();
  const pay = unary(backend.pay, paymentMessage);
  server.addService(serviceDefinition('order.v1.OrderService').service, { CreateOrder: unary(backend.createOrder, orderMessage), ProcessPayment: pay });
  server.addService(serviceDefinition('payment.v1.PaymentService').service, { ProcessPayment: pay });
  const port = await new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  return {
    address: `127.0.0.1:${port}`,
    close: async () => {
      await new Promise((resolve) => server.tryShutdown(() => resolve()));
      await backend.close();
    },
  };
}

/**
 * What the floor's database holds after `ordered` checkouts of one unit of
 * `sku` from `stockAtStart`: throws unless every one is PAID with its rows
 * and the stock is on_hand less what was ordered, nothing reserved.
 */
export async function checkFloorRows(store, { sku, stockAtStart, ordered }) {
  const sql = `SELECT (SELECT count(*) FROM orders WHERE state = 'PAID') AS paid, (SELECT count(*) FROM orders) AS orders,
      (SELECT count(*) FROM payments WHERE status = 'DONE') AS payments, (SELECT count(*) FROM sandbox_charges) AS charges,
      (SELECT count(*) FROM idempotency_keys WHERE response IS NOT NULL) AS keys, (SELECT count(*) FROM stock_movements WHERE delta = -1) AS movements,
      (SELECT count(*) FROM reservations WHERE state = 'committed') AS committed,
      p.on_hand, h.reserved_total - p.released_total AS reserved FROM products p JOIN stock_holds h ON h.sku = p.sku WHERE p.sku = $1`;
  let row;
  if (store.kind === 'sqlite') {
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(join(store.dataDir, 'miniapp.db'), { readonly: true, fileMustExist: true });
    try {
      row = db.prepare(sql).get({ 1: sku });
    } finally {
      db.close();
    }
  } else {
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: store.url });
    await client.connect();
    try {
      row = (await client.query(sql, [sku])).rows[0];
    } finally {
      await client.end();
    }
  }
  const got = Object.fromEntries(Object.entries(row).map(([key, value]) => [key, Number(value)]));
  const expected = {
    paid: ordered,
    orders: ordered,
    payments: ordered,
    charges: ordered,
    keys: 2 * ordered,
    movements: ordered,
    committed: ordered,
    on_hand: stockAtStart - ordered,
    reserved: 0,
  };
  for (const [key, value] of Object.entries(expected)) {
    if (got[key] !== value)
      throw new Error(`the checkout floor's rows after ${ordered} checkouts: ${JSON.stringify(got)}; expected ${JSON.stringify(expected)}`);
  }
}
