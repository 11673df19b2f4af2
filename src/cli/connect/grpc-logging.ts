/**
 * grpc-js prints its own errors on stderr ("E No address added ..."), which
 * would repeat what miniapp reports properly. It stays quiet unless the
 * user asks for its logs with GRPC_VERBOSITY or GRPC_TRACE.
 *
 * It also makes Node print a deprecation warning on the first TLS
 * connection to an address given as an IP (`--tls --addr 127.0.0.1:50051`):
 * grpc-js always hands TLS the target's host as the server name (SNI),
 * which RFC 6066 does not allow for an IP, and Node says so (DEP0123) and
 * will ignore such a name in time. That is grpc-js's business, not the
 * user's, and grpc-js has no way to leave the name out (its
 * ssl_target_name_override would send a made-up host name instead), so
 * exactly that one warning is dropped, and every other passes.
 */
export async function quietGrpcLogs(env: Readonly<Record<string, string | undefined>>): Promise<void> {
  dropIpServernameWarning();
  if (env.GRPC_VERBOSITY || env.GRPC_TRACE) return;
  const grpc = await import('@grpc/grpc-js');
  grpc.setLogVerbosity(grpc.logVerbosity.NONE);
}

const IP_SERVERNAME = 'DEP0123';
let dropping = false;

function dropIpServernameWarning(): void {
  if (dropping) return;
  dropping = true;
  const emitWarning = process.emitWarning;
  process.emitWarning = function (this: unknown, warning: string | Error, ...rest: unknown[]): void {
    // emitWarning(warning, type, code) or emitWarning(warning, { type, code }).
    const [typeOrOptions, code] = rest;
    const given = typeof typeOrOptions === 'object' && typeOrOptions !== null ? (typeOrOptions as { code?: unknown }).code : code;
    if (given === IP_SERVERNAME || (warning instanceof Error && (warning as Error & { code?: unknown }).code === IP_SERVERNAME)) return;
    Reflect.apply(emitWarning, process, [warning, ...rest]);
  } as typeof process.emitWarning;
}
