import { describe, expect, it } from 'vitest';
import { parseAad, parseKey } from '../../src/login/key-material.js';
import { ConfigError } from '../../src/errors.js';
import { KEY, KEY_BASE64, KEY_HEX } from '../helpers/vectors.js';

function configMessage(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).message;
  }
  throw new Error('expected a ConfigError');
}

describe('parseKey', () => {
  it('reads 64 hex characters, in either case, as hex', () => {
    expect(parseKey(KEY_HEX)).toEqual({ bytes: KEY, encoding: 'hex' });
    expect(parseKey(KEY_HEX.toUpperCase()).bytes).toEqual(KEY);
  });

  it('reads 44 Base64 characters as Base64, and the URL-safe alphabet too', () => {
    expect(parseKey(KEY_BASE64)).toEqual({ bytes: KEY, encoding: 'base64' });
    expect(parseKey(KEY.toString('base64url')).bytes).toEqual(KEY);
  });

  it('trims whitespace, a key file\'s trailing newline and pasted quotes', () => {
    expect(parseKey(`  ${KEY_HEX}\n`).bytes).toEqual(KEY);
    expect(parseKey(`"${KEY_BASE64}"\r\n`).bytes).toEqual(KEY);
  });

  it('rejects a 31-byte key with its length, never its value', () => {
    const short = KEY_HEX.slice(0, 62);
    const message = configMessage(() => parseKey(short));
    expect(message).toContain('62 hex characters, which is 31 bytes');
    expect(message).not.toContain(short);
    expect(configMessage(() => parseKey(KEY.subarray(0, 31).toString('base64')))).toContain('which is 31 bytes');
  });

  it('rejects empty, odd-length and non-key text', () => {
    expect(configMessage(() => parseKey('  \n'))).toContain('empty');
    expect(configMessage(() => parseKey('abc'))).toContain('odd number');
    expect(configMessage(() => parseKey('not a key at all!'))).toContain('neither hex nor Base64');
  });
});

describe('parseAad', () => {
  it('decodes hex', () => {
    expect(parseAad('6d696e69 ').bytes).toEqual(Buffer.from('mini'));
  });

  it('rejects non-hex, odd-length and empty AADs', () => {
    expect(configMessage(() => parseAad('miniapp'))).toContain('must be hex');
    expect(configMessage(() => parseAad('abc'))).toContain('odd number');
    expect(configMessage(() => parseAad(''))).toContain('empty');
  });
});
