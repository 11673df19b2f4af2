/**
 * Tracing from the command line: `miniapp users get` with OTEL_* set sends
 * its command span and a client span per call, and serve (exporting over
 * OTLP/gRPC here, the other protocol) continues the same trace; `serve`
 * says in its banner where traces go, and refuses a malformed endpoint
 * with a usage error; a stray OTEL_* meant for another program does not
 * stop a command.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { BIN } from '../helpers/launcher.js';
import { startServeProcess } from '../helpers/chaos.js';
import { Sandbox } from '../helpers/cli.js';
import { startTestServe } from '../helpers/serve.js';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.js';
import { resolveTracing } from '../../src/telemetry/config.js';
import type { RunningServe } from '../../src/server/serve.js';

/**
 * A collector that takes connections and never answers (a listening socket whose connections are never read: the
 * kernel accepts them, nobody replies). The stop must not wait for it longer than the process's own bound, whatever
 * OTEL_EXPORTER_OTLP_TIMEOUT says; here it says ten minutes, so a process still there after 30 s waited for it.
 */
async function silentCollector(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => void sockets.add(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function exitOf(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    const patience = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('exit', (code) => {
      clearTimeout(patience);
      resolve(code);
    });
  });
}

describe('a collector that never answers', () => {
  const TEN_MINUTES = { OTEL_EXPORTER_OTLP_TIMEOUT: '600000' };

  it('does not keep a traced command from ending', { timeout: 40_000 }, async () => {
    const collector = await silentCollector();
    const home = mkdtempSync(join(tmpdir(), 'miniapp-silent-'));
    try {
      const child = spawn(process.execPath, [BIN, 'callbacks', 'list', '--json'], {
        env: {
          PATH: process.env.PATH,
          HOME: home,
          MINIAPP_CONFIG_DIR: join(home, 'config'),
          MINIAPP_DATA_DIR: join(home, 'data'),
          OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
          ...TEN_MINUTES,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      expect(await exitOf(child)).toBe(0);
      expect(stderr).toContain(`warning: tracing: cannot send spans to ${collector.url}/v1/traces: Request timed out; they are dropped until it answers`);
    } finally {
      await collector.close();
      rmSync(home, { recursive: true, force: true });
    }
  });

  it('does not keep serve from stopping', { timeout: 40_000 }, async () => {
    const collector = await silentCollector();
    const serve = await startServeProcess({ extraArgs: ['--otlp-endpoint', collector.url, '--log-level', 'info'], env: TEN_MINUTES });
    try {
      // A request, so that there are spans to send.
      expect((await request(`${serve.info.url}/health`)).statusCode).toBe(200);
      serve.child.kill('SIGTERM');
      const code = await exitOf(serve.child);
      expect(code, serve.stderr().slice(-1500)).toBe(0);
      expect(serve.stderr()).toContain('cannot send spans to');
    } finally {
      serve.dispose();
      await collector.close();
    }
  });
});

describe('tracing from the CLI', () => {
  let collector: OtlpReceiver;
  let running: RunningServe;
  const sb = new Sandbox();

  beforeAll(async () => {
    // serve sends its spans every 100 ms rather than every 5 s (read when it starts).
    vi.stubEnv('OTEL_BSP_SCHEDULE_DELAY', '100');
    collector = await startOtlpReceiver();
    running = await startTestServe({
      grpc: { host: '127.0.0.1', port: 0 },
      tracing: resolveTracing({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_ENDPOINT: collector.grpcUrl, OTEL_SERVICE_NAME: 'serve-a' }),
    });
  });
  afterAll(async () => {
    await running?.close();
    await collector?.close();
    sb.dispose();
  });

  it("a traced `users get` is one trace: the command, its call, and serve's span of that call", async () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, MINIAPP_GRPC_TOKEN: running.adminToken };
    const created = await sb.run(
      ['users', 'create', '--username', 'dana', '--email', 'dana@example.com', '--password', 'dana-password-1', '--addr', running.grpc!.address, '--json'],
      { env },
    );
    expect(created.code, created.stderr).toBe(0);
    const id = String(JSON.parse(created.stdout).id);
    const got = await sb.run(['users', 'get', id, '--addr', running.grpc!.address, '--json'], { env });
    expect(got.code, got.stderr).toBe(0);
    expect(JSON.parse(got.stdout).username).toBe('dana');

    // The CLI has sent its spans before returning; serve's come over gRPC in their batch.
    const spans = await collector.waitFor((all) => all.some((s) => s.name === 'user.v1.UserService/GetUser' && s.kind === 'SPAN_KIND_SERVER'));
    const command = spans.find((s) => s.name === 'miniapp users get')!;
    expect(command.resource['service.name']).toBe('miniapp-cli');
    expect(command.attributes['process.exit.code']).toBe(0);
    // The call's client span (serve's statements below it are client spans of the same trace too).
    const call = spans.find((s) => s.traceId === command.traceId && s.kind === 'SPAN_KIND_CLIENT' && s.attributes['rpc.system'] === 'grpc')!;
    expect(call).toMatchObject({ name: 'user.v1.UserService/GetUser', parentSpanId: command.spanId });
    const server = spans.find((s) => s.traceId === command.traceId && s.kind === 'SPAN_KIND_SERVER')!;
    expect(server).toMatchObject({ name: 'user.v1.UserService/GetUser', parentSpanId: call.spanId });
    expect(server.resource['service.name']).toBe('serve-a');
    // The password given to `users create` is nowhere in what was exported.
    expect(collector.raw.join('\n')).not.toContain('dana-password-1');
  });

  it('OTEL_TRACES_EXPORTER=console writes each span as a JSON line on stderr, leaving stdout the answer', async () => {
    const got = await sb.run(['users', 'list', '--addr', running.grpc!.address, '--json'], {
      env: { OTEL_TRACES_EXPORTER: 'console', MINIAPP_GRPC_TOKEN: running.adminToken },
    });
    expect(got.code, got.stderr).toBe(0);
    expect(() => JSON.parse(got.stdout)).not.toThrow();
    const spans = got.stderr
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const command = spans.find((span) => span.name === 'miniapp users list');
    expect(command).toMatchObject({ kind: 'internal', parentSpanId: null, status: 'ok', service: 'miniapp-cli' });
    expect(spans.find((span) => span.name === 'user.v1.UserService/ListUsers')).toMatchObject({
      kind: 'client',
      parentSpanId: command.spanId,
      traceId: command.traceId,
    });
  });

  it('a malformed OTEL_* is a warning for a client command, which runs untraced', async () => {
    const got = await sb.run(['users', 'list', '--addr', running.grpc!.address, '--json'], {
      env: { OTEL_TRACES_EXPORTER: 'zipkin', MINIAPP_GRPC_TOKEN: running.adminToken },
    });
    expect(got.code).toBe(0);
    expect(got.stderr).toBe("warning: not tracing: OTEL_TRACES_EXPORTER 'zipkin' is not supported; use otlp, console or none\n");
  });

  it('serve names where traces go in its banner, and refuses an endpoint that is no URL', async () => {
    const started = await sb.run(['serve', '--port', '0', '--no-grpc', '--store', 'memory', '--otlp-endpoint', collector.url], {
      shutdown: Promise.resolve('SIGTERM'),
    });
    expect(started.code, started.stderr).toBe(0);
    expect(started.stdout).toContain(`  traces    OTLP http/protobuf to ${collector.url}/v1/traces as service miniapp, sampler parentbased_always_on\n`);
    const off = await sb.run(['serve', '--port', '0', '--no-grpc', '--store', 'memory'], { shutdown: Promise.resolve('SIGTERM') });
    expect(off.stdout).toContain('  traces    off (set OTEL_EXPORTER_OTLP_ENDPOINT or --otlp-endpoint)\n');
    const bad = await sb.run(['serve', '--port', '0', '--no-grpc', '--store', 'memory', '--otlp-endpoint', 'collector:4318']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("error: --otlp-endpoint must be an http:// or https:// URL such as http://127.0.0.1:4318; got 'collector:4318'");
  });
});
