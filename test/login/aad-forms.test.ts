/**
 * The AAD as text (the vendor's AAD_STRING=TOSS) as well as hex (the
 * spec's), through the CLI and the relay: settings accept both, a value
 * that is both reads as hex unless written text:, and a failure that
 * another reading fixes names the setting to use.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { Sandbox, Capture } from '../helpers/cli.js';
import { startSandbox, type RunningSandbox } from '../helpers/partner-sandbox.js';
import { startTestServe } from '../helpers/serve.js';
import { personFor } from '../../src/sandbox/partner/people.js';
import { KEY_BASE64, KEY_HEX } from '../helpers/vectors.js';

const bin = fileURLToPath(new URL('../../bin/miniapp.cjs', import.meta.url));
let textSandbox: RunningSandbox;
let hexLookingTextSandbox: RunningSandbox;
let cli: Sandbox;

beforeAll(async () => {
  // The vendor's AAD: the four bytes of "TOSS".
  textSandbox = await startSandbox({ aad: Buffer.from('TOSS', 'utf8') });
  // A text AAD whose characters happen to be hex digits: the bare value reads as hex, so it must be written text:.
  hexLookingTextSandbox = await startSandbox({ aad: Buffer.from('544f5353', 'utf8') });
  cli = new Sandbox();
});
afterAll(async () => {
  await textSandbox.close();
  await hexLookingTextSandbox.close();
  cli.dispose();
});

async function login(target: RunningSandbox, env: Record<string, string>, userKey: number): Promise<void> {
  const code = target.state.login(userKey).authorizationCode;
  const exchanged = await cli.run(['token', 'exchange', '--code', code, '--referrer', 'sandbox'], { env });
  expect(exchanged.code, exchanged.stderr).toBe(0);
}

describe('decrypt-aad settings', () => {
  it('config set takes TOSS, text:544f5353 and hex:544f5353 (exit 0), and refuses hex: that is not hex (exit 2)', async () => {
    for (const value of ['TOSS', 'text:544f5353', 'hex:544f5353', '544f5353']) {
      const set = await cli.run(['--profile', 'aad', 'config', 'set', 'decrypt-aad', value]);
      expect(set.code, set.stderr).toBe(0);
      expect((await cli.run(['--profile', 'aad', 'config', 'get', 'decrypt-aad', '--reveal'])).stdout).toBe(`${value}\n`);
    }
    const bad = await cli.run(['--profile', 'aad', 'config', 'set', 'decrypt-aad', 'hex:TOSS']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('after "hex:" must be hex digits');
    expect(bad.stderr).not.toContain('console');
  });

  it('doctor says how the AAD is read, without its value', async () => {
    const result = await cli.run(['doctor'], { env: { ...textSandbox.env, MINIAPP_DECRYPT_AAD: 'TOSS' }, now: new Date() });
    const aad = JSON.parse(result.stdout).checks.find((c: { check: string }) => c.check === 'decrypt AAD');
    expect(aad).toEqual({ check: 'decrypt AAD', status: 'ok', detail: '4 bytes, read as text (a bare value that is not hex)' });
  });
});

describe('me and decrypt with a text AAD', () => {
  it('decrypts every field with TOSS, text:TOSS, hex:544f5353 or the bare hex 544f5353, and a Base64 key', async () => {
    const person = personFor(4001);
    for (const aad of ['TOSS', 'text:TOSS', 'hex:544f5353', '544f5353']) {
      const env = { ...textSandbox.env, MINIAPP_DECRYPT_KEY: KEY_BASE64, MINIAPP_DECRYPT_AAD: aad };
      await login(textSandbox, env, 4001);
      const me = await cli.run(['me', '--json'], { env });
      expect(me.code, `${aad}: ${me.stderr}`).toBe(0);
      expect(JSON.parse(me.stdout)).toMatchObject({
        userKey: 4001,
        name: person.name,
        phone: person.phone,
        birthday: person.birthday,
        gender: person.gender,
        nationality: person.nationality,
      });
    }
  });

  it('a text AAD that looks like hex: me and decrypt fail (exit 3) and name `decrypt-aad text:544f5353`; written so, it works', async () => {
    const env = { ...hexLookingTextSandbox.env, MINIAPP_DECRYPT_AAD: '544f5353' };
    await login(hexLookingTextSandbox, env, 4002);
    const me = await cli.run(['me'], { env });
    expect(me.code).toBe(3);
    expect(me.stderr).toContain('the AAD is read as hex, and they verify when the AAD is the bytes of its text');
    expect(me.stderr).toContain('miniapp config set decrypt-aad text:544f5353');

    const raw = await cli.run(['me', '--raw'], { env });
    expect(raw.code, raw.stderr).toBe(0);
    const file = join(cli.root, 'response.json');
    writeFileSync(file, raw.stdout);
    const decrypt = await cli.run(['decrypt', file], { env });
    expect(decrypt.code).toBe(3);
    expect(decrypt.stderr).toContain('miniapp config set decrypt-aad text:544f5353');
    // The same through the launcher, whose quick path serves decrypt.
    const quick = spawnSync(process.execPath, [bin, 'decrypt', file], { env: { PATH: process.env.PATH, ...cli.env, ...env }, encoding: 'utf8' });
    expect(quick.status).toBe(3);
    expect(quick.stderr).toContain('miniapp config set decrypt-aad text:544f5353');

    const fixed = await cli.run(['decrypt', file, '--json'], { env: { ...env, MINIAPP_DECRYPT_AAD: 'text:544f5353' } });
    expect(fixed.code, fixed.stderr).toBe(0);
    expect(JSON.parse(fixed.stdout).name).toBe(personFor(4002).name);
    // And the other way round: the hex of "TOSS" written as text is read back as hex.
    const textEnv = { ...textSandbox.env, MINIAPP_DECRYPT_AAD: 'text:544f5353' };
    await login(textSandbox, textEnv, 4003);
    const reversed = await cli.run(['me'], { env: textEnv });
    expect(reversed.code).toBe(3);
    expect(reversed.stderr).toContain('miniapp config set decrypt-aad hex:544f5353');
  });
});

describe('the relay with a text AAD', () => {
  it('decrypts with TOSS, and names the text: form (never the value) when the AAD verifies read as text', async () => {
    const ok = await startTestServe({
      upstream: { baseUrl: textSandbox.url, pathPrefix: '/api-partner/v1/miniapp/user/oauth2', tls: {} },
      decrypt: { key: KEY_BASE64, aad: 'TOSS' },
    });
    try {
      const { accessToken } = (await (
        await request(`${ok.url}/api/auth/token`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ authorizationCode: textSandbox.state.login(4004).authorizationCode, referrer: 'sandbox' }),
        })
      ).body.json()) as { accessToken: string };
      const me = await request(`${ok.url}/api/auth/me`, { headers: { authorization: `Bearer ${accessToken}` } });
      expect(me.statusCode).toBe(200);
      expect(((await me.body.json()) as { name: string }).name).toBe(personFor(4004).name);
    } finally {
      await ok.close();
    }

    const logs = new Capture();
    const wrong = await startTestServe({
      upstream: { baseUrl: hexLookingTextSandbox.url, pathPrefix: '/api-partner/v1/miniapp/user/oauth2', tls: {} },
      decrypt: { key: KEY_HEX, aad: '544f5353' },
      logger: { level: 'info', stream: logs },
    });
    try {
      const { accessToken } = (await (
        await request(`${wrong.url}/api/auth/token`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ authorizationCode: hexLookingTextSandbox.state.login(4005).authorizationCode, referrer: 'sandbox' }),
        })
      ).body.json()) as { accessToken: string };
      const me = await request(`${wrong.url}/api/auth/me`, { headers: { authorization: `Bearer ${accessToken}` } });
      expect(me.statusCode).toBe(500);
      const body = (await me.body.json()) as { code: string; error: string };
      expect(body.code).toBe('DECRYPT_FAILED');
      expect(body.error).toContain('the AAD is read as hex, and they verify when the AAD is the bytes of its text');
      expect(logs.text).toContain('miniapp config set decrypt-aad text:...');
      expect(`${JSON.stringify(body)}${logs.text}`).not.toContain('544f5353');
    } finally {
      await wrong.close();
    }
  });
});
