/**
 * Where a load's CPU goes, by thread: serve's worker thread, the load
 * generator (the main thread), the process's other threads (V8's and
 * libuv's helpers) and PostgreSQL (its postmaster and every session), from
 * the kernel's own counts in /proc (utime + stime, in USER_HZ: 100 a
 * second on every Linux). A benchmark reads a snapshot before and after a
 * round and divides by the operations of the round, so that each run says
 * in its notes what an operation costs and who pays for it. Where there is
 * no /proc (not Linux), every function answers undefined and the notes say
 * nothing of it.
 */
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { median } from './lib.js';

const TICKS_PER_SECOND = 100;

/** The kernel's id of the calling thread (a worker's own, not the process's), or undefined without /proc. */
export function osThreadId() {
  try {
    return Number(readlinkSync('/proc/thread-self').split('/').at(-1));
  } catch {
    return undefined;
  }
}

/** utime + stime of a /proc stat line, in seconds, and its parent's pid. */
function parseStat(text) {
  // The command name may hold spaces and parentheses: the fields are counted from the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { ppid: Number(fields[1]), seconds: (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND };
}

function statOf(path) {
  try {
    return parseStat(readFileSync(path, 'utf8'));
  } catch {
    return undefined; // a thread or session that ended meanwhile
  }
}

/**
 * CPU seconds so far of serve's thread (`serveThread`, from osThreadId in
 * its worker), the main thread, the other threads of this process, and,
 * given its postmaster's pid, PostgreSQL; undefined without /proc.
 */
export function cpuSnapshot({ serveThread, postgresPid } = {}) {
  let threads;
  try {
    threads = readdirSync('/proc/self/task').map(Number);
  } catch {
    return undefined;
  }
  const snapshot = { serve: 0, client: 0, others: 0, postgres: undefined };
  for (const tid of threads) {
    const seconds = statOf(`/proc/self/task/${tid}/stat`)?.seconds ?? 0;
    if (tid === serveThread) snapshot.serve += seconds;
    else if (tid === process.pid) snapshot.client += seconds;
    else snapshot.others += seconds;
  }
  if (postgresPid !== undefined) {
    snapshot.postgres = 0;
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const pid = Number(entry);
      const stat = statOf(`/proc/${pid}/stat`);
      if (stat && (pid === postgresPid || stat.ppid === postgresPid)) snapshot.postgres += stat.seconds;
    }
  }
  return snapshot;
}

/** Microseconds of CPU an operation, by part, between two snapshots over `operations`; undefined when either is. */
export function cpuPerOperation(before, after, operations) {
  if (!before || !after || operations <= 0) return undefined;
  const per = (key) => ((after[key] - before[key]) / operations) * 1e6;
  return {
    serve: per('serve'),
    client: per('client'),
    others: per('others'),
    postgres: before.postgres === undefined || after.postgres === undefined ? undefined : per('postgres'),
  };
}

const microseconds = (value) => (value >= 1000 ? `${(value / 1000).toFixed(2)} ms` : `${value.toFixed(0)} µs`);

/**
 * "CPU a checkout (median of rounds): serve 2.10 ms, load generator 1.02 ms, ..." for the notes, from the
 * cpuPerOperation of each round; empty when there were none (no /proc).
 */
export function describeCpu(what, rounds) {
  const measured = rounds.filter((round) => round !== undefined);
  if (measured.length === 0) return '';
  const middle = (key) => median(measured.map((round) => round[key]));
  const parts = [
    `serve ${microseconds(middle('serve'))}`,
    `load generator ${microseconds(middle('client'))}`,
    `other threads ${microseconds(middle('others'))}`,
  ];
  if (measured.every((round) => round.postgres !== undefined)) parts.push(`PostgreSQL ${microseconds(middle('postgres'))}`);
  return `CPU ${what} (median of rounds, /proc): ${parts.join(', ')}`;
}
