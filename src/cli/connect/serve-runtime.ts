/**
 * What a running `miniapp serve` tells the other commands on this machine:
 * `serve.json` in its data dir (mode 0600, removed when it stops) with its
 * pid and URLs, so that `miniapp sandbox login` reaches the sandbox serve
 * started without being told its port.
 */
import { chmodSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const RUNTIME_FILE = 'serve.json';

export interface ServeRuntime {
  pid: number;
  url: string;
  grpc: string | null;
  sandbox: string | null;
}

export function writeServeRuntime(dataDir: string, runtime: ServeRuntime): () => void {
  const path = join(dataDir, RUNTIME_FILE);
  writeFileSync(path, `${JSON.stringify(runtime)}\n`, { mode: 0o600 });
  return () => {
    try {
      const current = JSON.parse(readFileSync(path, 'utf8')) as ServeRuntime;
      // Another serve on the same data dir may have written it since.
      if (current.pid === runtime.pid) rmSync(path, { force: true });
    } catch {
      // already gone
    }
  };
}

/** The running serve of this data dir, if its process is alive. */
export function readServeRuntime(dataDir: string): ServeRuntime | undefined {
  try {
    const runtime = JSON.parse(readFileSync(join(dataDir, RUNTIME_FILE), 'utf8')) as ServeRuntime;
    process.kill(runtime.pid, 0);
    return runtime;
  } catch {
    return undefined;
  }
}

/**
 * The admin token of a serve whose store keeps no token file (PostgreSQL,
 * memory), written where the banner can point to instead of printing it:
 * `admin-token.PID` in the data dir, 0600, removed when it stops.
 */
export function writeAdminTokenCopy(dataDir: string, token: string, pid: number): { path: string; forget: () => void } {
  const path = join(dataDir, `admin-token.${pid}`);
  writeFileSync(path, `${token}\n`, { mode: 0o600 });
  chmodSync(path, 0o600);
  return { path, forget: () => rmSync(path, { force: true }) };
}
