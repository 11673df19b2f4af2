/**
 * The README's examples, run as written and in order, so that they cannot
 * drift from the CLI: every ```sh block of README.md, top to bottom, in one
 * bash, on a fresh config dir and data dir, with `miniapp` on PATH as
 * `npm link` puts it there. ```console blocks are transcripts (a prompt and
 * what it prints) and are not run.
 *
 * A block is run as a reader pastes it (asPasted): a server it sends to the
 * background (`miniapp serve ... &`) is waited for, as a person waits for
 * its banner ("Stop with Ctrl-C"), after the block's last line only.
 *
 * The examples use the documented ports (3000, 50051, 4010, 4011). They run in a
 * network namespace of their own when the machine allows one (`unshare`),
 * so that they cannot meet another test's server; otherwise on the host's
 * loopback, after checking that those ports are free.
 */
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const PORTS = [3000, 50051, 4010, 4011];

/** Every ```sh block of the README, with the line it starts on. */
function shellBlocks(markdown: string): { line: number; code: string }[] {
  const blocks: { line: number; code: string }[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trim() !== '```sh') continue;
    const start = i + 1;
    const body: string[] = [];
    for (i++; i < lines.length && lines[i]!.trim() !== '```'; i++) body.push(lines[i]!);
    blocks.push({ line: start, code: body.join('\n') });
  }
  return blocks;
}

/** Every ```console block of the README (transcripts: `$ ` lines and what they print), with the line it starts on. */
function consoleBlocks(markdown: string): { line: number; lines: string[] }[] {
  const blocks: { line: number; lines: string[] }[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trim() !== '```console') continue;
    const start = i + 1;
    const body: string[] = [];
    for (i++; i < lines.length && lines[i]!.trim() !== '```'; i++) body.push(lines[i]!);
    blocks.push({ line: start, lines: body });
  }
  return blocks;
}

/**
 * Transcripts a reader types along with the examples, in the same state:
 * the config walkthrough (all but what needs a terminal), and the wrong-AAD
 * decrypt, whose first error line must be what the README shows. Returned
 * as bash that runs after the ```sh blocks.
 */
function transcripts(markdown: string): string {
  const blocks = consoleBlocks(markdown);
  const walkthrough = blocks.find((b) => b.lines[0]!.startsWith('$ export MINIAPP_PROFILE='));
  const wrongAad = blocks
    .flatMap((b) => b.lines.map((text, i) => ({ text, next: b.lines[i + 1] ?? '' })))
    .find((l) => l.text.startsWith('$ MINIAPP_DECRYPT_AAD=00ff miniapp decrypt'));
  if (!walkthrough || !wrongAad) throw new Error('the README lost the config walkthrough or the wrong-AAD example');
  const command = (text: string) => text.slice(2).replace(/\s+#.*$/, '');
  const steps = walkthrough.lines.filter((text) => text.startsWith('$ ') && !text.includes('on a terminal')).map((text) => `${command(text)} > /dev/null`);
  return [
    `echo "### README.md line ${walkthrough.line} (the config walkthrough, typed along)" >&2`,
    // What the walkthrough reads: a key file and a client key in pki/.
    'printf "%s\\n" 603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4 > key.txt',
    'mkdir -p pki && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout pki/client.key -out pki/client.crt -days 1 -subj /CN=readme 2>/dev/null',
    ...steps,
    // What the examples after it need of the default profile still works.
    'miniapp me --json > /dev/null',
    'echo "### README.md (the wrong-AAD decrypt, typed along)" >&2',
    `set +e; ${command(wrongAad.text)} 2> wrong-aad.txt; code=$?; set -e`,
    'test "$code" -eq 3',
    `test "$(head -1 wrong-aad.txt)" = ${JSON.stringify(wrongAad.next)}`,
  ].join('\n');
}

/**
 * A block as a reader runs it: pasted whole, its lines one after the other
 * with no pause, and read (its output, a server's banner) before the next
 * block. So `miniapp serve|sandbox ... &  # comment` becomes
 * `... > bg-N.log 2>&1 &`, and the wait for its banner comes after the
 * block's last line, never between its lines: a line that needs the server
 * up must wait for it itself, as the reader's terminal would not. (The test
 * waited right after the `&`, which hid the rolling-restart example sending
 * SIGTERM to a serve that was not up yet.) Other background commands just
 * run.
 *
 * A line that prints an HTTP status (`-w '%{http_code}\n'`) and says which
 * in its comment (`# 503`) must print that one: the reader compares them.
 */
let background = 0;
function asPasted(code: string): string {
  const banners: string[] = [];
  const lines = code
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .map((line) => {
      const status = /^(.*-w '%\{http_code\}\\n'.*?)\s+#\s*(\d{3})\b/.exec(line);
      if (status) return `expect_status ${status[2]} ${status[1]}`;
      const match = /^(.*\S)\s+&\s*(#.*)?$/.exec(line);
      if (!match || match[1]!.trim().startsWith('#')) return line;
      if (!/\bminiapp (serve|sandbox)\b(?! (login|unlink|advance)\b)/.test(match[1]!)) return line;
      // In the work dir whatever directory the block is in by its end (`cd prod ... cd ..`).
      const log = `"$BG_DIR/bg-${++background}.log"`;
      banners.push(`banner ${log}`);
      return `${match[1]} > ${log} 2>&1 &`;
    });
  return [...lines, ...banners].join('\n');
}

function canUnshare(): boolean {
  return spawnSync('unshare', ['-rn', 'true']).status === 0;
}

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A minimal jq for machines without one: -r and the filters the README uses (.a.b, .[].a, .[0], {a, b}). */
const JQ_SHIM = `#!/usr/bin/env node
const args = process.argv.slice(2);
const raw = args.includes('-r');
const filter = args.filter((a) => a !== '-r')[0] ?? '.';
let input = '';
process.stdin.on('data', (c) => (input += c)).on('end', () => {
  const apply = (value, expr) => {
    expr = expr.trim();
    if (expr === '.') return [value];
    const object = /^\\{(.*)\\}$/.exec(expr);
    if (object) return [Object.fromEntries(object[1].split(',').map((k) => k.trim()).map((k) => [k, value?.[k] ?? null]))];
    let out = [value];
    for (const part of expr.match(/\\.[A-Za-z_][A-Za-z0-9_]*|\\.?\\[\\d*\\]/g) ?? []) {
      out = out.flatMap((v) => {
        if (/^\\.?\\[\\]$/.test(part)) return Array.isArray(v) ? v : Object.values(v ?? {});
        const index = /\\[(\\d+)\\]/.exec(part);
        if (index) return [v?.[Number(index[1])] ?? null];
        return [v?.[part.slice(1)] ?? null];
      });
    }
    return out;
  };
  for (const value of input.split('\\n').filter((l) => l.trim()).map((l) => JSON.parse(l))) {
    for (const result of apply(value, filter)) console.log(raw && typeof result === 'string' ? result : JSON.stringify(result, null, 2));
  }
});
`;

describe('the README transcripts a reader types beside the examples', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const typed = consoleBlocks(readme).flatMap((block) => block.lines.filter((line) => line.startsWith('$ ')));

  it('create no user that a later example creates again (grpcurl CreateUser)', () => {
    const created = new Set(
      [
        ...shellBlocks(readme)
          .map((b) => b.code)
          .join('\n')
          .matchAll(/--username (\w+)/g),
      ].map((m) => m[1]),
    );
    const grpcurl = typed.filter((line) => line.includes('UserService/CreateUser'));
    expect(grpcurl.length).toBeGreaterThan(0);
    for (const line of grpcurl) expect(created.has(/"username":"(\w+)"/.exec(line)![1]), line).toBe(false);
  });

  it('recommend `npm link` before the first example, whose commands run as the linked `miniapp`, not through npx', () => {
    const first = consoleBlocks(readme)[0]!;
    expect(first.lines.some((line) => /^\$ npm link\b/.test(line))).toBe(true);
    expect(first.line).toBeLessThan(shellBlocks(readme)[0]!.line);
    // npx starts npm before miniapp at every call: said once, and no example pays it.
    for (const block of shellBlocks(readme)) expect(block.code, `README.md line ${block.line}`).not.toMatch(/\bnpx miniapp\b/);
  });

  it("start no second serve on the quick start's ports (3000, 50051) or data dir while it runs", () => {
    const serves = typed.filter((line) => /^\$ (\S+=\S+ )*miniapp serve\b/.test(line) && !line.includes('[--'));
    expect(serves.length).toBeGreaterThan(0);
    for (const line of serves) {
      // A restart in its place, or a deployment's own machine (its PostgreSQL), takes the ports as its own.
      if (line.includes('# in place of') || line.includes('--database ')) continue;
      expect(line, line).toMatch(/--port (?!3000\b)\d+/);
      expect(line, line).toMatch(/--grpc-port (?!50051\b)\d+|--no-grpc/);
      expect(line, line).toMatch(/--data-dir |--store memory|--database /);
    }
  });
});

describe('how a README block is run', () => {
  it('as pasted: a server sent to the background is waited for after the block, and a status is compared with its comment', () => {
    // The rolling restart as it was: SIGTERM on the line after the start, before serve was up (both curls printed 000).
    const run = asPasted(
      [
        'miniapp serve --port 3001 --grpc-port 50052 --store memory --drain 2s &   # a second instance',
        'SERVE_PID=$!',
        'kill -TERM "$SERVE_PID"',
        "curl -s -o /dev/null -w '%{http_code}\\n' http://127.0.0.1:3001/health/ready   # 503",
        'wait "$SERVE_PID"',
      ].join('\n'),
    ).split('\n');
    expect(run[0]).toMatch(/^miniapp serve --port 3001 .* > "\$BG_DIR\/bg-\d+\.log" 2>&1 &$/);
    expect(run.slice(1, 3)).toEqual(['SERVE_PID=$!', 'kill -TERM "$SERVE_PID"']);
    expect(run[3]).toBe("expect_status 503 curl -s -o /dev/null -w '%{http_code}\\n' http://127.0.0.1:3001/health/ready");
    expect(run[4]).toBe('wait "$SERVE_PID"');
    expect(run[5]).toMatch(/^banner "\$BG_DIR\/bg-\d+\.log"$/);
  });
});

describe('the README examples', () => {
  it('run as written, in order, on a fresh data dir', { timeout: 240_000 }, async () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const blocks = shellBlocks(readme);
    expect(blocks.length).toBeGreaterThan(5);
    const isolated = canUnshare();
    if (!isolated) {
      for (const port of PORTS) expect(await portFree(port), `port ${port} must be free to run the README's examples`).toBe(true);
    }
    const home = mkdtempSync(join(tmpdir(), 'miniapp-readme-'));
    try {
      const bin = join(home, 'bin');
      mkdirSync(bin);
      writeFileSync(join(bin, 'miniapp'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(root, 'bin', 'miniapp.cjs'))} "$@"\n`);
      chmodSync(join(bin, 'miniapp'), 0o755);
      if (spawnSync('sh', ['-c', 'command -v jq']).status !== 0) {
        writeFileSync(join(bin, 'jq'), JQ_SHIM);
        chmodSync(join(bin, 'jq'), 0o755);
      }
      const work = join(home, 'work');
      mkdirSync(work);
      const script = [
        'set -euo pipefail',
        // Job control: each background job is a process group of its own, so stopping a job stops what it started too
        // (a job that is a subshell whose child is serve: killing the subshell alone would leave serve running).
        'set -m',
        // SIGINT, as Ctrl-C: serve stops without its drain period (SIGTERM would keep it answering for --drain first).
        'stop_jobs() { for job in $(jobs -p); do kill -INT -- "-$job" 2>/dev/null || true; done; wait 2>/dev/null || true; }',
        // Background servers the examples start end with the script.
        "trap 'stop_jobs' EXIT",
        // Runs a command that prints an HTTP status and checks it is the one the README's comment says.
        'expect_status() { want=$1; shift; got=$("$@" || true); echo "$got"; if [ "$got" != "$want" ]; then echo "README: printed $got where its comment says $want: $*" >&2; return 1; fi; }',
        // Waits for the banner of a server the block sent to the background.
        'banner() { for _ in $(seq 1 300); do grep -q "Stop with Ctrl-C" "$1" 2>/dev/null && return 0; sleep 0.1; done; echo "no banner in $1:" >&2; cat "$1" >&2; return 1; }',
        isolated ? 'ip link set lo up 2>/dev/null || true' : '',
        `cd ${JSON.stringify(work)}`,
        `BG_DIR=${JSON.stringify(work)}`,
        ...blocks.map((block) => `echo "### README.md line ${block.line}" >&2\n${asPasted(block.code)}`),
        transcripts(readme),
        'echo "### all README examples ran" >&2',
        // Stop what the examples left running (serve, the sandbox, a watch), as Ctrl-C would.
        'stop_jobs',
        'trap - EXIT',
        'exit 0',
      ].join('\n');
      writeFileSync(join(home, 'examples.sh'), script);
      const env = {
        PATH: `${bin}:${process.env.PATH}`,
        HOME: home,
        MINIAPP_CONFIG_DIR: join(home, 'config'),
        MINIAPP_DATA_DIR: join(home, 'data'),
        LANG: 'C.UTF-8',
      };
      const command = isolated ? ['unshare', ['-rn', 'bash', join(home, 'examples.sh')]] : ['bash', [join(home, 'examples.sh')]];
      const result = spawnSync(command[0] as string, command[1] as string[], { env, encoding: 'utf8', timeout: 220_000, cwd: work });
      const where = [...result.stderr.matchAll(/### README\.md line (\d+)/g)].at(-1)?.[1];
      expect(
        result.stderr,
        `the example block at README.md line ${where} failed:\n${result.stderr.slice(-4000)}\n--- stdout ---\n${result.stdout.slice(-2000)}`,
      ).toContain('### all README examples ran');
      expect(result.status, result.stderr.slice(-2000)).toBe(0);
      // What the examples say they show, shown: the decrypted user through the relay, the post counted, the callback recorded.
      expect(result.stdout).toMatch(/"userKey":1001[^\n]*"name":"[^"]+"/);
      expect(result.stdout).toMatch(/(^|})1$/m);
      expect(result.stdout).toMatch(/\t2002\tWITHDRAWAL_TERMS\tPOST\t/);
      // "Pointing at the production services": the partner API in production's shape (mutual TLS, the production
      // prefix, a Base64 key, a text AAD, comma-separated scopes read back space-separated), and both Instagram hosts.
      expect(result.stdout).toContain('https://127.0.0.1:4011 answered HTTP 401 as the partner API does: TLS and routing work');
      expect(result.stdout).toMatch(/"scope": "user_ci user_name user_phone/);
      expect(result.stdout.match(/^17841400000000001\tSandbox Studio$/gm)).toHaveLength(3);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
