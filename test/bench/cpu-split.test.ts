/**
 * bench/cpu-split.js: the CPU a benchmark's notes give per operation is
 * told apart by thread (serve's worker, the load generator, the rest) and
 * by process (PostgreSQL's postmaster and its sessions), from /proc.
 * Without /proc (not Linux) every answer is undefined and the notes say
 * nothing of it.
 */
import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { cpuPerOperation, cpuSnapshot, describeCpu, osThreadId } from '../../bench/cpu-split.js';

const LINUX = existsSync('/proc/thread-self');
const MODULE = pathToFileURL(new URL('../../bench/cpu-split.js', import.meta.url).pathname).href;

/** A worker that tells its kernel thread id, and works (PBKDF2 iterations) when asked. */
function busyWorker(): Promise<{ tid: number | undefined; work: (iterations: number) => Promise<void>; end: () => Promise<number> }> {
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
     const { pbkdf2Sync } = require('node:crypto');
     import(workerData.module).then(({ osThreadId }) => {
       parentPort.on('message', (iterations) => { pbkdf2Sync('miniapp', 'salt', iterations, 32, 'sha256'); parentPort.postMessage('done'); });
       parentPort.postMessage({ tid: osThreadId() });
     });`,
    { eval: true, workerData: { module: MODULE } },
  );
  return new Promise((resolve, reject) => {
    worker.once('error', reject);
    worker.once('message', ({ tid }: { tid: number | undefined }) =>
      resolve({
        tid,
        work: (iterations) => new Promise((done) => worker.once('message', () => done()).postMessage(iterations)),
        end: () => worker.terminate(),
      }),
    );
  });
}

describe('the CPU split of the benchmarks', () => {
  it("counts a worker's work as serve's, not the load generator's", async () => {
    const worker = await busyWorker();
    try {
      if (!LINUX) {
        expect(worker.tid).toBeUndefined();
        expect(cpuSnapshot({ serveThread: worker.tid })).toBeUndefined();
        expect(describeCpu('a call', [cpuPerOperation(undefined, undefined, 1)])).toBe('');
        return;
      }
      expect(worker.tid).toEqual(expect.any(Number));
      expect(worker.tid).not.toBe(process.pid);
      expect(osThreadId()).toBe(process.pid);
      const before = cpuSnapshot({ serveThread: worker.tid });
      // Enough work that the main thread's own chores while it waits (the test runner's messages, its GC) stay far below it on a busy machine.
      await worker.work(2_000_000);
      const after = cpuSnapshot({ serveThread: worker.tid });
      const per = cpuPerOperation(before, after, 4)!;
      // The main thread only waited; the worker hashed: at least a clock tick of the kernel's (10 ms) a call.
      expect(per.serve).toBeGreaterThan(per.client);
      expect(per.serve).toBeGreaterThanOrEqual(10_000);
      expect(per.postgres).toBeUndefined();
      const text = describeCpu('a call', [per, per]);
      expect(text).toMatch(/^CPU a call \(median of rounds, \/proc\): serve [\d.]+ (ms|µs), load generator [\d.]+ (ms|µs), other threads [\d.]+ (ms|µs)$/);
    } finally {
      await worker.end();
    }
  });

  it("counts the work of the server's sessions (its child processes) as PostgreSQL's", async () => {
    // Stands in for a postmaster: an idle process that starts a session (a child) on request; the session works, says
    // so, and waits to be ended. Only the session works between the snapshots, so only the children's count shows it.
    const session =
      "const { pbkdf2Sync } = require('node:crypto'); pbkdf2Sync('x', 'y', 1000000, 32, 'sha256'); process.stdout.write('done'); setInterval(() => {}, 1000);";
    const server = spawn(
      process.execPath,
      [
        '-e',
        `const { spawn } = require('node:child_process');
         process.stdin.once('data', () => { const child = spawn(process.execPath, ['-e', ${JSON.stringify(session)}], { stdio: ['ignore', 'pipe', 'ignore'] });
           child.stdout.once('data', () => process.stdout.write('done')); process.on('SIGTERM', () => { child.kill(); process.exit(0); }); });
         process.stdout.write('ready');`,
      ],
      { stdio: ['pipe', 'pipe', 'ignore'] },
    );
    try {
      await new Promise((resolve) => server.stdout.once('data', resolve));
      const before = cpuSnapshot({ postgresPid: server.pid });
      server.stdin.write('go');
      await new Promise((resolve) => server.stdout.once('data', resolve));
      const after = cpuSnapshot({ postgresPid: server.pid });
      if (!LINUX) {
        expect(before).toBeUndefined();
        return;
      }
      const per = cpuPerOperation(before, after, 1)!;
      // A million PBKDF2 iterations take a few hundred ms; the idle parent a tick (10 ms) at most meanwhile.
      expect(per.postgres).toBeGreaterThanOrEqual(100_000);
      expect(per.postgres).toBeGreaterThan(per.client);
      expect(describeCpu('a call', [per])).toMatch(/, PostgreSQL [\d.]+ (ms|µs)$/);
    } finally {
      server.kill();
    }
  });
});
