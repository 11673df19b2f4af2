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
import { checkIdArgument, COMMERCE_HELP, idempotencyKeyOf, money, printPayment, withCommerce } from '../views/commerce-view.js';
import { parseInteger } from '../flags.js';

export function registerPayments(program: Command, bind: Bind): void {
  const payments = program
    .command('payments')
    .description(
      'Payments of the commerce services (payment.v1.PaymentService of `miniapp serve`): status (IN_PROGRESS, DONE, ABORTED, PARTIAL_CANCELED, CANCELED), ' +
        'balance and refunds.',
    )
    .addHelpText('after', COMMERCE_HELP);

  withConnection(payments.command('get').description('show one payment with its refunds').argument('<payment-id>', 'the payment ("pay_...")')).action(bind(runGet));

  withConnection(
    payments
      .command('refund')
      .description('refund all of a payment\'s balance, or --amount of it, with a reason')
      .argument('<payment-id>', 'the payment ("pay_...")')
      .option('--amount <n>', 'minor units of the currency (KRW has none); default: the whole balance')
      .requiredOption('--reason <text>', 'why')
      .option('--idempotency-key <key>', 'retry safely with the same key; generated and printed when not given'),
  )
    .addHelpText('after', '\nExamples:\n  miniapp payments refund pay_... --amount 3000 --reason "one mug broken"\n  miniapp payments refund pay_... --reason "order returned"')
    .action(bind(runRefund));
}

async function runGet(cc: CommandContext, command: Command): Promise<void> {
  const id = checkIdArgument(command.processedArgs[0] as string, 'pay');
  printPayment(cc.out, await withCommerce(cc, command.opts<ConnectionFlags>(), (client) => client.getPayment(id)));
}

async function runRefund(cc: CommandContext, command: Command): Promise<void> {
  const id = checkIdArgument(command.processedArgs[0] as string, 'pay');
  const flags = command.opts<ConnectionFlags & { amount?: string; reason: string; idempotencyKey?: string }>();
  const amount = flags.amount === undefined ? 0 : parseInteger(flags.amount, '--amount', 1, 1_000_000_000_000);
  if (!flags.reason.trim()) throw new UsageError('--reason must not be empty');
  const key = idempotencyKeyOf(cc, flags.idempotencyKey);
  const answer = await withCommerce(cc, flags, (client) => client.refundPayment({ payment_id: id, amount, reason: flags.reason, idempotency_key: key }));
  printPayment(cc.out, answer.payment);
  if (!cc.out.json) cc.out.success(`refunded ${money(answer.refund.amount, answer.payment.currency)}: payment ${id} ${answer.payment.status}, balance ${money(answer.payment.balance, answer.payment.currency)}`);
}
