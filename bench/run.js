#!/usr/bin/env node
/**
 * Benchmark runner: `npm run bench` (or `node bench/run.js [FILTER]` after
 * `npm run build`).
 *
 * Runs every bench/*.bench.js whose file name contains FILTER (all of them
 * without one), prints a table of results, and appends a section to
 * bench/RESULTS.md. Each module's default export is an async function
 * `(ctx) => rows`, a row being
 *
 *   { name, value, unit, floorName, floorValue, ratio, target, better, note }
 *
 * where `floorValue` is the same quantity for a reference measured in the
 * same run, `ratio` is value / floorValue (computed here when omitted),
 * `better` is 'lower' (times: pass when ratio <= target) or 'higher'
 * (throughput: pass when ratio >= target), and `note` is optional text.
 * A row with `target: null` is a reference: a ratio kept for comparison
 * with earlier runs, bound by no target. It is printed with target "-" and
 * result "ref", never a pass or a miss (`better` is still required: it says
 * which way is good).
 *
 * Benchmarks are reports, not tests: a missed target is printed loudly but
 * the exit code stays 0. A benchmark that cannot run at all (it threw) is a
 * bug, and makes the exit code 1.
 */
import { appendFile, readdir, stat, writeFile } from 'node:fs/promises';
import { cpus, platform, arch } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(BENCH_DIR);
const RESULTS = join(BENCH_DIR, 'RESULTS.md');
const SUFFIX = '.bench.js';

const DEFAULT_RUNS = 30;
const DEFAULT_WARMUP = 3;

/** Written when RESULTS.md does not exist yet; keep in step with the checked-in file. */
const RESULTS_HEADER = `# Benchmark results

This file is appended to by \`npm run bench\` (bench/run.js); each section is
one run, newest last. Do not edit past sections by hand: they are the record.

How to read a section:

- Every measured value sits next to a **floor**: a reference that bounds
  what is achievable (for start-up, \`node -e 0\`, a Node process that does
  nothing), measured in the same run, alternating with the value (A, B, A,
  B, ...), so that machine noise hits both alike.
- **ratio** is value / floor. Compare ratios across sections and machines;
  absolute milliseconds depend on the machine and its load at the time.
- **target** is a bound on the ratio: "<= 1.50x" means at most 1.5 times the
  floor (lower is better), ">= 0.80x" at least 0.8 times (higher is better).
  **result** says whether this run met it. A miss is a finding to look
  into, not a failed build; one miss on a noisy machine can be noise, so
  rerun before drawing conclusions. A row with target "-" and result
  "ref" is a reference: a ratio kept to compare with earlier runs, with no
  target of its own (its floor does other work than the value, so the
  ratio bounds nothing).
- Medians are over the paired runs listed; the notes give the p10-p90
  spread, a quick gauge of how noisy the run was.
`;

/** What the user typed, as far as we can tell, so that a section can be reproduced. */
function commandLine(args) {
  const runs = process.env.BENCH_RUNS ? `BENCH_RUNS=${process.env.BENCH_RUNS} ` : '';
  const viaNpm = process.env.npm_lifecycle_event === 'bench';
  if (viaNpm) return `${runs}npm run bench${args.length ? ` -- ${args.join(' ')}` : ''}`;
  return `${runs}node bench/run.js${args.length ? ` ${args.join(' ')}` : ''}`;
}

function parseRuns(text) {
  if (text === undefined || text === '') return DEFAULT_RUNS;
  if (!/^\d+$/.test(text.trim()) || Number(text) < 1) {
    throw new Error(`BENCH_RUNS must be a positive whole number, not "${text}"`);
  }
  return Number(text);
}

/** Fills in the ratio, checks the shape, and decides pass or miss. */
function checkRow(row, file) {
  if (typeof row !== 'object' || row === null) throw new Error(`a row must be an object, not ${JSON.stringify(row)}`);
  const where = `row ${JSON.stringify(row.name ?? '?')}`;
  for (const field of ['name', 'unit', 'floorName']) {
    if (typeof row[field] !== 'string' || !row[field]) throw new Error(`${where}: ${field} must be a non-empty string`);
  }
  for (const field of ['value', 'floorValue']) {
    if (!Number.isFinite(row[field])) throw new Error(`${where}: ${field} must be a finite number`);
  }
  // null (not merely missing) marks a reference: a forgotten target must not pass silently as one.
  if (row.target !== null && !Number.isFinite(row.target)) throw new Error(`${where}: target must be a finite number, or null for a reference row`);
  if (row.floorValue <= 0) throw new Error(`${where}: floorValue must be positive`);
  // No default: guessing the direction wrong would turn every miss into a pass.
  if (row.better !== 'lower' && row.better !== 'higher') throw new Error(`${where}: better must be 'lower' or 'higher'`);
  const ratio = row.ratio ?? row.value / row.floorValue;
  if (!Number.isFinite(ratio)) throw new Error(`${where}: ratio must be a finite number`);
  const reference = row.target === null;
  const pass = reference ? undefined : row.better === 'lower' ? ratio <= row.target : ratio >= row.target;
  return { ...row, ratio, pass, reference, file };
}

const formatValue = (value, unit) => `${value.toFixed(value < 100 ? 2 : 1)} ${unit}`;
const formatTarget = (row) => (row.reference ? '-' : `${row.better === 'lower' ? '<=' : '>='} ${row.target.toFixed(2)}x`);
const formatResult = (row) => (row.reference ? 'ref' : row.pass ? 'pass' : 'MISS');

function cells(row) {
  return [
    row.name,
    formatValue(row.value, row.unit),
    row.floorName,
    formatValue(row.floorValue, row.unit),
    `${row.ratio.toFixed(2)}x`,
    formatTarget(row),
    formatResult(row),
  ];
}

const HEADERS = ['benchmark', 'median', 'floor', 'floor median', 'ratio', 'target', 'result'];

function textTable(rows) {
  const lines = [HEADERS, ...rows.map(cells)];
  const widths = HEADERS.map((_, i) => Math.max(...lines.map((line) => line[i].length)));
  const render = (line) =>
    line
      .map((cell, i) => cell.padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  return [render(lines[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...lines.slice(1).map(render)].join('\n');
}

const mdCell = (text) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

function markdownSection({ date, command, runs, warmup, rows, failures }) {
  const cpuList = cpus();
  const model = cpuList[0]?.model?.trim();
  const lines = [
    '',
    `## ${date}`,
    '',
    `- command: \`${command}\``,
    `- machine: ${cpuList.length} cores${model ? ` (${model})` : ''}, ${platform()} ${arch()}`,
    `- node: ${process.version}`,
    `- runs: ${runs} paired runs after ${warmup} warm-up pairs where a benchmark uses paired runs (start-up); the load benchmarks give their rounds in their notes`,
    '',
  ];
  if (rows.length > 0) {
    lines.push(`| ${HEADERS.join(' | ')} |`, `|${HEADERS.map(() => '---').join('|')}|`);
    for (const row of rows) {
      const [name, value, floorName, floorValue, ratio, target] = cells(row).map(mdCell);
      const result = row.reference ? 'ref' : row.pass ? 'pass' : '**MISS**';
      lines.push(`| \`${name}\` | ${value} | \`${floorName}\` | ${floorValue} | ${ratio} | ${target} | ${result} |`);
    }
    lines.push('');
  }
  const notes = rows.filter((row) => row.note).map((row) => `- \`${mdCell(row.name)}\`: ${mdCell(row.note)}`);
  if (notes.length > 0) lines.push('Notes:', '', ...notes, '');
  if (failures.length > 0) {
    lines.push('Benchmarks that failed to run:', '');
    for (const { file, error } of failures) lines.push(`- ${file}: ${mdCell(error.message.split('\n')[0])}`);
    lines.push('');
  }
  return lines.join('\n');
}

async function exists(path) {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

async function main() {
  const args = process.argv.slice(2);
  const filter = args[0];
  const date = new Date().toISOString();
  const runs = parseRuns(process.env.BENCH_RUNS);
  const warmup = DEFAULT_WARMUP;

  const all = (await readdir(BENCH_DIR)).filter((name) => name.endsWith(SUFFIX)).sort();
  const files = filter ? all.filter((name) => name.includes(filter)) : all;
  if (files.length === 0) {
    console.error(`no benchmark matches "${filter}"; there are: ${all.join(', ') || 'none'}`);
    return 2;
  }

  const ctx = {
    root: ROOT,
    runs,
    warmup,
    /** Progress for the person watching; stderr, so stdout holds only the table. */
    log: (message) => console.error(`  ${message}`),
  };

  const rows = [];
  const failures = [];
  for (const file of files) {
    console.error(`running ${file} (${runs} paired runs after ${warmup} warm-up pairs)`);
    try {
      const module = await import(pathToFileURL(join(BENCH_DIR, file)).href);
      if (typeof module.default !== 'function') throw new Error(`${file} has no default export function`);
      const produced = await module.default(ctx);
      if (!Array.isArray(produced) || produced.length === 0) throw new Error(`${file} returned no rows`);
      rows.push(...produced.map((row) => checkRow(row, file)));
    } catch (error) {
      console.error(`error: ${file} failed to run: ${error.stack ?? error}`);
      failures.push({ file, error });
    }
  }

  if (rows.length > 0) {
    console.log(textTable(rows));
    const notes = rows.filter((row) => row.note);
    if (notes.length > 0) console.log(`\n${notes.map((row) => `${row.name}: ${row.note}`).join('\n')}`);
  }
  const targeted = rows.filter((row) => !row.reference);
  const misses = targeted.filter((row) => !row.pass);
  if (misses.length > 0) {
    console.log(`\nMISSED ${misses.length} of ${targeted.length} targets:`);
    for (const row of misses) console.log(`  ${row.name}: ${row.ratio.toFixed(2)}x the floor, target ${formatTarget(row)}`);
  } else if (targeted.length > 0) {
    console.log(`\nall ${targeted.length} targets met`);
  }
  if (targeted.length < rows.length) console.log(`${rows.length - targeted.length} reference row(s) without a target`);
  if (failures.length > 0) console.log(`\n${failures.length} benchmark(s) failed to run: ${failures.map((f) => f.file).join(', ')}`);

  if (!(await exists(RESULTS))) await writeFile(RESULTS, RESULTS_HEADER);
  await appendFile(RESULTS, markdownSection({ date, command: commandLine(args), runs, warmup, rows, failures }));
  console.error(`\nappended to ${join(basename(BENCH_DIR), basename(RESULTS))}`);
  return failures.length > 0 ? 1 : 0;
}

try {
  process.exitCode = await main();
} catch (error) {
  console.error(`error: ${error.message}`);
  process.exitCode = 2;
}
