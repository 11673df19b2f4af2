/**
 * `miniapp inventory ...`: stock levels and stock management over
 * inventory.v1.InventoryService of `miniapp serve`. Commander wiring and
 * rendering only (client: src/commerce/client.ts; views: commerce-view.ts).
 */
import type { Command } from 'commander';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import { UsageError } from '../../errors.js';
import { withConnection, type ConnectionFlags } from '../connect/grpc-connection.js';
import { checkSkuArgument, COMMERCE_HELP, printStock, readCommerce, STOCK_COLUMNS, stockJson, withCommerce } from '../views/commerce-view.js';
import type { StockLevelMessage } from '../../commerce/client.js';
import { parseInteger } from '../flags.js';

export function registerInventory(program: Command, bind: Bind): void {
  const inventory = program
    .command('inventory')
    .description(
      'Stock of the commerce services (inventory.v1.InventoryService of `miniapp serve`): levels, and setting and adjusting stock (admin token), kept as a ledger.',
    )
    .addHelpText('after', COMMERCE_HELP);

  withConnection(
    inventory.command('stock').description('stock levels of the SKUs named, or of every SKU: on hand, reserved, available').argument('[sku...]', 'SKUs'),
  ).action(bind(runStock));

  withConnection(
    inventory
      .command('set')
      .description('create a SKU, or set its on-hand quantity, price or name (what is not given is kept); a quantity change is recorded in the ledger')
      .argument('<sku>', 'the SKU: 1 to 64 letters, digits, ".", "_", "-"')
      .option('--quantity <n>', 'units on hand (not below what is reserved); required for a new SKU, else kept when not given')
      .option('--price <p>', "unit price in the currency's minor unit (KRW has none); required for a new SKU")
      .option('--name <name>', 'display name')
      .option('--currency <code>', 'ISO 4217 code of the price (a new SKU: KRW)')
      .option('--reason <text>', 'why, for the ledger', 'set'),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp inventory set MUG --quantity 10 --price 12000 --name "Mug"\n  miniapp inventory set MUG --quantity 25 --reason "stocktake"\n  miniapp inventory set MUG --price 13000        # the stock is left as it is',
    )
    .action(bind(runSet));

  withConnection(
    inventory
      .command('adjust')
      .description('add units (--by 5) or remove them (--by -2) with a reason; recorded in the ledger')
      .argument('<sku>', 'the SKU')
      .requiredOption('--by <n>', 'units added (positive) or removed (negative)')
      .requiredOption('--reason <text>', 'why: a delivery, breakage, a count correction'),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  miniapp inventory adjust MUG --by 24 --reason "delivery 2026-11-21"\n  miniapp inventory adjust MUG --by -1 --reason "broken in the shop"',
    )
    .action(bind(runAdjust));
}

async function runStock(cc: CommandContext, command: Command): Promise<void> {
  const skus = (command.processedArgs[0] as string[]).map(checkSkuArgument);
  const read = { path: '/inventory.v1.InventoryService/CheckStock', request: { skus } };
  const { items: levels } = await readCommerce<{ items: StockLevelMessage[] }>(cc, command.opts<ConnectionFlags>(), read, async (client) => ({
    items: await client.checkStock(skus),
  }));
  cc.out.table(levels.map(stockJson), STOCK_COLUMNS);
}

async function runSet(cc: CommandContext, command: Command): Promise<void> {
  const sku = checkSkuArgument(command.processedArgs[0] as string);
  const flags = command.opts<ConnectionFlags & { quantity?: string; price?: string; name?: string; currency?: string; reason: string }>();
  if (flags.quantity === undefined && flags.price === undefined && flags.name === undefined && flags.currency === undefined) {
    throw new UsageError('inventory set needs --quantity, --price, --name or --currency: what to set');
  }
  const request = {
    sku,
    quantity: flags.quantity === undefined ? undefined : parseInteger(flags.quantity, '--quantity', 0, 1_000_000_000),
    price: flags.price === undefined ? undefined : parseInteger(flags.price, '--price', 0, 1_000_000_000_000),
    name: flags.name,
    currency: flags.currency,
    reason: flags.reason,
  };
  if (request.currency !== undefined && !/^[A-Z]{3}$/.test(request.currency))
    throw new UsageError(`--currency must be an ISO 4217 code such as KRW or USD; got "${request.currency}"`);
  printStock(cc.out, await withCommerce(cc, flags, (client) => client.setStock(request)));
}

async function runAdjust(cc: CommandContext, command: Command): Promise<void> {
  const sku = checkSkuArgument(command.processedArgs[0] as string);
  const flags = command.opts<ConnectionFlags & { by: string; reason: string }>();
  const delta = parseInteger(flags.by, '--by', -1_000_000_000, 1_000_000_000);
  if (delta === 0) throw new UsageError('--by must not be 0: give the units added (positive) or removed (negative)');
  if (!flags.reason.trim()) throw new UsageError('--reason must not be empty');
  printStock(cc.out, await withCommerce(cc, flags, (client) => client.adjustStock({ sku, delta, reason: flags.reason })));
}
