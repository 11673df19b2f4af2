/**
 * Mutual TLS: a sandbox with --mtls semantics (client certificate required,
 * signed by its CA) against the real client, with certificates made at test
 * time; and `miniapp doctor` on the same material.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sandbox, plain } from '../helpers/cli.js';
import { makePki, type Pki } from '../helpers/certs.js';
import { startSandbox, type RunningSandbox } from '../helpers/partner-sandbox.js';

let pki: Pki;
let sandbox: RunningSandbox;
let cli: Sandbox;

beforeAll(async () => {
  pki = makePki();
  sandbox = await startSandbox({ tls: { cert: pki.read(pki.serverCert), key: pki.read(pki.serverKey), ca: pki.read(pki.caCert) } });
  cli = new Sandbox();
});
afterAll(async () => {
  await sandbox.close();
  cli.dispose();
  pki.dispose();
});

function env(extra: Record<string, string> = {}) {
  return { ...sandbox.env, MINIAPP_MTLS_CA: pki.caCert, ...extra };
}

async function code(withEnv: Record<string, string>): Promise<string> {
  const login = await cli.run(['sandbox', 'login', '--user-key', '31', '--json'], { env: withEnv });
  expect(login.code, login.stderr).toBe(0);
  return JSON.parse(login.stdout).authorizationCode;
}

describe('mutual TLS', () => {
  const withCert = () => env({ MINIAPP_MTLS_CERT: pki.clientCert, MINIAPP_MTLS_KEY: pki.clientKey });

  it('accepts a client with a certificate signed by its CA (paths)', async () => {
    const result = await cli.run(['token', 'exchange', '--code', await code(withCert()), '--referrer', 'sandbox'], { env: withCert() });
    expect(result.code, result.stderr).toBe(0);
    const me = await cli.run(['me', '--json'], { env: withCert() });
    expect(me.code, me.stderr).toBe(0);
    expect(JSON.parse(me.stdout).userKey).toBe(31);
  });

  it('accepts the certificate and key as PEM text in the environment', async () => {
    const pemEnv = env({ MINIAPP_MTLS_CERT: pki.read(pki.clientCert), MINIAPP_MTLS_KEY: pki.read(pki.clientKey), MINIAPP_MTLS_CA: pki.read(pki.caCert) });
    const result = await cli.run(['token', 'exchange', '--code', await code(withCert()), '--referrer', 'sandbox'], { env: pemEnv });
    expect(result.code, result.stderr).toBe(0);
  });

  it('fails a client without a certificate with exit 5 and a message about the client certificate', async () => {
    const result = await cli.run(['token', 'exchange', '--code', await code(withCert()), '--referrer', 'sandbox'], { env: env() });
    expect(result.code).toBe(5);
    expect(result.stderr).toContain('client certificate');
    expect(result.stderr).toContain('mtls-cert');
  });

  it('fails a client whose certificate another CA signed', async () => {
    const rogue = env({ MINIAPP_MTLS_CERT: pki.rogueCert, MINIAPP_MTLS_KEY: pki.rogueKey });
    const result = await cli.run(['token', 'exchange', '--code', 'x', '--referrer', 'sandbox'], { env: rogue });
    expect(result.code).toBe(5);
    expect(result.stderr).toContain('rejected the client certificate');
  });

  it('fails when the server certificate is not trusted', async () => {
    const result = await cli.run(['token', 'exchange', '--code', 'x', '--referrer', 'sandbox'], {
      env: { ...sandbox.env, MINIAPP_MTLS_CERT: pki.clientCert, MINIAPP_MTLS_KEY: pki.clientKey },
    });
    expect(result.code).toBe(5);
    expect(result.stderr).toMatch(/not trusted|mtls-ca/);
  });

  it('needs both halves of the client pair', async () => {
    const result = await cli.run(['me'], { env: env({ MINIAPP_MTLS_CERT: pki.clientCert }) });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('needs both mtls-cert and mtls-key');
  });
});

describe('miniapp doctor', () => {
  it('passes every check with a matching pair and a reachable upstream', async () => {
    const result = await cli.run(['doctor'], { env: env({ MINIAPP_MTLS_CERT: pki.clientCert, MINIAPP_MTLS_KEY: pki.clientKey }), now: new Date() });
    const report = JSON.parse(result.stdout);
    expect(result.code, result.stderr).toBe(0);
    const status = Object.fromEntries(report.checks.map((c: { check: string; status: string }) => [c.check, c.status]));
    expect(status).toMatchObject({ 'decrypt key': 'ok', 'decrypt AAD': 'ok', 'client certificate': 'warn', 'client key': 'ok', CA: 'ok', 'partner API': 'ok' });
    // the test certificate lives 2 days: doctor warns about the near expiry
    expect(report.checks.find((c: { check: string }) => c.check === 'client certificate').detail).toContain('valid until');
  });

  it('fails when the key does not match the certificate, and on an unreachable upstream without a certificate', async () => {
    const mismatch = await cli.run(['doctor'], { env: env({ MINIAPP_MTLS_CERT: pki.clientCert, MINIAPP_MTLS_KEY: pki.rogueKey }), now: new Date() });
    expect(mismatch.code).toBe(1);
    const report = JSON.parse(mismatch.stdout);
    expect(report.ok).toBe(false);
    expect(report.checks.find((c: { check: string }) => c.check === 'client key')).toMatchObject({
      status: 'fail',
      detail: 'does not match the client certificate',
    });

    const noCert = await cli.run(['doctor'], { env: env(), now: new Date() });
    const partner = JSON.parse(noCert.stdout).checks.find((c: { check: string }) => c.check === 'partner API');
    expect(partner.status).toBe('fail');
    expect(partner.detail).toContain('client certificate');
  });

  it('prints a table on a terminal', async () => {
    const result = await cli.run(['doctor'], { env: env({ MINIAPP_MTLS_CERT: pki.clientCert, MINIAPP_MTLS_KEY: pki.clientKey }), tty: true, now: new Date() });
    expect(plain(result.stdout)).toMatch(/│ check +│ status +│ detail/);
  });

  it("wraps a detail too long for the terminal onto the row's next lines, whole to its end (the time left)", async () => {
    const wide = await cli.run(['doctor', '--json'], { env: env({ MINIAPP_MTLS_CERT: pki.clientCert, MINIAPP_MTLS_KEY: pki.clientKey }), now: new Date() });
    const detail = (JSON.parse(wide.stdout).checks as { check: string; detail: string }[]).find((c) => c.check === 'client certificate')!.detail;
    expect(detail).toMatch(/ left\)$/);
    const result = await cli.run(['doctor', '--no-color'], {
      env: env({ MINIAPP_MTLS_CERT: pki.clientCert, MINIAPP_MTLS_KEY: pki.clientKey }),
      tty: true,
      columns: 60,
      now: new Date(),
    });
    const lines = plain(result.stdout).split('\n').filter(Boolean);
    for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(60);
    const at = lines.findIndex((line) => line.includes('client certificate'));
    const rows = [lines[at]!];
    for (const line of lines.slice(at + 1))
      if (/^│ +│/.test(line)) rows.push(line);
      else break;
    expect(rows.length).toBeGreaterThan(1);
    // Read back as a person reads it: the lines joined by a space (the detail's own runs of spaces aside).
    expect(rows.map((row) => row.split('│')[3]!.trim()).join(' ')).toBe(detail.replace(/ +/g, ' '));
    expect(plain(result.stdout)).not.toContain('…');
  });
});
