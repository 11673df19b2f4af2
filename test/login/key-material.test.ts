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

  it("trims whitespace, a key file's trailing newline and pasted quotes", () => {
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
  it("reads a bare value of hex digits of even length as hex (the spec's form)", () => {
    expect(parseAad('6d696e69 ')).toEqual({ bytes: Buffer.from('mini'), encoding: 'hex', explicit: false, body: '6d696e69' });
    expect(parseAad('544F5353').bytes).toEqual(Buffer.from('TOSS'));
  });

  it("reads a bare value that is not hex as its text (the vendor's AAD_STRING=TOSS)", () => {
    expect(parseAad('TOSS')).toEqual({ bytes: Buffer.from('TOSS'), encoding: 'text', explicit: false, body: 'TOSS' });
    expect(parseAad('abc').bytes).toEqual(Buffer.from('abc')); // odd length: not whole bytes of hex
    expect(parseAad('"TOSS"\n').bytes).toEqual(Buffer.from('TOSS'));
  });

  it('reads text: and hex: as they say, a value that is both included', () => {
    expect(parseAad('text:544f5353')).toEqual({ bytes: Buffer.from('544f5353'), encoding: 'text', explicit: true, body: '544f5353' });
    expect(parseAad('hex:544f5353')).toEqual({ bytes: Buffer.from('TOSS'), encoding: 'hex', explicit: true, body: '544f5353' });
    expect(parseAad('TEXT:a b').bytes).toEqual(Buffer.from('a b'));
  });

  it('rejects an empty AAD and hex: that is not whole bytes of hex, never echoing it', () => {
    expect(configMessage(() => parseAad(''))).toContain('empty');
    expect(configMessage(() => parseAad('text:'))).toContain('empty after "text:"');
    expect(configMessage(() => parseAad('hex:TOSS'))).toContain('must be hex digits');
    expect(configMessage(() => parseAad('hex:abc'))).toContain('odd number');
    expect(configMessage(() => parseAad('hex:TOSS'))).not.toContain('TOSS');
  });

  it('never claims that the console issues hex', () => {
    let hint = '';
    try {
      parseAad('');
    } catch (error) {
      hint = (error as ConfigError).hint ?? '';
    }
    expect(hint).toContain('text:VALUE');
    expect(hint).not.toMatch(/console/);
  });
});
