/**
 * `miniapp payments ...`: payments of the commerce services over
 * payment.v1.PaymentService of `miniapp serve`: show one, refund all or part
 * of it. Commander wiring and rendering only.
 */
import type { Command } from 'commander';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import { UsageError } from '../../errors.js';
import { withConnection, type ConnectionFlags } from '../connect/grpc-connection.js';
import { checkIdArgument, COMMERCE_HELP, idempotencyKeyOf, money, printPayment, readCommerce, withCommerce } from '../views/commerce-view.js';
import { parseInteger } from '../flags.js';

export function registerPayments(program: Command, bind: Bind): void {
  const payments = program
    .command('payments')
    .description(
      'Payments of the commerce services (payment.v1.PaymentService of `miniapp serve`): status (IN_PROGRESS, DONE, ABORTED, PARTIAL_CANCELED, CANCELED), ' +
        'balance and refunds.',
    )
    .addHelpText('after', COMMERCE_HELP);

  withConnection(payments.command('get').description('show one payment with its refunds').argument('<payment-id>', 'the payment ("pay_...")')).action(
    bind(runGet),
  );

  withConnection(
    payments
      .command('refund')
      .description(
        "refund all of a payment's balance, or --amount of it, with a reason (the admin token only); its order becomes PARTIALLY_REFUNDED, or REFUNDED once all of it is",
      )
      .argument('<payment-id>', 'the payment ("pay_...")')
      .option('--amount <n>', 'minor units of the currency (KRW has none); default: the whole balance')
      .requiredOption('--reason <text>', 'why')
      .option('--idempotency-key <key>', 'retry safely with the same key; generated and printed when not given'),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp payments refund pay_... --amount 3000 --reason "one mug broken"\n  miniapp payments refund pay_... --reason "order returned"',
    )
    .action(bind(runRefund));
}

async function runGet(cc: CommandContext, command: Command): Promise<void> {
  const id = checkIdArgument(command.processedArgs[0] as string, 'pay');
  const read = { path: '/payment.v1.PaymentService/GetPayment', request: { payment_id: id } };
  printPayment(cc.out, await readCommerce(cc, command.opts<ConnectionFlags>(), read, (client) => client.getPayment(id)));
}

async function runRefund(cc: CommandContext, command: Command): Promise<void> {
  const id = checkIdArgument(command.processedArgs[0] as string, 'pay');
  const flags = command.opts<ConnectionFlags & { amount?: string; reason: string; idempotencyKey?: string }>();
  const amount = flags.amount === undefined ? 0 : parseInteger(flags.amount, '--amount', 1, 1_000_000_000_000);
  if (!flags.reason.trim()) throw new UsageError('--reason must not be empty');
  const key = idempotencyKeyOf(cc, flags.idempotencyKey);
  const { answer, order } = await withCommerce(cc, flags, async (client) => {
    const answer = await client.refundPayment({ payment_id: id, amount, reason: flags.reason, idempotency_key: key });
    // The order's state after the refund (PARTIALLY_REFUNDED, REFUNDED), said beside the payment's; not asked under --json.
    const order = !cc.out.json && answer.payment.order_id ? await client.getOrder(answer.payment.order_id) : undefined;
    return { answer, order };
  });
  printPayment(cc.out, answer.payment);
  if (cc.out.json) return;
  const { payment, refund } = answer;
  const pending = refund.status === 'PENDING' ? ' (the provider has not confirmed it yet)' : '';
  cc.out.success(
    `refunded ${money(refund.amount, payment.currency)}${pending}: payment ${id} ${payment.status}, balance ${money(payment.balance, payment.currency)}` +
      (order ? `; order ${order.id} ${order.status}` : ''),
  );
}
