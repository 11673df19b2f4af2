/** Types of bench/cpu-split.js (plain JavaScript, run by node without a build), for the tests. */
export interface CpuSnapshot {
  serve: number;
  client: number;
  others: number;
  postgres: number | undefined;
}

export interface CpuPerOperation {
  serve: number;
  client: number;
  others: number;
  postgres: number | undefined;
}

export function osThreadId(): number | undefined;
export function cpuSnapshot(options?: { serveThread?: number | undefined; postgresPid?: number | undefined }): CpuSnapshot | undefined;
export function cpuPerOperation(before: CpuSnapshot | undefined, after: CpuSnapshot | undefined, operations: number): CpuPerOperation | undefined;
export function describeCpu(what: string, rounds: readonly (CpuPerOperation | undefined)[]): string;
