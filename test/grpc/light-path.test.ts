/**
 * The one-shot client commands on the light path (no grpc-js: node:http2
 * and the compiled schema, src/grpc/client/light-call.ts), through the real
 * launcher against a real `miniapp serve` with a user, a SKU with stock, an
 * order and a payment in place: each prints exactly what the same command
 * prints through grpc-js (a traced command goes through grpc-js, for its
 * tracing interceptor; its spans go to stderr), fails with the same error,
 * and loads neither grpc-js nor a proto loader.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, launch, launchAsync, traceLoads, type Launched } from '../helpers/launcher.js';

/** Through grpc-js: a traced command (console exporter, spans on stderr). */
const GRPC_JS = { OTEL_TRACES_EXPORTER: 'console' };
const HEAVY = /@grpc\/grpc-js|@grpc\/proto-loader|protobufjs|@bufbuild\/protobuf/;

let home: string;
let serve: ChildProcess;
let orderId: string;
let paymentId: string;

function run(args: readonly string[], env: Record<string, string> = {}): Launched {
  return launch(home, args, { env });
}

function ok(args: readonly string[], env: Record<string, string> = {}): string {
  const result = run(args, env);
  expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(0);
  return result.stdout;
}

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'miniapp-light-'));
  serve = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--grpc-port', '0', '--store', 'memory', '--log-level', 'error'], {
    env: { PATH: process.env.PATH, HOME: home, MINIAPP_CONFIG_DIR: join(home, 'config'), MINIAPP_DATA_DIR: join(home, 'data') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk;
      // Ready once it has stored its address and admin token in the profile, which it says last.
      if (/^\s*admin\s/m.test(output)) resolve();
    };
    serve.stdout!.on('data', onData);
    serve.stderr!.on('data', onData);
    serve.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${output}`)));
  });
  ok(['users', 'create', '--username', 'ann', '--email', 'ann@example.com', '--password', 'ann-password-1', '--full-name', '김미니']);
  ok(['users', 'create', '--username', 'bob', '--email', 'bob@example.com', '--password', 'bob-password-1']);
  ok(['inventory', 'set', 'MUG', '--quantity', '10', '--price', '12000', '--name', 'Mug']);
  ok(['inventory', 'set', 'TEA', '--quantity', '5', '--price', '1050', '--name', 'Green tea']);
  orderId = JSON.parse(ok(['orders', 'create', '--item', 'MUG:2', '--item', 'TEA:1', '--json'])).id;
  ok(['orders', 'create', '--item', 'MUG:1']);
  paymentId = JSON.parse(ok(['orders', 'pay', orderId, '--json'])).id;
}, 60_000);

afterAll(async () => {
  if (serve && serve.exitCode === null) {
    const exited = new Promise((resolve) => serve.once('exit', resolve));
    serve.kill('SIGTERM');
    await exited;
  }
  rmSync(home, { recursive: true, force: true });
});

describe('one-shot client commands on the light path', () => {
  // Each command as JSON; as piped rows where its view reads fields JSON only copies (a traced run through grpc-js
  // costs several light ones: proto-wire.test.ts compares the two codecs message by message for every method).
  const commands: readonly (() => string[])[] = [
    () => ['users', 'get', '1'],
    () => ['users', 'list'],
    () => ['users', 'list', '--page-size', '1', '--page-token', ''],
    () => ['orders', 'list', '--status', 'PAID'],
    () => ['orders', 'get', orderId],
    () => ['inventory', 'stock'],
    () => ['payments', 'get', paymentId],
  ];
  const asRows = new Set(['users list', 'orders get', 'inventory stock']);

  it.each(
    commands.map((args) => [
      args()
        .map((word) => word ?? 'ID')
        .join(' '),
      args,
    ]),
  )(
    '%s prints exactly what it prints through grpc-js',
    (_name, args) => {
      const words = (args as () => string[])();
      for (const format of asRows.has(words.slice(0, 2).join(' ')) ? [['--json'], []] : [['--json']]) {
        const command = [...words, ...format];
        const light = run(command);
        const grpcJs = run(command, GRPC_JS);
        expect(light.code, `${command.join(' ')}: ${light.stderr}`).toBe(0);
        expect(grpcJs.code, `${command.join(' ')} through grpc-js: ${grpcJs.stderr}`).toBe(0);
        expect(grpcJs.stderr, 'the grpc-js run was traced').toContain('"kind":"client"');
        expect(light.stdout, command.join(' ')).toBe(grpcJs.stdout);
        expect(light.stdout.length).toBeGreaterThan(10);
      }
    },
    30_000,
  );

  it('monitor metrics --count 1 prints the snapshot as the grpc-js client does', () => {
    const args = ['monitor', 'metrics', '--count', '1', '--json', '--name', 'miniapp_process_start_time_seconds,miniapp_nodejs_version_info'];
    const [light, grpcJs] = [ok(args), ok(args, GRPC_JS)].map((text) => {
      const lines = text.trim().split('\n');
      expect(lines).toHaveLength(1);
      const { timestamp, ...rest } = JSON.parse(lines[0]!);
      expect(timestamp).toMatch(/^\d{4}-\d\d-\d\dT/);
      return rest;
    });
    expect(Object.keys(light.metrics)).toHaveLength(2);
    expect(light).toEqual(grpcJs);
  });

  it('fail with the error grpc-js gives for a status of the server', { timeout: 30_000 }, () => {
    for (const args of [
      ['orders', 'get', 'ord_nope', '--json'],
      ['users', 'list', '--json', '--token', 'not-a-token'],
    ]) {
      const light = run(args);
      const grpcJs = run(args, GRPC_JS);
      expect(light.code, args.join(' ')).not.toBe(0);
      expect(light.code).toBe(grpcJs.code);
      // The error is the first line of stderr; the traced run's spans follow it.
      expect(light.stderr.trim()).toBe(grpcJs.stderr.split('\n')[0]);
    }
  });

  it('go through grpc-js, which says why, when serve is not reached', () => {
    const light = run(['orders', 'list', '--json', '--addr', '127.0.0.1:1', '--deadline', '3s']);
    expect(light.code).toBe(5);
    expect(light.stderr).toContain('UNAVAILABLE: cannot reach the commerce services of `miniapp serve` at 127.0.0.1:1');
  });

  it('keep to one --deadline when grpc-js takes over from a light call that waited in vain', async () => {
    // A server that takes the connection, says nothing, and drops it after 1.2 s: the light call ends unanswered
    // then, and grpc-js, which must word it, has what is left of the 2 s (it waited a fresh 2 s, and met the drop).
    const silent = createServer((socket) => {
      socket.on('error', () => undefined);
      setTimeout(() => socket.destroy(), 1_200);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const address = `127.0.0.1:${(silent.address() as AddressInfo).port}`;
      const result = await launchAsync(home, ['users', 'get', '1', '--json', '--addr', address, '--deadline', '2s']);
      expect(result.code).toBe(5);
      expect(JSON.parse(result.stderr).error.code).toBe('DEADLINE_EXCEEDED');
    } finally {
      silent.close();
    }
  });

  it('load neither grpc-js nor a proto loader', { timeout: 30_000 }, () => {
    for (const args of [
      ['users', 'get', '1', '--json'],
      ['users', 'list', '--json'],
      ['orders', 'list', '--json'],
      ['inventory', 'stock', '--json'],
      ['monitor', 'metrics', '--count', '1', '--json'],
    ]) {
      const { loaded, result } = traceLoads(home, args);
      expect(result.stdout.length, args.join(' ')).toBeGreaterThan(10);
      expect(
        loaded.filter((entry) => HEAVY.test(entry)),
        args.join(' '),
      ).toEqual([]);
    }
    // The trace sees grpc-js where it is loaded.
    const { loaded } = traceLoads(home, ['orders', 'list', '--json'], { env: GRPC_JS });
    expect(loaded.some((entry) => HEAVY.test(entry))).toBe(true);
  });
});
