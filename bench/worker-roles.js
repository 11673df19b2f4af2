/**
 * Servers of a benchmark on their own worker threads (the real one and its
 * floor), so the load generator on the main thread does not share their
 * event loop. A bench module is both sides: on the main thread it spawns
 * itself as a worker with a role; in the worker, `runRoleIfWorker` starts
 * that role, reports { ready, info } (or { error }) and closes on 'close'.
 */
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { osThreadId } from './cpu-split.js';

/** In a worker spawned with `flag`, starts `roles[workerData.role]` and serves the protocol; elsewhere does nothing. */
export async function runRoleIfWorker(flag, roles) {
  if (isMainThread || !workerData?.[flag]) return;
  let running;
  try {
    running = await roles[workerData.role](workerData);
    // The kernel's id of this thread, so that the main thread can tell its CPU apart (cpu-split.js).
    parentPort.postMessage({ ready: true, info: { ...running.info, osThread: osThreadId() } });
  } catch (error) {
    parentPort.postMessage({ error: error.stack ?? String(error) });
    return;
  }
  parentPort.on('message', async (message) => {
    if (message !== 'close') return;
    try {
      await running.close();
      parentPort.postMessage({ closed: true });
    } catch (error) {
      parentPort.postMessage({ closed: true, error: error.stack ?? String(error) });
    }
    parentPort.close();
  });
}

/** Starts one role of the module at `moduleUrl` on a worker thread; `ready` resolves with its info once it listens. */
export function spawnRole(moduleUrl, flag, role, data = {}) {
  const worker = new Worker(moduleUrl, { workerData: { [flag]: true, role, ...data } });
  let exited = false;
  const exit = new Promise((resolve) => worker.once('exit', (code) => resolve(code)));
  void exit.then(() => {
    exited = true;
  });
  const ready = new Promise((resolve, reject) => {
    worker.once('message', (message) => (message.ready ? resolve(message.info) : reject(new Error(`${role} did not start:\n${message.error}`))));
    worker.once('error', (error) => reject(new Error(`${role} worker failed: ${error.stack ?? error}`)));
    void exit.then((code) => reject(new Error(`${role} worker exited with code ${code} before it was ready`)));
  });
  // Awaited by the caller in turn; until then a failure must not count as unhandled.
  ready.catch(() => {});
  const close = async () => {
    if (exited) return;
    const closed = new Promise((resolve) => worker.on('message', (message) => message.closed && resolve(message)));
    worker.postMessage('close');
    const timeout = new Promise((resolve) => setTimeout(() => resolve({ timedOut: true }), 5000).unref());
    const outcome = await Promise.race([closed, exit, timeout]);
    // A clean close lets the thread end by itself; terminate is the fallback.
    if ((await Promise.race([exit, new Promise((resolve) => setTimeout(() => resolve('running'), 1000).unref())])) === 'running') {
      await worker.terminate();
    }
    if (outcome?.error) throw new Error(`${role} did not close cleanly:\n${outcome.error}`);
  };
  return { ready, close };
}
