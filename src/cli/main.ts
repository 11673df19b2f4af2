/**
 * The full CLI: every command group, each loaded only when the command line
 * names it (its commander definitions, then what its actions import).
 * `runCli` is what the launcher calls for everything the quick path
 * (quick.ts) does not serve, and what tests call in-process.
 */
import { GROUP_SUMMARIES, registerCompletion, runProgram, type Loaders } from './program.js';
import type { Register } from './command.js';
import { processContext, type Context } from './context.js';
import type { ExitCode } from '../errors.js';

export { commandPath, groupNameOf } from './program.js';

const LOADERS: Loaders = {
  serve: async () => (await import('./commands/serve.js')).registerServe,
  db: async () => (await import('./commands/db.js')).registerDb,
  callbacks: async () => (await import('./commands/callbacks.js')).registerCallbacks,
  users: async () => (await import('./commands/users/index.js')).registerUsers,
  inventory: async () => (await import('./commands/inventory.js')).registerInventory,
  orders: async () => (await import('./commands/orders.js')).registerOrders,
  payments: async () => (await import('./commands/payments.js')).registerPayments,
  monitor: async () => (await import('./commands/monitor.js')).registerMonitor,
  webhooks: async () => (await import('./commands/webhooks.js')).registerWebhooks,
  decrypt: async () => (await import('./commands/decrypt.js')).registerDecrypt,
  insights: async () => (await import('./commands/insights.js')).registerInsights,
  token: async () => (await import('./commands/token.js')).registerToken,
  me: async () => (await import('./commands/me.js')).registerMe,
  logout: async () => (await import('./commands/logout.js')).registerLogout,
  doctor: async () => (await import('./commands/doctor.js')).registerDoctor,
  sandbox: async () => (await import('./commands/sandbox.js')).registerSandbox,
  config: async () => (await import('./commands/config.js')).registerConfig,
  completion: async () => registerCompletion,
};

/** Every command group with its loader, in the order `miniapp --help` lists them. */
export const GROUPS: readonly { name: string; summary: string; load: () => Promise<Register> }[] = GROUP_SUMMARIES.map((group) => {
  const load = LOADERS[group.name];
  if (!load) throw new Error(`no loader for the command group ${group.name}`);
  return { ...group, load };
});

/** Runs the CLI with `argv` (without node and script) and returns the exit code. */
export function runCli(argv: readonly string[], ctx: Context): Promise<ExitCode> {
  return runProgram(argv, ctx, LOADERS);
}

/** The full CLI on the real process: what bin/miniapp.cjs runs for every command line the quick path does not serve. */
export function main(argv: readonly string[]): Promise<ExitCode> {
  return runCli(argv, processContext());
}
