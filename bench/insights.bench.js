/**
 * Graph calls and wall time to export all 250 media of the graph sandbox
 * with reach, saved and shares as CSV:
 *
 * - `miniapp insights media --all --metrics reach,saved,shares --format csv`
 *   (field expansion: the account lookup, then one call per page of 100);
 * - the floor is the spec's reference approach, 1 + N: read the media list,
 *   then one insights call per media item. It is written below, in this
 *   file, and runs as its own process (`node bench/insights.bench.js
 *   --reference`) so that both sides pay for starting Node alike.
 *
 * Both run against the same in-process graph sandbox (from dist/, which
 * `npm run bench` builds), with a rate limit high enough for the
 * reference's 254 calls a run. Calls are read from the sandbox's counter
 * around one verified run of each side; times are paired runs.
 *
 * On localhost a round trip costs well under a millisecond, so the time
 * ratio here is the least favourable case for miniapp: against the real
 * API each call costs about 100 ms or more, and the 200-calls-an-hour
 * budget allows the reference less than one export an hour.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parse } from 'csv-parse/sync';
import { pairedRuns } from './lib.js';

const SELF = fileURLToPath(import.meta.url);
const ROOT = dirname(dirname(SELF));
const BIN = join(ROOT, 'bin', 'miniapp.cjs');
const NODE = process.execPath;

const MEDIA = 250;
const METRICS = ['reach', 'saved', 'shares'];
const FIELDS = ['id', 'media_type', 'timestamp', 'caption', 'like_count', 'comments_count', 'permalink'];
const TOKEN = 'sandbox-graph-token';
/** The budget for this export. */
const MAX_CALLS = 4;

/* ------------------------------------------------------------------------ */
/* The reference: 1 + N, as the spec's reference client does it.            */
/* ------------------------------------------------------------------------ */

function csvCell(value) {
  const text = value === undefined || value === null ? '' : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

async function reference() {
  const { request } = await import('undici');
  const base = `${process.env.BENCH_GRAPH_URL}/v18.0`;
  const token = process.env.BENCH_GRAPH_TOKEN;
  const get = async (url) => {
    const withToken = new URL(url);
    withToken.searchParams.set('access_token', token);
    const response = await request(withToken, { signal: AbortSignal.timeout(10_000) });
    const body = await response.body.json();
    if (response.statusCode !== 200) throw new Error(`GET ${url.split('?')[0]}: HTTP ${response.statusCode} ${JSON.stringify(body.error)}`);
    return body;
  };
  // The account, the media list page by page (the largest page), then one insights call per media item.
  const accounts = await get(`${base}/me/social_business_accounts`);
  const account = accounts.data[0].id;
  const media = [];
  let next = `${base}/${account}/media?fields=${FIELDS.join(',')}&limit=100`;
  while (next) {
    const page = await get(next);
    media.push(...page.data);
    next = page.paging?.next;
  }
  const lines = [[...FIELDS, ...METRICS].join(',')];
  for (const item of media) {
    const insights = await get(`${base}/${item.id}/insights?metric=${METRICS.join(',')}`);
    const values = Object.fromEntries(insights.data.map((metric) => [metric.name, metric.values[0].value]));
    lines.push([...FIELDS.map((field) => item[field]), ...METRICS.map((metric) => values[metric])].map(csvCell).join(','));
  }
  process.stdout.write(`${lines.join('\r\n')}\r\n`);
}

if (process.argv[2] === '--reference') {
  await reference();
}

/* ------------------------------------------------------------------------ */
/* The benchmark.                                                            */
/* ------------------------------------------------------------------------ */

/** The caller's environment without anything that would change what is measured. */
function childEnv(tempDir, extra) {
  const env = { ...process.env };
  for (const name of Object.keys(env)) {
    if (name.startsWith('MINIAPP_') || name.startsWith('BENCH_GRAPH_') || name === 'FORCE_COLOR') delete env[name];
  }
  return { ...env, MINIAPP_CONFIG_DIR: join(tempDir, 'config'), MINIAPP_DATA_DIR: join(tempDir, 'data'), ...extra };
}

/** Runs a side once and returns its stdout; async, since the sandbox answers from this process. */
function capture(side) {
  return new Promise((resolve, reject) => {
    const child = spawn(side.cmd, side.args, { env: side.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve(stdout);
      else reject(new Error(`${side.args.join(' ')} exited with ${code}:\n${stderr}`));
    });
  });
}

export default async function insights(ctx) {
  const { buildSandbox } = await import(pathToFileURL(join(ROOT, 'dist', 'sandbox', 'server.js')).href);
  const sandbox = await buildSandbox({
    key: randomBytes(32),
    aad: randomBytes(16),
    graph: { media: MEDIA, rateLimit: { calls: 10_000_000, windowMs: 3_600_000 } },
  });
  await sandbox.app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${sandbox.app.server.address().port}/graph`;
  const tempDir = mkdtempSync(join(tmpdir(), 'miniapp-bench-'));
  try {
    const env = childEnv(tempDir, { MINIAPP_GRAPH_URL: url, MINIAPP_GRAPH_TOKEN: TOKEN, BENCH_GRAPH_URL: url, BENCH_GRAPH_TOKEN: TOKEN });
    const miniapp = { cmd: NODE, args: [BIN, 'insights', 'media', '--all', '--metrics', METRICS.join(','), '--format', 'csv'], env };
    const floor = { cmd: NODE, args: [SELF, '--reference'], env };

    // One verified run of each, counting its calls.
    const count = async (side) => {
      const before = sandbox.stats.graphCalls;
      const stdout = await capture(side);
      return { rows: parse(stdout), calls: sandbox.stats.graphCalls - before };
    };
    const ours = await count(miniapp);
    const theirs = await count(floor);
    if (ours.rows.length !== MEDIA + 1) throw new Error(`miniapp exported ${ours.rows.length - 1} rows, expected ${MEDIA}`);
    if (JSON.stringify(ours.rows) !== JSON.stringify(theirs.rows)) throw new Error('miniapp and the reference exported different tables');
    ctx.log(`calls: miniapp ${ours.calls}, reference ${theirs.calls}`);

    ctx.log('insights media --all (paired with the 1 + N reference)');
    const { a, b } = await pairedRuns({ a: miniapp, b: floor, runs: ctx.runs, warmup: ctx.warmup });
    return [
      {
        name: 'insights media --all: graph calls',
        value: ours.calls,
        unit: 'calls',
        floorName: 'reference 1+N calls',
        floorValue: theirs.calls,
        ratio: ours.calls / theirs.calls,
        // The bound, at most 4 calls, as a ratio to the reference.
        target: MAX_CALLS / theirs.calls,
        better: 'lower',
        note: `target: at most ${MAX_CALLS} calls for ${MEDIA} media with ${METRICS.length} metrics; miniapp ${ours.calls} (lookup + pages of 100), reference ${theirs.calls} (lookup + 3 pages + ${MEDIA} insights calls)`,
      },
      {
        name: 'insights media --all: wall time',
        value: a.median,
        unit: 'ms',
        floorName: 'reference 1+N',
        floorValue: b.median,
        ratio: a.median / b.median,
        target: 1,
        better: 'lower',
        note: `localhost sandbox, round trips near free; p10-p90 ${a.p10.toFixed(1)}-${a.p90.toFixed(1)} ms; reference ${b.p10.toFixed(1)}-${b.p90.toFixed(1)} ms`,
      },
    ];
  } finally {
    rmSync(tempDir, { recursive: true, force: true });
    await sandbox.app.close();
  }
}
