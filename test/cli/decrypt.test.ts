import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Sandbox, plain } from '../helpers/cli.js';
import { AAD_HEX, KEY, KEY_BASE64, KEY_HEX, PLAIN_USER, envelope, seal, sealedUser } from '../helpers/vectors.js';

let sb: Sandbox;
beforeEach(() => {
  sb = new Sandbox();
});
afterEach(() => sb.dispose());

const keyEnv = { MINIAPP_DECRYPT_KEY: KEY_HEX, MINIAPP_DECRYPT_AAD: AAD_HEX };
const payload = JSON.stringify(envelope(sealedUser()));

describe('miniapp decrypt', () => {
  it('prints the whole decrypted object with --json', async () => {
    const result = await sb.run(['decrypt', '--json'], { env: keyEnv, stdin: payload });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ ...PLAIN_USER, di: null });
  });

  it('accepts the success object and a bare UserInfo from a file argument', async () => {
    const file = join(sb.root, 'me.json');
    for (const shape of [{ success: sealedUser() }, sealedUser()]) {
      writeFileSync(file, JSON.stringify(shape));
      const result = await sb.run(['decrypt', file, '--json'], { env: keyEnv });
      expect(result.code).toBe(0);
      expect(JSON.parse(result.stdout).name).toBe(PLAIN_USER.name);
    }
  });

  it('prints a field/value table on a TTY', async () => {
    const file = join(sb.root, 'me.json');
    writeFileSync(file, payload);
    const result = await sb.run(['decrypt', file], { env: keyEnv, tty: true });
    expect(result.code).toBe(0);
    const text = plain(result.stdout);
    expect(text).toMatch(/│ field +│ value +│/);
    expect(text).toMatch(/│ name +│ 김민지 +│/);
    expect(text).toMatch(/│ agreedTerms +│ terms_service, terms_privacy +│/);
  });

  it('prints field<TAB>value lines when piped', async () => {
    const result = await sb.run(['decrypt'], { env: keyEnv, stdin: payload });
    expect(result.stdout.split('\n')).toContain('phone\t01012345678');
    expect(result.stdout.split('\n')).toContain('di\t');
  });

  it('takes the key and AAD from the profile, and a Base64 key', async () => {
    expect((await sb.run(['config', 'set', 'decrypt-key', KEY_BASE64])).code).toBe(0);
    expect((await sb.run(['config', 'set', 'decrypt-aad', AAD_HEX])).code).toBe(0);
    const result = await sb.run(['decrypt', '--json'], { stdin: payload });
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout).email).toBe(PLAIN_USER.email);
  });

  it('lets --key and --aad beat the environment', async () => {
    const result = await sb.run(['decrypt', '--json', '--key', KEY_HEX, '--aad', AAD_HEX], {
      env: { MINIAPP_DECRYPT_KEY: 'ff'.repeat(32), MINIAPP_DECRYPT_AAD: 'ffff' },
      stdin: payload,
    });
    expect(result.code).toBe(0);
  });

  it('exits 3 with a wrong AAD, naming every failed field and no key material', async () => {
    const result = await sb.run(['decrypt', '--json'], { env: { ...keyEnv, MINIAPP_DECRYPT_AAD: 'abcdef' }, stdin: payload });
    expect(result.code).toBe(3);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('could not decrypt 7 of 7 encrypted fields: name, phone, birthday, ci, gender, nationality, email');
    expect(result.stderr).toMatch(/wrong AAD/);
    for (const secret of [KEY_HEX, KEY_BASE64, AAD_HEX, 'abcdef']) expect(result.stderr).not.toContain(secret);
  });

  it('exits 3 with a wrong key', async () => {
    const result = await sb.run(['decrypt'], { env: { ...keyEnv, MINIAPP_DECRYPT_KEY: '11'.repeat(32) }, stdin: payload });
    expect(result.code).toBe(3);
  });

  it('exits 2 with a configuration error for a 31-byte key', async () => {
    const short = KEY_HEX.slice(0, 62);
    const result = await sb.run(['decrypt'], { env: { ...keyEnv, MINIAPP_DECRYPT_KEY: short }, stdin: payload });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('decrypt-key (from MINIAPP_DECRYPT_KEY)');
    expect(result.stderr).toContain('31 bytes');
    expect(result.stderr).not.toContain(short);
    expect(result.stderr).not.toContain('MAC');
  });

  it('names the --key flag when the flag is what is wrong', async () => {
    const result = await sb.run(['decrypt', '--key', 'abcd'], { env: keyEnv, stdin: payload });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--key: the decrypt key does not decode to 32 bytes');
  });

  it('says how to set a missing key', async () => {
    const result = await sb.run(['decrypt'], { stdin: payload });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('decrypt-key is not set in profile "default"');
    expect(result.stderr).toContain('MINIAPP_DECRYPT_KEY');
  });

  it('decrypts one value with --value', async () => {
    const result = await sb.run(['decrypt', '--value', seal('01099998888')], { env: keyEnv });
    expect(result).toMatchObject({ code: 0, stdout: '01099998888\n' });
    const json = await sb.run(['decrypt', '--json', '--value', seal('x')], { env: keyEnv });
    expect(JSON.parse(json.stdout)).toEqual({ value: 'x' });
    const bad = await sb.run(['decrypt', '--value', seal('x', KEY, Buffer.from('z'))], { env: keyEnv });
    expect(bad.code).toBe(3);
  });

  it('is a usage error without input on a terminal, with both --value and a file, or with bad JSON', async () => {
    const none = await sb.run(['decrypt'], { env: keyEnv });
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('no login-me response');
    expect(none.stderr).toContain("Run 'miniapp decrypt --help' for usage.");

    const both = await sb.run(['decrypt', 'file.json', '--value', 'abc'], { env: keyEnv });
    expect(both.code).toBe(2);

    const broken = await sb.run(['decrypt'], { env: keyEnv, stdin: '{"resultType": "SUCC' });
    expect(broken.code).toBe(2);
    expect(broken.stderr).toContain('not valid JSON: unterminated string at line 1, column 21');

    // The wrong file piped in (a token, say) is pointed at, never quoted back.
    for (const [stdin, where] of [
      ['sandbox-graph-token-0123456789\n', 'unexpected character at line 1, column 1'],
      ['{"resultType": "SUCCESS",\n "success": at_secret0123456789}', 'unexpected character at line 2, column 13'],
      ['{"a": 1,}', 'expected double-quoted property name at line 1, column 9'],
    ] as const) {
      for (const json of [[], ['--json']]) {
        const result = await sb.run(['decrypt', ...json], { env: keyEnv, stdin });
        expect(result.code).toBe(2);
        expect(result.stdout + result.stderr).toContain(`not valid JSON: ${where}`);
        expect(result.stdout + result.stderr).not.toMatch(/graph-token|at_secret|0123456789/);
      }
    }

    const missing = await sb.run(['decrypt', join(sb.root, 'nope.json')], { env: keyEnv });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no such file');
  });

  it('reports a FAIL envelope as a failure, not a decryption problem', async () => {
    const fail = JSON.stringify({ resultType: 'FAIL', error: { errorCode: 'INTERNAL_ERROR', reason: 'boom' } });
    const result = await sb.run(['decrypt'], { env: keyEnv, stdin: fail });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('INTERNAL_ERROR: boom');
  });

  it('prints a stack trace only with --debug', async () => {
    const bad = { ...keyEnv, MINIAPP_DECRYPT_AAD: 'abcdef' };
    expect((await sb.run(['decrypt'], { env: bad, stdin: payload })).stderr).not.toMatch(/\n\s+at /);
    expect((await sb.run(['decrypt', '--debug'], { env: bad, stdin: payload })).stderr).toMatch(/DecryptError.*\n\s+at /s);
  });

  it('keeps key material out of every output, even with a decryption failure on a TTY', async () => {
    const result = await sb.run(['decrypt'], { env: { ...keyEnv, MINIAPP_DECRYPT_AAD: '00' }, stdin: payload, tty: true });
    expect(result.code).toBe(3);
    expect(result.stdout + result.stderr).not.toContain(KEY_HEX);
    expect(KEY).toHaveLength(32);
  });
});
