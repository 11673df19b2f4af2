/**
 * Issue 11's defects in config, profiles, exit codes, decrypt input, the
 * sandbox and doctor, each driven through the CLI as a user meets it.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Sandbox, plain } from '../helpers/cli.js';
import { makePki, type Pki } from '../helpers/certs.js';
import { startSandbox } from '../helpers/partner-sandbox.js';
import { KEY_HEX } from '../helpers/vectors.js';

let sb: Sandbox;
beforeEach(() => {
  sb = new Sandbox();
});
afterEach(() => sb.dispose());

describe('settings that name files', () => {
  it('are stored as absolute paths, so that doctor finds them from any directory', async () => {
    const pki: Pki = makePki();
    const previous = process.cwd();
    try {
      process.chdir(pki.dir);
      const set = await sb.run(['config', 'set', 'mtls-key', 'client.key']);
      expect(set.code, set.stderr).toBe(0);
      expect((await sb.run(['config', 'set', 'mtls-cert', './client.crt'])).code).toBe(0);
      process.chdir('/');
      const stored = await sb.run(['config', 'get', 'mtls-key', '--json']);
      expect(JSON.parse(stored.stdout).value).toBe(join(pki.dir, 'client.key'));
      const doctor = await sb.run(['doctor', '--json']);
      const checks = JSON.parse(doctor.stdout).checks as { check: string; status: string; detail: string }[];
      expect(checks.find((c) => c.check === 'client key')).toMatchObject({ status: 'ok' });
    } finally {
      process.chdir(previous);
      pki.dispose();
    }
  });

  it('name where a bad value came from once, not twice', async () => {
    const result = await sb.run(['config', 'list', '--json'], { env: { MINIAPP_MTLS_KEY: '/no/such.key' } });
    const row = JSON.parse(result.stdout).settings.find((s: { key: string }) => s.key === 'mtls-key');
    const doctor = await sb.run(['doctor'], { env: { MINIAPP_MTLS_KEY: '/no/such.key' } });
    expect(doctor.stdout + doctor.stderr).toContain('mtls-key (from MINIAPP_MTLS_KEY): no file at /no/such.key');
    expect(doctor.stdout + doctor.stderr).not.toContain('mtls-key (from MINIAPP_MTLS_KEY): mtls-key');
    expect(row).toBeDefined();
  });
});

describe('profiles', () => {
  it('warns on stderr when the profile in use was never written, and lists the profiles', async () => {
    await sb.run(['config', 'set', 'base-url', 'https://a.example']);
    await sb.run(['--profile', 'prod', 'config', 'set', 'base-url', 'https://prod.example']);
    const typo = await sb.run(['config', 'list'], { env: { MINIAPP_PROFILE: 'nope' } });
    expect(typo.code).toBe(0);
    expect(typo.stderr).toContain('warning: profile "nope" has no settings yet (profiles: default, prod)');
    expect((await sb.run(['--profile', 'prod', 'config', 'list'])).stderr).toBe('');
    const profiles = await sb.run(['config', 'profiles', '--json']);
    expect(JSON.parse(profiles.stdout)).toEqual([
      { name: 'default', settings: 1, active: true },
      { name: 'prod', settings: 1, active: false },
    ]);
    expect((await sb.run(['--profile', 'prod', 'config', 'profiles'])).stdout).toBe('default\t1\t\nprod\t1\tyes\n');
  });
});

describe('one exit code rule for a setting that is not set', () => {
  // A credential is exit 4, any other setting exit 2, whichever command needs it.
  const cases: [string[], number, string][] = [
    [['config', 'get', 'relay-url'], 2, 'relay-url is not set'],
    [['config', 'get', 'graph-token'], 4, 'graph-token is not set'],
    [['config', 'get', 'grpc-token'], 4, 'grpc-token is not set'],
    [['me'], 2, 'decrypt-key is not set'],
    [['token', 'exchange', '--code', 'c'], 2, 'base-url is not set'],
    [['token', 'refresh'], 2, 'base-url is not set'],
    [['logout'], 2, 'base-url is not set'],
    [['decrypt', '--value', 'AAAA'], 2, 'decrypt-key is not set'],
    [['insights', 'accounts'], 4, 'graph-token is not set'],
    [['insights', 'media'], 4, 'graph-token is not set'],
    [['users', 'get', '1', '--addr', '127.0.0.1:1'], 4, 'no token for the user service'],
    [['monitor', 'logs', '--addr', '127.0.0.1:1'], 4, 'no token for the monitoring service'],
  ];
  for (const [args, code, message] of cases) {
    it(`${args.join(' ')}: exit ${code}`, async () => {
      const result = await sb.run(args);
      expect(result.code, result.stderr).toBe(code);
      expect(result.stderr).toContain(message);
    });
  }

  it('with the base URL and key set, me without a token is a missing credential (4)', async () => {
    const result = await sb.run(['me'], { env: { MINIAPP_BASE_URL: 'http://127.0.0.1:1', MINIAPP_DECRYPT_KEY: KEY_HEX, MINIAPP_DECRYPT_AAD: '00' } });
    expect(result.code, result.stderr).toBe(4);
  });

  it('is written in --help and in the README', async () => {
    const help = await sb.run(['--help']);
    expect(help.stdout).toContain('exit 4 when it is a credential');
    const { readFileSync } = await import('node:fs');
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    expect(readme).toMatch(/not set.*exit 4.*credential|credential.*exit 4/s);
  });
});

describe('secrets into scripts', () => {
  it('are never a masked value: piped without --reveal is exit 2 saying so', async () => {
    await sb.run(['config', 'set', 'decrypt-key', KEY_HEX]);
    const piped = await sb.run(['config', 'get', 'decrypt-key']);
    expect(piped.code).toBe(2);
    expect(piped.stdout).toBe('');
    expect(piped.stderr).toContain('--reveal');
    expect((await sb.run(['config', 'get', 'decrypt-key', '--reveal'])).stdout).toBe(`${KEY_HEX}\n`);
    expect((await sb.run(['config', 'get', 'decrypt-key'], { tty: true })).stdout).toBe('603d...dff4\n');
  });
});

describe('config set -', () => {
  it('on a terminal without a way to ask (CI) says how to pass the value, not "a FILE argument"', async () => {
    const result = await sb.run(['config', 'set', 'decrypt-key', '-'], { stdinTTY: true, tty: true, env: { CI: 'true' } });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('miniapp config set decrypt-key - < file');
    expect(result.stderr).not.toContain('FILE argument');
  });
});

describe('decrypt --value', () => {
  it('calls malformed input bad input (exit 2), not a decryption failure', async () => {
    const env = { MINIAPP_DECRYPT_KEY: KEY_HEX, MINIAPP_DECRYPT_AAD: '00112233' };
    const notBase64 = await sb.run(['decrypt', '--value', 'notbase64!!'], { env });
    expect(notBase64.code).toBe(2);
    expect(notBase64.stderr).toContain('--value is not Base64');
    const short = await sb.run(['decrypt', '--value', 'AAAA'], { env });
    expect(short.code).toBe(2);
    expect(short.stderr).toContain('too short');
  });
});

describe('the sandbox', () => {
  it('prints config lines for the profile it was started with', async () => {
    let stop!: (signal: string) => void;
    const shutdown = new Promise<string>((resolve) => (stop = resolve));
    const run = sb.run(['--profile', 'prod', 'sandbox', '--port', '0'], { shutdown });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    stop('SIGINT');
    const result = await run;
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stdout.split('\n').filter((line) => line.includes('config set'));
    expect(lines.length).toBe(3);
    for (const line of lines) expect(line).toMatch(/miniapp --profile prod config set (base-url|decrypt-key|decrypt-aad) /);
  });

  it('login against an mTLS sandbox without a client certificate explains it as doctor does', async () => {
    const pki = makePki();
    const sandbox = await startSandbox({ tls: { cert: pki.read(pki.serverCert), key: pki.read(pki.serverKey), ca: pki.read(pki.caCert) } });
    try {
      const result = await sb.run(['sandbox', 'login', '--user-key', '1'], { env: { ...sandbox.env, MINIAPP_MTLS_CA: pki.caCert } });
      expect(result.code).toBe(5);
      expect(result.stderr).toContain('client certificate');
      expect(result.stderr).not.toContain('UND_ERR_SOCKET');
    } finally {
      await sandbox.close();
      pki.dispose();
    }
  });
});

describe('doctor on plain HTTP', () => {
  it('does not claim TLS works for an http:// partner API that is not local', async () => {
    const sandbox = await startSandbox();
    try {
      const local = await sb.run(['doctor', '--json'], { env: sandbox.env });
      const row = JSON.parse(local.stdout).checks.find((c: { check: string }) => c.check === 'partner API');
      expect(row.detail).toContain('over plain HTTP');
      expect(row.detail).not.toContain('TLS and routing work');
    } finally {
      await sandbox.close();
    }
  });
});

describe('serve --data-dir', () => {
  it('is a configuration error (exit 2) naming the path when it cannot be a directory', async () => {
    const file = join(sb.root, 'a-file');
    writeFileSync(file, 'x');
    for (const [dir, message] of [
      [file, `the data dir ${file} is not a directory`],
      [join(file, 'sub'), `${file} is not a directory`],
      ['/proc/miniapp-nope', 'the data dir /proc/miniapp-nope cannot be created'],
    ] as const) {
      const result = await sb.run(['serve', '--data-dir', dir, '--port', '0', '--grpc-port', '0']);
      expect(result.code, dir).toBe(2);
      expect(result.stderr).toContain(message);
      expect(result.stderr).not.toContain('this is a bug');
    }
    mkdirSync(join(sb.root, 'ok'));
  });
});

describe('serve banner', () => {
  it('says which limits are in force, and that 0 turns them off', async () => {
    const cases: [string[], string[]][] = [
      [
        [],
        [
          '  limits    logins: 5 wrong passwords per account and address, 50 per address, then locked for 1 s doubling up to 15 min (--login-attempts)',
          '            relay codes and refresh tokens refused: 50 per address, then the same back-off',
          '            requests: 200 per second per token or address (bursts of 400), per instance (--rate-limit, --rate-burst)',
          '            sign-ups: 10 per address (IPv6: per /64) in an hour from its first, shared by every instance (--signup-limit)',
        ],
      ],
      [
        ['--login-attempts', '8', '--rate-limit', '50', '--rate-burst', '60', '--signup-limit', '3/hour'],
        [
          '  limits    logins: 8 wrong passwords per account and address, 80 per address, then locked for 1 s doubling up to 15 min (--login-attempts)',
          '            relay codes and refresh tokens refused: 80 per address, then the same back-off',
          '            requests: 50 per second per token or address (bursts of 60), per instance (--rate-limit, --rate-burst)',
          '            sign-ups: 3 per address (IPv6: per /64) in an hour from its first, shared by every instance (--signup-limit)',
        ],
      ],
      [
        ['--login-attempts', '0', '--rate-limit', '0', '--signup-limit', '0'],
        ['  limits    logins: off', '            relay codes and refresh tokens refused: off', '            requests: off', '            sign-ups: off'],
      ],
    ];
    for (const [args, lines] of cases) {
      const result = await sb.run(['serve', '--port', '0', '--no-grpc', '--store', 'memory', ...args], { shutdown: Promise.resolve('SIGTERM') });
      expect(result.code, result.stderr).toBe(0);
      expect(plain(result.stdout), args.join(' ')).toContain(lines.join('\n'));
    }
  });
});

describe('serve logs', () => {
  it('are one pretty line per request on a terminal, JSON when piped, and come after the banner', async () => {
    for (const [tty, format] of [
      [true, undefined],
      [false, undefined],
      [false, 'pretty'],
    ] as const) {
      let stop!: (signal: string) => void;
      const shutdown = new Promise<string>((resolve) => (stop = resolve));
      const run = sb.run(['serve', '--port', '0', '--grpc-port', '0', ...(format ? ['--log-format', format] : [])], { tty, shutdown });
      await new Promise((resolve) => setTimeout(resolve, 2000));
      stop('SIGINT');
      const result = await run;
      expect(result.code, result.stderr).toBe(0);
      const stderr = plain(result.stderr);
      if (tty || format === 'pretty') expect(stderr).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO {2}serve {4}Server listening at http:\/\/127\.0\.0\.1:\d+$/m);
      else expect(stderr).toMatch(/^\{"level":30,.*"msg":"Server listening at http/m);
    }
  });
});

describe('sandbox login next to a running serve', () => {
  it('reaches the sandbox serve started, without --url, and forgets it when serve stops', async () => {
    let stop!: (signal: string) => void;
    const shutdown = new Promise<string>((resolve) => (stop = resolve));
    const serving = sb.run(['serve', '--port', '0', '--grpc-port', '0'], { shutdown });
    let login = await sb.run(['sandbox', 'login', '--user-key', '1001', '--json']);
    for (let i = 0; i < 100 && login.code !== 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      login = await sb.run(['sandbox', 'login', '--user-key', '1001', '--json']);
    }
    expect(login.code, login.stderr).toBe(0);
    expect(JSON.parse(login.stdout)).toMatchObject({ authorizationCode: expect.stringMatching(/^code_/), referrer: 'sandbox' });
    stop('SIGINT');
    expect((await serving).code).toBe(0);
    const { readServeRuntime } = await import('../../src/cli/connect/serve-runtime.js');
    expect(readServeRuntime(sb.env.MINIAPP_DATA_DIR!)).toBeUndefined();
  });
});

describe('usage errors, for every group', () => {
  it('are one error line and where the usage is, never the whole help', async () => {
    const cases: [string[], string, string][] = [
      [['users', 'get', 'abc'], 'ID must be a positive whole number; got "abc"', 'miniapp users get'],
      [['serve', '--port', 'abc'], '--port must be a number from 0 to 65535; got "abc"', 'miniapp serve'],
      [['serve', '--rate-limit', '1.5'], '--rate-limit must be a whole number of requests per second from 0 (no limit) to 1000000; got "1.5"', 'miniapp serve'],
      [
        ['serve', '--rate-limit', '2000000'],
        '--rate-limit must be a whole number of requests per second from 0 (no limit) to 1000000; got "2000000"',
        'miniapp serve',
      ],
      [['serve', '--rate-burst', '0'], '--rate-burst must be a whole number of requests from 1 to 2000000; got "0"', 'miniapp serve'],
      [['serve', '--rate-limit', '0', '--rate-burst', '10'], '--rate-burst needs a --rate-limit above 0', 'miniapp serve'],
      [['serve', '--login-attempts', '-1'], '--login-attempts must be a whole number from 0 (the limits off) to 999999; got "-1"', 'miniapp serve'],
      [
        ['serve', '--signup-limit', '10/day'],
        '--signup-limit must be a whole number of sign-ups per address per hour (N or N/hour) from 0 (no limit) to 999999; got "10/day"',
        'miniapp serve',
      ],
      [['serv'], "unknown command 'serv' (did you mean 'serve'?)", 'miniapp'],
      [['sandbox', 'logn'], "unknown command 'logn' for 'miniapp sandbox' (did you mean 'login'?)", 'miniapp sandbox'],
      [['webhooks', 'lsit'], "unknown command 'lsit' (did you mean 'list'?)", 'miniapp webhooks'],
      [['insights', 'media', '--format', 'xml'], "argument 'xml' is invalid", 'miniapp insights media'],
      [['monitor', 'logs', '--tail', '-3'], '--tail must be a whole number of at least 0', 'miniapp monitor logs'],
      [['config', 'get'], "missing required argument 'key'", 'miniapp config get'],
      [['token', 'exchange'], "required option '--code <code>' not specified", 'miniapp token exchange'],
    ];
    for (const [args, message, usage] of cases) {
      const result = await sb.run(args);
      expect(result.code, args.join(' ')).toBe(2);
      const lines = result.stderr.trimEnd().split('\n');
      expect(lines[0], args.join(' ')).toContain(message);
      expect(lines.at(-1)).toBe(`Run '${usage} --help' for usage.`);
      expect(lines.length, result.stderr).toBeLessThanOrEqual(3);
      expect(result.stderr).not.toContain('Usage:');
    }
  });

  it('help A B shows the help of A B, not of A', async () => {
    const help = await sb.run(['help', 'users', 'create']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: miniapp users create [options]');
    expect((await sb.run(['help', 'sandbox', 'login'])).stdout).toContain('Usage: miniapp sandbox login');
  });
});

describe('config set - on a terminal', () => {
  it('asks for the value without echo and stores what was typed', async () => {
    const { runLive, waitFor } = await import('../users/cli/harness.js');
    const run = runLive(sb, ['config', 'set', 'decrypt-key', '-'], {}, { terminal: true });
    await waitFor(() => plain(run.stderr.text).includes('decrypt-key:'), 'the prompt');
    run.stdin.write(`${KEY_HEX}\r`);
    expect(await run.done, run.stderr.text).toBe(0);
    expect(run.stderr.text).not.toContain(KEY_HEX);
    expect((await sb.run(['config', 'get', 'decrypt-key', '--reveal'])).stdout).toBe(`${KEY_HEX}\n`);
  });
});
