/**
 * Issue 42's second round of a newcomer's defects in the CLI, each driven
 * through the CLI as a user meets it: in-process (test/helpers/cli.ts), or
 * the built launcher as a child process where the process itself matters.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox } from '../helpers/cli.js';
import { launch } from '../helpers/launcher.js';
import { startServeProcess, type ServeProcess } from '../helpers/chaos.js';
import { createTestDatabase } from '../helpers/postgres.js';

let sb: Sandbox;
beforeEach(() => {
  sb = new Sandbox();
});
afterEach(() => sb.dispose());

describe('counts in words', () => {
  it('say "1 byte", not "1 bytes", of an AAD and of a key', async () => {
    const doctor = await sb.run(['doctor', '--json'], { env: { MINIAPP_DECRYPT_AAD: 'text:A' } });
    const aad = (JSON.parse(doctor.stdout).checks as { check: string; detail: string }[]).find((c) => c.check === 'decrypt AAD')!;
    expect(aad.detail).toBe('1 byte, read as text (written text:)');
    const key = await sb.run(['config', 'set', 'decrypt-key', 'ab']);
    expect(key.code).toBe(2);
    expect(key.stderr).toContain('it is 2 hex characters, which is 1 byte\n');
    const two = await sb.run(['doctor', '--json'], { env: { MINIAPP_DECRYPT_AAD: 'text:AB' } });
    expect(JSON.parse(two.stdout).checks.find((c: { check: string }) => c.check === 'decrypt AAD').detail).toBe('2 bytes, read as text (written text:)');
  });
});

describe('the version as JSON', () => {
  it('is the same pretty JSON from `--json --version` as from `version --json`, in process and through the launcher', async () => {
    const command = await sb.run(['version', '--json']);
    expect(command.code).toBe(0);
    expect(command.stdout).toBe(`${JSON.stringify({ version: '9.9.9-test', node: process.versions.node }, null, 2)}\n`);
    for (const argv of [
      ['--json', '--version'],
      ['--version', '--json'],
      ['--json', '-V'],
    ]) {
      const flag = await sb.run(argv);
      expect(flag.code, argv.join(' ')).toBe(0);
      expect(flag.stdout, argv.join(' ')).toBe(command.stdout);
    }
    // The launcher answers --version on its quick path: the same text there.
    const quick = launch(sb.root, ['--json', '--version']);
    const full = launch(sb.root, ['version', '--json']);
    expect(quick.code).toBe(0);
    expect(full.code).toBe(0);
    expect(quick.stdout).toBe(full.stdout);
    expect(quick.stdout).toMatch(/^\{\n {2}"version": "[^"]+",\n {2}"node": "[^"]+"\n\}\n$/);
  });
});

describe('--json keeps stderr one JSON object', () => {
  it('carries the warnings of a failed command in its error, and writes them after a command that answered', async () => {
    const failed = await sb.run(['--json', '--profile', 'nope', 'me']);
    expect(failed.code).toBe(2);
    const error = JSON.parse(failed.stderr) as { error: { code: string; warnings?: string[] } };
    expect(error.error.code).toBe('CONFIG');
    expect(error.error.warnings).toEqual(['profile "nope" has no settings yet; `miniapp config profiles` lists them']);
    // Without --json, the warning is a line of its own before the error, as before.
    const text = await sb.run(['--profile', 'nope', 'me']);
    expect(text.stderr.split('\n')[0]).toBe('warning: profile "nope" has no settings yet; `miniapp config profiles` lists them');
    // A command that answers: its data on stdout, the warning on stderr all the same.
    const answered = await sb.run(['--json', '--profile', 'nope', 'config', 'list']);
    expect(answered.code).toBe(0);
    expect(JSON.parse(answered.stdout)).toMatchObject({ profile: 'nope' });
    expect(answered.stderr).toBe('warning: profile "nope" has no settings yet; `miniapp config profiles` lists them\n');
  });
});

describe('a config dir that cannot be used', () => {
  it('is exit 2 naming the directory: a file on its path (ENOTDIR), to write and to read', async () => {
    const file = join(sb.root, 'a-file');
    writeFileSync(file, 'x');
    for (const [dir, message] of [
      [join(file, 'config'), `the config dir ${join(file, 'config')} cannot be created: ${file} is not a directory`],
      [file, `the config dir ${file} is not a directory`],
    ] as const) {
      for (const argv of [['config', 'set', 'base-url', 'https://a.example'], ['me'], ['config', 'get', 'base-url']]) {
        const result = await sb.run(argv, { env: { MINIAPP_CONFIG_DIR: dir } });
        expect(result.code, `${argv.join(' ')} in ${dir}: ${result.stderr}`).toBe(2);
        expect(result.stderr).toContain(`error: ${message}\n`);
        expect(result.stderr).toContain('choose another config dir with MINIAPP_CONFIG_DIR');
        expect(result.stderr).not.toContain('this is a bug');
      }
    }
  });

  it('says a failed write is a write (not "cannot read"), exit 2, naming the directory: a read-only one', async () => {
    // sysfs takes no new file, whoever asks (root included): a read-only directory for this test.
    const result = await sb.run(['config', 'set', 'base-url', 'https://a.example'], { env: { MINIAPP_CONFIG_DIR: '/sys' } });
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toMatch(/^error: cannot write the config file \/sys\/config\.json: E[A-Z]+ \(the config dir is \/sys\)\n/);
    expect(result.stderr).not.toContain('cannot read');
    const json = await sb.run(['--json', 'config', 'set', 'base-url', 'https://a.example'], { env: { MINIAPP_CONFIG_DIR: '/sys' } });
    expect(JSON.parse(json.stderr)).toMatchObject({ error: { code: 'CONFIG', exitCode: 2 } });
  });
});

describe('a running serve: its ports and its data dir', () => {
  let home: string;
  let running: ServeProcess;
  let taken: Server;
  let takenPort: number;

  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), 'miniapp-ports-'));
    running = await startServeProcess({ home });
    taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    takenPort = (taken.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => taken?.close(resolve));
    await running?.stop();
    running?.dispose();
    rmSync(home, { recursive: true, force: true });
  });

  it("exits 2 saying which port is in use and what to do, for HTTP and for gRPC (not grpc-js's words)", async () => {
    const http = await sb.run(['serve', '--port', String(takenPort), '--grpc-port', '0', '--store', 'memory']);
    expect(http.code).toBe(2);
    expect(http.stderr).toBe(
      `error: port ${takenPort} on 127.0.0.1 is already in use\nstop what listens there, or pick another with --port (0 picks a free one)\n`,
    );
    const grpc = await sb.run(['serve', '--port', '0', '--grpc-port', String(takenPort), '--store', 'memory']);
    expect(grpc.code).toBe(2);
    expect(grpc.stderr).toBe(
      `error: gRPC port ${takenPort} on 127.0.0.1 is already in use\nstop what listens there, or pick another with --grpc-port (0 picks a free one); --no-grpc serves HTTP alone\n`,
    );
    expect(grpc.stderr).not.toContain('No address added');
    const json = await sb.run(['serve', '--json', '--port', '0', '--grpc-port', String(takenPort), '--store', 'memory']);
    expect(JSON.parse(json.stderr)).toMatchObject({ error: { code: 'PORT_IN_USE', exitCode: 2 } });
  });

  it('is not copied from by db copy unless --while-running says so: what it writes after would be lost', { timeout: 60_000 }, async () => {
    const target = await createTestDatabase();
    try {
      const dataDir = join(home, 'data');
      const refused = launch(home, ['db', 'copy', '--from', dataDir, '--to', target.url]);
      expect(refused.code, refused.stderr).toBe(1);
      expect(refused.stderr).toContain(
        `error: miniapp serve (pid ${running.child.pid}, ${running.info.url}) is running on ${dataDir}: what it writes after the copy would not be in postgres://`,
      );
      expect(refused.stderr).toContain('nothing was copied\nstop it first (Ctrl-C, or SIGTERM to drain), then copy; or pass --while-running');
      expect(refused.stderr).not.toContain('miniapp-tests');
      const json = launch(home, ['db', 'copy', '--from', dataDir, '--to', target.url, '--json']);
      expect(JSON.parse(json.stderr)).toMatchObject({ error: { code: 'SERVE_RUNNING', exitCode: 1 } });
      // Nothing was written: the target has no schema yet.
      const status = launch(home, ['db', 'status', '--database', target.url, '--json']);
      expect(JSON.parse(status.stdout).migrations.every((m: { applied: boolean }) => !m.applied)).toBe(true);
      const copied = launch(home, ['db', 'copy', '--from', dataDir, '--to', target.url, '--while-running']);
      expect(copied.code, copied.stderr).toBe(0);
      expect(copied.stderr).toContain(
        `warning: miniapp serve (pid ${running.child.pid}) is running on ${dataDir}: copying what it holds now; what it writes after is not copied`,
      );
    } finally {
      await target.drop();
    }
  });

  it('names the miniapp serve that holds the port, when it is the one of the same data dir', () => {
    const grpcPort = running.info.grpc.address.split(':').pop()!;
    const second = launch(home, ['serve', '--port', '0', '--grpc-port', grpcPort]);
    expect(second.code).toBe(2);
    expect(second.stderr).toContain(
      `error: gRPC port ${grpcPort} on 127.0.0.1 is already in use by miniapp serve (pid ${running.child.pid}, data dir ${join(home, 'data')})\n`,
    );
    const httpPort = new URL(running.info.url).port;
    const third = launch(home, ['serve', '--port', httpPort, '--grpc-port', '0']);
    expect(third.code).toBe(2);
    expect(third.stderr).toContain(`error: port ${httpPort} on 127.0.0.1 is already in use by miniapp serve (pid ${running.child.pid}`);
  });
});

describe('serve on a fresh machine, stopped by SIGTERM', () => {
  it('drains (one signal is one signal) after saving its profile, so that a rolling restart loses nothing', { timeout: 60_000 }, async () => {
    const home = mkdtempSync(join(tmpdir(), 'miniapp-fresh-'));
    const running = await startServeProcess({ home, extraArgs: ['--drain', '2s'] });
    try {
      // It saved its gRPC address and admin token in the profile: it wrote the config file.
      expect(readFileSync(join(home, 'config', 'config.json'), 'utf8')).toContain('grpc-token');
      running.child.kill('SIGTERM');
      // Draining: out of the balancer (503), still answering, for the 2 s asked.
      let status = 0;
      for (let i = 0; i < 100 && status !== 503; i++) {
        status = await fetch(`${running.info.url}/health/ready`).then(
          (response) => response.status,
          () => 0,
        );
        if (status !== 503) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(status, running.stderr()).toBe(503);
      expect((await running.exited).code).toBe(0);
      expect(running.stderr()).toContain('SIGTERM: draining for 2s');
      expect(running.stderr()).not.toContain('second signal: ');
    } finally {
      running.dispose();
      rmSync(home, { recursive: true, force: true });
    }
  });
});
