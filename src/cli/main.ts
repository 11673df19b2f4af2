/**
 * The full CLI: every command group, each loaded only when the command line
 * names it (its commander definitions, then what its actions import).
 * `runCli` is what the launcher calls for everything the quick path
 * (quick.ts) does not serve, and what tests call in-process.
 */
import { GROUP_SUMMARIES, groupNameOf, registerCompletion, registerVersion, runProgram, type Loaders } from './program.js';
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
  version: async () => registerVersion,
};

/** Every command group with its loader, in the order `miniapp --help` lists them. */
export const GROUPS: readonly { name: string; summary: string; load: () => Promise<Register> }[] = GROUP_SUMMARIES.map((group) => {
  const load = LOADERS[group.name];
  if (!load) throw new Error(`no loader for the command group ${group.name}`);
  return { ...group, load };
});

/** Commands that serve rather than call: `serve` traces its own requests (its --otlp-endpoint), the sandbox none. */
const UNTRACED_GROUPS = new Set(['serve', 'sandbox', 'completion', 'config', 'version']);

/** How long a traced command waits, once done, for its spans to be sent (an unreachable collector costs no more). */
const FLUSH_MS = 2_000;

/**
 * Runs the CLI with `argv` (without node and script) and returns the exit code.
 *
 * With OTEL_* set (telemetry/config.ts), a client command is traced: one
 * span for the command ("miniapp users get"), a client span for each gRPC
 * call below it whose traceparent serve continues, and the partner and
 * graph API calls; sent before the process exits.
 */
export async function runCli(argv: readonly string[], ctx: Context): Promise<ExitCode> {
  const group = groupNameOf(argv);
  if (group === undefined || UNTRACED_GROUPS.has(group) || !Object.keys(ctx.env).some((name) => name.startsWith('OTEL_'))) {
    return runProgram(argv, ctx, LOADERS);
  }
  const { resolveTracing } = await import('../telemetry/config.js');
  let tracing;
  try {
    tracing = resolveTracing(ctx.env, { defaultServiceName: 'miniapp-cli' });
  } catch (error) {
    // A variable meant for another program must not stop this one: said once, and the command runs untraced.
    ctx.io.stderr.write(`warning: not tracing: ${(error as Error).message}\n`);
  }
  if (!tracing) return runProgram(argv, ctx, LOADERS);
  const [{ startTelemetry }, { SPAN_KIND }] = await Promise.all([import('../telemetry/otel.js'), import('../telemetry/telemetry.js')]);
  const telemetry = await startTelemetry({
    config: tracing,
    version: ctx.version,
    warn: (message) => ctx.io.stderr.write(`warning: ${message}\n`),
    console: (line) => ctx.io.stderr.write(line),
    exportTimeoutMs: FLUSH_MS,
  });
  try {
    return await telemetry.inSpan('miniapp', { kind: SPAN_KIND.INTERNAL }, async (span) => {
      const code = await runProgram(argv, { ...ctx, telemetry }, LOADERS, (path) => span?.updateName(path));
      span?.setAttribute('process.exit.code', code);
      if (code !== 0) telemetry.fail(span!, `exit ${code}`);
      return code;
    });
  } finally {
    // Bounded by the exporter's time-out (FLUSH_MS): a collector that never answers costs a command no more.
    await telemetry.shutdown();
  }
}

/** The full CLI on the real process: what bin/miniapp.cjs runs for every command line the quick path does not serve. */
export function main(argv: readonly string[]): Promise<ExitCode> {
  return runCli(argv, processContext());
}
