/** Types of test/helpers/chaos.js (plain JavaScript, shared with the benchmarks). */
import type { ChildProcess } from 'node:child_process';

export interface ServeProcess {
  child: ChildProcess;
  /** The --json banner, and `adminToken` read from the file it names (`adminTokenFile`). */
  info: { url: string; grpc: { address: string }; adminTokenFile: string; adminToken: string } & Record<string, unknown>;
  stderr(): string;
  alive(): boolean;
  /** Resolves when the process exits. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
  dispose(): void;
}

/**
 * One `miniapp serve` process: on PostgreSQL with `databaseUrl`, else on SQLite in `home`'s data dir (a temporary
 * home of its own unless given; a given one is kept, for a restart on the same data).
 */
export function startServeProcess(options: {
  databaseUrl?: string;
  timeoutMs?: number;
  poolSize?: number;
  home?: string;
  port?: number;
  grpcPort?: number;
  extraArgs?: string[];
  /** Added to its environment. */
  env?: Record<string, string>;
  /** Options of node itself, before the script (`--cpu-prof`, which NODE_OPTIONS does not take). */
  nodeArgs?: string[];
}): Promise<ServeProcess>;

export interface ChaosStep {
  fault: 'reset' | 'blackhole' | 'restart';
  ms: number;
}

export interface ChaosReport {
  violations: string[];
  recoveries: { after: string; ms: number }[];
  counts: { calls: number; ok: number; unavailable: number };
  acknowledged: { users: number; posts: number };
  /** CREATED events each watcher received. */
  watched: number[];
}

export function runChaos(options: {
  databaseUrl: string;
  instances?: number;
  timeoutMs?: number;
  poolSize?: number;
  workers?: number;
  users?: number;
  schedule: ChaosStep[];
  calmMs?: number;
  recoveryBoundMs?: number;
  restartDatabase?: (ms: number) => Promise<void>;
  watchers?: boolean;
  log?: (message: string) => void;
}): Promise<ChaosReport>;
