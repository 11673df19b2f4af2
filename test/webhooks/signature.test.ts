/** X-Webhook-Signature: sha256= and the hex HMAC-SHA256 of the exact body bytes. */
import { describe, expect, it } from 'vitest';
import { createHmac } from 'node:crypto';
import { checkWebhookUrl } from '../../src/webhooks/delivery.js';
import { parseSignature, signBody, verifySignature } from '../../src/webhooks/signature.js';
import { ConfigError } from '../../src/errors.js';

const SECRET = 'whsec-test-0123456789';
const BODY = '{"event":"post.created","timestamp":"2026-11-21T12:00:00.000Z","data":{"id":1,"title":"Grüße"}}';

describe('signBody', () => {
  it('is sha256= and the hex HMAC-SHA256 of the UTF-8 bytes', () => {
    const expected = createHmac('sha256', SECRET).update(Buffer.from(BODY, 'utf8')).digest('hex');
    expect(signBody(BODY, SECRET)).toBe(`sha256=${expected}`);
    expect(signBody(Buffer.from(BODY, 'utf8'), SECRET)).toBe(`sha256=${expected}`);
    expect(signBody(new Uint8Array(Buffer.from(BODY, 'utf8')), SECRET)).toBe(`sha256=${expected}`);
  });

  it('signs raw bytes that are not valid UTF-8 as they are', () => {
    const bytes = Buffer.from([0x7b, 0xff, 0xfe, 0x7d]);
    const expected = createHmac('sha256', SECRET).update(bytes).digest('hex');
    expect(signBody(bytes, SECRET)).toBe(`sha256=${expected}`);
  });
});

describe('verifySignature', () => {
  const signature = signBody(BODY, SECRET);

  it('accepts the signature of the exact bytes', () => {
    expect(verifySignature(BODY, SECRET, signature)).toBe(true);
    expect(verifySignature(Buffer.from(BODY), SECRET, signature)).toBe(true);
  });

  it('tolerates upper-case hex and surrounding whitespace', () => {
    expect(verifySignature(BODY, SECRET, `  ${signature.toUpperCase()}\n`)).toBe(true);
    expect(verifySignature(BODY, SECRET, `sha256=${signature.slice(7).toUpperCase()}`)).toBe(true);
  });

  it('rejects another secret, a tampered body, re-serialised JSON', () => {
    expect(verifySignature(BODY, `${SECRET}x`, signature)).toBe(false);
    expect(verifySignature(BODY.replace('Grüße', 'Gruesse'), SECRET, signature)).toBe(false);
    expect(verifySignature(`${BODY}\n`, SECRET, signature)).toBe(false);
    expect(verifySignature(JSON.stringify(JSON.parse(BODY), null, 2), SECRET, signature)).toBe(false);
  });

  it('returns false for malformed signatures and never throws', () => {
    const hex = signature.slice(7);
    for (const bad of ['', 'sha256=', hex, `sha1=${hex}`, `sha256=${hex.slice(2)}`, `sha256=${hex}00`, `sha256=${hex.slice(1)}g`, `sha256= ${hex}`]) {
      expect(verifySignature(BODY, SECRET, bad), bad).toBe(false);
    }
    expect(verifySignature(BODY, SECRET, undefined as unknown as string)).toBe(false);
    expect(verifySignature(BODY, undefined as unknown as string, signature)).toBe(false);
    expect(verifySignature(null as unknown as string, SECRET, signature)).toBe(false);
  });

  it('parseSignature gives the 32 digest bytes or undefined', () => {
    expect(parseSignature(signature)?.length).toBe(32);
    expect(parseSignature('sha256=zz')).toBeUndefined();
  });
});

describe('checkWebhookUrl', () => {
  it('takes absolute http(s) URLs and refuses the rest', () => {
    expect(checkWebhookUrl(' https://hooks.example.com/blog?x=1 ')).toBe('https://hooks.example.com/blog?x=1');
    expect(checkWebhookUrl('http://127.0.0.1:9000')).toBe('http://127.0.0.1:9000/');
    expect(() => checkWebhookUrl('/relative')).toThrow(ConfigError);
    expect(() => checkWebhookUrl('ftp://example.com/')).toThrow(/http or https/);
    expect(() => checkWebhookUrl('https://user:pw@example.com/')).toThrow(/credentials/);
  });
});
