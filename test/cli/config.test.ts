import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Sandbox, plain } from '../helpers/cli.js';
import { KEY_HEX } from '../helpers/vectors.js';

let sb: Sandbox;
beforeEach(() => {
  sb = new Sandbox();
});
afterEach(() => sb.dispose());

describe('miniapp config', () => {
  it('sets, gets and unsets a value', async () => {
    expect(await sb.run(['config', 'set', 'base-url', 'https://partner.example.com/'])).toMatchObject({ code: 0, stdout: '' });
    expect(await sb.run(['config', 'get', 'base-url'])).toMatchObject({ code: 0, stdout: 'https://partner.example.com\n' });
    expect((await sb.run(['config', 'unset', 'base-url'])).code).toBe(0);
    const missing = await sb.run(['config', 'get', 'base-url']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('base-url is not set in profile "default"');
  });

  it('reads a value from stdin with "-"', async () => {
    expect((await sb.run(['config', 'set', 'decrypt-key', '-'], { stdin: `${KEY_HEX}\n` })).code).toBe(0);
    expect((await sb.run(['config', 'get', 'decrypt-key', '--reveal'])).stdout).toBe(`${KEY_HEX}\n`);
  });

  it('writes the file with mode 0600 at `config path`', async () => {
    await sb.run(['config', 'set', 'graph-token', 'EAAB-secret-token-value']);
    const path = (await sb.run(['config', 'path'])).stdout.trim();
    expect(path).toBe(join(sb.configDir, 'config.json'));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual({
      profiles: { default: { settings: { 'graph-token': 'EAAB-secret-token-value' } } },
    });
  });

  it('masks secrets in get and list, and reveals them on request', async () => {
    await sb.run(['config', 'set', 'decrypt-key', KEY_HEX]);
    const get = await sb.run(['config', 'get', 'decrypt-key'], { tty: true });
    expect(get.stdout).toBe('603d...dff4\n');
    expect(get.stderr).toContain('--reveal');
    expect((await sb.run(['config', 'get', 'decrypt-key', '--reveal'])).stdout).toBe(`${KEY_HEX}\n`);
    expect(JSON.parse((await sb.run(['config', 'get', 'decrypt-key', '--json'])).stdout)).toEqual({
      key: 'decrypt-key',
      value: KEY_HEX,
      source: 'profile',
      profile: 'default',
    });

    const list = await sb.run(['config', 'list']);
    expect(list.stdout).toContain('decrypt-key\t603d...dff4\tprofile');
    expect(list.stdout).not.toContain(KEY_HEX);
    const listJson = JSON.parse((await sb.run(['config', 'list', '--json'])).stdout);
    expect(listJson.settings.find((s: { key: string }) => s.key === 'decrypt-key').value).toBe('603d...dff4');
    expect((await sb.run(['config', 'list', '--reveal'])).stdout).toContain(KEY_HEX);
  });

  it('lists every setting with its source on a TTY', async () => {
    await sb.run(['config', 'set', 'base-url', 'https://a.example']);
    const list = await sb.run(['config', 'list'], { tty: true, env: { MINIAPP_GRAPH_TOKEN: 'env-token-1234567890' } });
    const text = plain(list.stdout);
    expect(text).toMatch(/│ key +│ value +│ source +│/);
    expect(text).toMatch(/│ base-url +│ https:\/\/a\.example +│ profile +│/);
    expect(text).toMatch(/│ graph-token +│ env-\.\.\.7890 +│ env MINIAPP_GRAPH_TOKEN +│/);
    expect(text).toMatch(/│ path-prefix +│ \/api-partner\/v1\/miniapp\/user\/oauth2 +│ default +│/);
    expect(text).toMatch(/│ relay-url +│ +│ +│/);
  });

  it('keeps profiles apart, chosen by --profile or MINIAPP_PROFILE', async () => {
    await sb.run(['config', 'set', 'base-url', 'https://prod.example']);
    await sb.run(['--profile', 'staging', 'config', 'set', 'base-url', 'https://staging.example']);
    expect((await sb.run(['config', 'get', 'base-url'])).stdout).toBe('https://prod.example\n');
    expect((await sb.run(['config', 'get', 'base-url', '--profile', 'staging'])).stdout).toBe('https://staging.example\n');
    expect((await sb.run(['config', 'get', 'base-url'], { env: { MINIAPP_PROFILE: 'staging' } })).stdout).toBe('https://staging.example\n');
    expect((await sb.run(['config', 'get', 'base-url', '--profile', 'other'])).code).toBe(2);
  });

  it('lets the environment beat the file and warns when setting a shadowed key', async () => {
    const env = { MINIAPP_BASE_URL: 'https://env.example' };
    const set = await sb.run(['config', 'set', 'base-url', 'https://file.example'], { env });
    expect(set.code).toBe(0);
    expect(set.stderr).toContain('MINIAPP_BASE_URL is set in this environment and overrides the stored value');
    expect((await sb.run(['config', 'get', 'base-url'], { env })).stdout).toBe('https://env.example\n');
  });

  it('rejects unknown keys with the list of valid ones', async () => {
    const result = await sb.run(['config', 'set', 'base_url', 'https://x.example']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('unknown setting "base_url"');
    expect(result.stderr).toContain('valid settings: base-url, path-prefix, decrypt-key');
  });

  it('validates values on set and stores nothing when they are bad', async () => {
    for (const [key, value, message] of [
      ['base-url', 'partner.example.com', 'must be an absolute URL'],
      ['decrypt-key', KEY_HEX.slice(2), '31 bytes'],
      ['decrypt-aad', 'hex:not-hex', 'after "hex:" must be hex digits'],
      ['mtls-cert', '/no/such/cert.pem', 'no file at /no/such/cert.pem'],
    ] as const) {
      const result = await sb.run(['config', 'set', key, value]);
      expect(result.code, key).toBe(2);
      expect(result.stderr).toContain(message);
      expect((await sb.run(['config', 'get', key, '--reveal'])).code).toBe(2);
    }
  });

  it('accepts PEM text for certificates and keys', async () => {
    const pem = '-----BEGIN PRIVATE KEY-----\nMIIBVQ==\n-----END PRIVATE KEY-----';
    expect((await sb.run(['config', 'set', 'mtls-key', pem])).code).toBe(0);
    expect((await sb.run(['config', 'get', 'mtls-key'], { tty: true })).stdout).toBe('----...----\n');
  });

  it('reports an invalid profile name and a broken config file', async () => {
    expect((await sb.run(['--profile', '../x', 'config', 'list'])).code).toBe(2);
    await sb.run(['config', 'set', 'base-url', 'https://a.example']);
    const { writeFileSync } = await import('node:fs');
    writeFileSync(join(sb.configDir, 'config.json'), '{oops');
    const broken = await sb.run(['config', 'list']);
    expect(broken.code).toBe(2);
    expect(broken.stderr).toContain('cannot read the config file');
  });

  it('says where a broken config file stops being JSON, without quoting what it holds', async () => {
    const { readFileSync, writeFileSync } = await import('node:fs');
    const file = join(sb.configDir, 'config.json');
    await sb.run(['config', 'set', 'base-url', 'https://a.example']);
    // A key pasted without its quotes: V8's own message would quote it ("Unexpected token ... 603deb10...").
    writeFileSync(file, '{"profiles": {"default": {"settings": {\n  "decrypt-key": deb1015ca71be2b73aef\n}}}}');
    for (const args of [
      ['config', 'list'],
      ['config', 'get', 'base-url'],
      ['config', 'set', 'relay-url', 'http://127.0.0.1:3000'],
    ]) {
      const result = await sb.run(args);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('not valid JSON: unexpected character at line 2, column 18');
      expect(result.stderr).not.toContain('deb1015');
    }
    expect(readFileSync(file, 'utf8')).toContain('deb1015ca71be2b73aef');
  });

  it('refuses a config file of another shape instead of reading it as empty, and writes nothing over it', async () => {
    const { readFileSync, writeFileSync } = await import('node:fs');
    const file = join(sb.configDir, 'config.json');
    await sb.run(['config', 'set', 'base-url', 'https://a.example']);
    const shapes: [string, string][] = [
      ['"hello"', 'it holds a string, not an object with "profiles"'],
      ['[]', 'it holds an array, not an object with "profiles"'],
      ['{"profiles": "oops"}', '"profiles" is a string, not an object of profiles'],
      ['{"profiles": {"default": 3}}', 'profile "default" is a number, not an object'],
      ['{"profiles": {"default": {"settings": ["x"]}}}', 'the settings of profile "default" are an array, not an object'],
    ];
    for (const [text, why] of shapes) {
      writeFileSync(file, text);
      for (const args of [
        ['config', 'list'],
        ['config', 'set', 'relay-url', 'http://127.0.0.1:3000'],
      ]) {
        const result = await sb.run(args);
        expect(result.code, `${text}: ${args.join(' ')}`).toBe(2);
        expect(result.stderr).toContain(why);
        expect(result.stderr).toContain('move the file away');
      }
      expect(readFileSync(file, 'utf8')).toBe(text);
    }
  });

  it('names a setting the file holds as something other than text, and lets config set mend it', async () => {
    const { mkdirSync, writeFileSync } = await import('node:fs');
    mkdirSync(sb.configDir, { recursive: true });
    writeFileSync(join(sb.configDir, 'config.json'), '{"profiles": {"default": {"settings": {"decrypt-key": 123, "base-url": "https://a.example"}}}}');
    const list = await sb.run(['config', 'list']);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/decrypt-key\tdecrypt-key \(from profile "default"\): the config file holds a number, not a text\tinvalid/);
    const me = await sb.run(['decrypt', '--value', 'abc', '--aad', '000102030405060708090a0b0c0d0e0f']);
    expect(me.code).toBe(2);
    expect(me.stderr).toContain('decrypt-key (from profile "default"): the config file holds a number, not a text');
    expect(me.stderr).toContain('miniapp config set decrypt-key VALUE');
    expect(me.stderr).not.toContain('bug');
    expect((await sb.run(['config', 'set', 'decrypt-key', '603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4'])).code).toBe(0);
    expect((await sb.run(['config', 'get', 'base-url'])).stdout).toBe('https://a.example\n');
  });

  it('--no-color wins over --color in either order; --color alone colours a pipe', async () => {
    const colored = await sb.run(['--color', 'config', 'set', 'base-url', 'https://a.example']);
    expect(colored.stdout + colored.stderr).toContain('\u001b[');
    for (const flags of [
      ['--no-color', '--color'],
      ['--color', '--no-color'],
      ['--color', 'config', '--no-color'],
    ]) {
      const args = flags.includes('config') ? [...flags, 'set', 'base-url', 'https://a.example'] : [...flags, 'config', 'set', 'base-url', 'https://a.example'];
      const result = await sb.run(args);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout + result.stderr, flags.join(' ')).not.toContain('\u001b[');
    }
  });

  it('is a usage error without a subcommand argument', async () => {
    const result = await sb.run(['config', 'set', 'base-url']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("missing required argument 'value'");
    expect(result.stderr).toContain("Run 'miniapp config set --help' for usage.");
    expect(result.stderr).not.toContain('Usage:');
  });
});
