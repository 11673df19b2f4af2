/**
 * grpc-js prints its own errors on stderr ("E No address added ..."), which
 * would repeat what miniapp reports properly. It stays quiet unless the
 * user asks for its logs with GRPC_VERBOSITY or GRPC_TRACE.
 */
export async function quietGrpcLogs(env: Readonly<Record<string, string | undefined>>): Promise<void> {
  if (env.GRPC_VERBOSITY || env.GRPC_TRACE) return;
  const grpc = await import('@grpc/grpc-js');
  grpc.setLogVerbosity(grpc.logVerbosity.NONE);
}
