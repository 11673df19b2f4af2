import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { decryptField, diagnoseTagMismatch, encryptField, FieldDecryptionError } from '../../src/login/field-cipher.js';
import { decryptionError, decryptUserInfo, encryptUserInfo, unwrapUserInfo } from '../../src/login/user-info.js';
import { parseKey, parseAad } from '../../src/login/key-material.js';
import { DecryptError, UsageError, MiniappError } from '../../src/errors.js';
import { AAD, AAD_HEX, KEY, KEY_BASE64, KEY_HEX, PLAIN_USER, seal, sealedUser } from '../helpers/vectors.js';

function reasonOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (error instanceof FieldDecryptionError) return error.reason;
    throw error;
  }
  throw new Error('expected a FieldDecryptionError');
}

describe('decryptField', () => {
  it('decrypts a value sealed independently with node:crypto', () => {
    expect(decryptField(seal('김민지'), KEY, AAD)).toBe('김민지');
  });

  it('round-trips with encryptField, which uses a fresh IV each time', () => {
    const a = encryptField('01012345678', KEY, AAD);
    const b = encryptField('01012345678', KEY, AAD);
    expect(a).not.toBe(b);
    expect(decryptField(a, KEY, AAD)).toBe('01012345678');
    // IV(12) + 11 bytes + tag(16)
    expect(Buffer.from(a, 'base64')).toHaveLength(12 + 11 + 16);
  });

  it('fails the tag check on a tampered tag', () => {
    const bytes = Buffer.from(seal('FEMALE'), 'base64');
    bytes[bytes.length - 1]! ^= 0x01;
    expect(reasonOf(() => decryptField(bytes.toString('base64'), KEY, AAD))).toBe('tag-mismatch');
  });

  it('fails the tag check on a tampered ciphertext', () => {
    const bytes = Buffer.from(seal('FEMALE'), 'base64');
    bytes[13]! ^= 0x80;
    expect(reasonOf(() => decryptField(bytes.toString('base64'), KEY, AAD))).toBe('tag-mismatch');
  });

  it('fails with a wrong AAD and with a wrong key', () => {
    const value = seal('LOCAL');
    expect(reasonOf(() => decryptField(value, KEY, Buffer.from('other')))).toBe('tag-mismatch');
    expect(reasonOf(() => decryptField(value, randomBytes(32), AAD))).toBe('tag-mismatch');
  });

  it('decrypts with a key given in Base64', () => {
    const key = parseKey(KEY_BASE64);
    expect(key.encoding).toBe('base64');
    expect(decryptField(seal('19990131'), key.bytes, AAD)).toBe('19990131');
  });

  it('tells malformed values from tag failures', () => {
    expect(reasonOf(() => decryptField('not base64 !!', KEY, AAD))).toBe('not-base64');
    expect(reasonOf(() => decryptField(Buffer.alloc(27).toString('base64'), KEY, AAD))).toBe('too-short');
    expect(reasonOf(() => decryptField(42, KEY, AAD))).toBe('not-a-string');
  });

  it('accepts the shortest valid value: an empty plaintext (28 bytes)', () => {
    expect(decryptField(seal(''), KEY, AAD)).toBe('');
  });
});

describe('diagnoseTagMismatch', () => {
  it('finds an AAD that was used as text instead of hex, and names the setting', () => {
    const value = seal('x', KEY, Buffer.from(AAD_HEX, 'utf8'));
    expect(diagnoseTagMismatch(value, KEY, parseAad(AAD_HEX))).toMatchObject({
      explanation: expect.stringMatching(/bytes of its text/),
      reading: { setting: `text:${AAD_HEX}` },
    });
  });

  it('finds an AAD that is hex where text was written, and one in Base64', () => {
    expect(diagnoseTagMismatch(seal('x', KEY, AAD), KEY, parseAad(`text:${AAD_HEX}`))?.reading?.setting).toBe(`hex:${AAD_HEX}`);
    expect(diagnoseTagMismatch(seal('x', KEY, Buffer.from('TOSS')), KEY, parseAad('VE9TUw=='))?.reading?.setting).toBe('hex:544f5353');
  });

  it('finds IV + tag + ciphertext slicing', () => {
    const bytes = Buffer.from(seal('swapped'), 'base64');
    const iv = bytes.subarray(0, 12);
    const body = bytes.subarray(12, bytes.length - 16);
    const tag = bytes.subarray(bytes.length - 16);
    const swapped = Buffer.concat([iv, tag, body]).toString('base64');
    expect(diagnoseTagMismatch(swapped, KEY, parseAad(AAD_HEX))?.explanation).toMatch(/IV \+ tag \+ ciphertext/);
  });

  it('says nothing when only a different key would help', () => {
    expect(diagnoseTagMismatch(seal('x', randomBytes(32)), KEY, parseAad(AAD_HEX))).toBeUndefined();
  });
});

describe('decryptUserInfo', () => {
  it('decrypts every personal field and passes the others through', () => {
    const outcome = decryptUserInfo({ ...sealedUser(), extraField: { nested: true } }, KEY, AAD);
    expect(outcome.failed).toEqual([]);
    expect(outcome.user).toEqual({ ...PLAIN_USER, di: null, extraField: { nested: true } });
  });

  it('leaves absent, empty, null and "null" fields undecrypted', () => {
    const { userKey, scope, agreedTerms } = PLAIN_USER;
    const outcome = decryptUserInfo({ userKey, scope, agreedTerms, name: seal('이름'), email: 'null', di: null, phone: '' }, KEY, AAD);
    expect(outcome.failed).toEqual([]);
    expect(outcome.decrypted).toEqual(['name']);
    expect(outcome.user).toEqual({ userKey, scope, agreedTerms, name: '이름', email: null, di: null, phone: '' });
    expect('birthday' in outcome.user).toBe(false);
  });

  it('attempts every field and reports each failure', () => {
    const user = sealedUser();
    user.phone = seal('010', KEY, Buffer.from('wrong'));
    user.ci = 'garbage!';
    const outcome = decryptUserInfo(user, KEY, AAD);
    expect(outcome.failed).toEqual([
      { field: 'phone', reason: 'tag-mismatch' },
      { field: 'ci', reason: 'not-base64' },
    ]);
    expect(outcome.decrypted).toEqual(['name', 'birthday', 'gender', 'nationality', 'email']);
  });

  it('encryptUserInfo is its inverse', () => {
    const sealed = encryptUserInfo({ ...PLAIN_USER, di: null }, KEY, AAD);
    expect(sealed.name).not.toBe(PLAIN_USER.name);
    expect(decryptUserInfo(sealed, KEY, AAD).user).toEqual({ ...PLAIN_USER, di: null });
  });
});

describe('decryptionError', () => {
  const material = { key: parseKey(KEY_HEX), aad: parseAad(AAD_HEX) };

  it('names the fields and the likely causes, never the key or AAD', () => {
    const user = sealedUser(KEY, Buffer.from('another aad'));
    const error = decryptionError(decryptUserInfo(user, KEY, AAD), user, material);
    expect(error).toBeInstanceOf(DecryptError);
    expect(error.exitCode).toBe(3);
    expect(error.failedFields).toEqual(['name', 'phone', 'birthday', 'ci', 'gender', 'nationality', 'email']);
    expect(error.message).toContain('could not decrypt 7 of 7');
    expect(error.hint).toMatch(/wrong decrypt key.*wrong AAD.*IV\(12\) \+ ciphertext \+ tag\(16\)/s);
    const all = `${error.message}\n${error.hint}`;
    expect(all).not.toContain(KEY_HEX);
    expect(all).not.toContain(KEY_BASE64);
    expect(all).not.toContain(AAD_HEX);
  });

  it('blames damaged values when the same key decrypted other fields', () => {
    const user = sealedUser();
    const bytes = Buffer.from(user.name as string, 'base64');
    bytes[bytes.length - 2]! ^= 1;
    user.name = bytes.toString('base64');
    const error = decryptionError(decryptUserInfo(user, KEY, AAD), user, material);
    expect(error.failedFields).toEqual(['name']);
    expect(error.hint).toMatch(/altered or truncated/);
  });

  it('names the exact setting when the AAD verifies read the other way; by its form only without showAad', () => {
    const user = sealedUser(KEY, Buffer.from(AAD_HEX, 'utf8'));
    const shown = decryptionError(decryptUserInfo(user, KEY, AAD), user, material, { showAad: true });
    expect(shown.message).toContain('the AAD is read as hex, and they verify when the AAD is the bytes of its text');
    expect(shown.hint).toContain(`miniapp config set decrypt-aad text:${AAD_HEX}`);
    const hidden = decryptionError(decryptUserInfo(user, KEY, AAD), user, material);
    expect(hidden.hint).toContain('miniapp config set decrypt-aad text:...');
    expect(`${hidden.message}\n${hidden.hint}`).not.toContain(AAD_HEX);
  });
});

describe('unwrapUserInfo', () => {
  const bare = sealedUser();
  it('accepts the envelope, its success object and a bare UserInfo', () => {
    expect(unwrapUserInfo({ resultType: 'SUCCESS', success: bare })).toBe(bare);
    expect(unwrapUserInfo({ success: bare })).toBe(bare);
    expect(unwrapUserInfo(bare)).toBe(bare);
  });

  it('reports a FAIL envelope with its code and reason', () => {
    expect(() => unwrapUserInfo({ resultType: 'FAIL', error: { errorCode: 'USER_NOT_FOUND', reason: 'no such user' } })).toThrow(
      /FAIL envelope.*USER_NOT_FOUND: no such user/,
    );
    expect(() => unwrapUserInfo({ resultType: 'FAIL' })).toThrow(MiniappError);
  });

  it('rejects what is not a login-me response', () => {
    expect(() => unwrapUserInfo([1, 2])).toThrow(UsageError);
    expect(() => unwrapUserInfo('text')).toThrow(UsageError);
    expect(() => unwrapUserInfo({ hello: 'world' })).toThrow(/no userKey and no encrypted field/);
  });
});
