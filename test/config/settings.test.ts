import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkProfileName, Settings } from '../../src/config/settings.js';
import { SETTINGS, settingSpec } from '../../src/config/keys.js';
import { ConfigError } from '../../src/errors.js';
import { KEY_HEX } from '../helpers/vectors.js';

let home: string;
let env: Record<string, string | undefined>;
beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), 'miniapp-settings-'));
  env = { MINIAPP_CONFIG_DIR: join(home, 'cfg') };
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

describe('Settings', () => {
  it('lets the environment beat the file, and the file beat the default', async () => {
    const settings = new Settings('default', env, home);
    (await settings.store()).setSetting('default', 'graph-version', 'v19.0');
    expect(await settings.get('graph-version')).toMatchObject({ value: 'v19.0', source: 'profile' });

    const withEnv = new Settings('default', { ...env, MINIAPP_GRAPH_VERSION: 'v20.0' }, home);
    expect(await withEnv.get('graph-version')).toMatchObject({ value: 'v20.0', source: 'env' });

    const other = new Settings('other', env, home);
    expect(await other.get('graph-version')).toMatchObject({ value: 'v18.0', source: 'default' });
  });

  it('treats an empty environment variable as unset', async () => {
    const settings = new Settings('default', { ...env, MINIAPP_BASE_URL: '  ' }, home);
    expect(await settings.get('base-url')).toMatchObject({ value: undefined, source: undefined });
  });

  it('does not open the config file when the environment has the value', async () => {
    const settings = new Settings('default', { ...env, MINIAPP_DECRYPT_KEY: KEY_HEX }, home);
    expect(await settings.require('decrypt-key')).toBe(KEY_HEX);
    expect(existsSync(join(home, 'cfg'))).toBe(false);
  });

  it('names the source of a bad value', async () => {
    const settings = new Settings('default', { ...env, MINIAPP_DECRYPT_KEY: KEY_HEX.slice(2) }, home);
    await expect(settings.get('decrypt-key')).rejects.toThrow(/decrypt-key \(from MINIAPP_DECRYPT_KEY\).*31 bytes/);
  });

  it('treats a missing credential as an authentication failure (exit 4), with where to get one', async () => {
    const settings = new Settings('default', env, home);
    await expect(settings.require('graph-token')).rejects.toMatchObject({
      exitCode: 4,
      message: 'graph-token is not set in profile "default"',
      hint: expect.stringContaining('sandbox-graph-token'),
    });
    await expect(settings.require('base-url')).rejects.toMatchObject({ exitCode: 2 });
  });

  it('says how to provide a missing setting', async () => {
    const settings = new Settings('staging', env, home);
    await expect(settings.require('decrypt-aad', '--aad')).rejects.toThrow(ConfigError);
    await expect(settings.require('decrypt-aad', '--aad')).rejects.toMatchObject({
      message: 'decrypt-aad is not set in profile "staging"',
      hint: expect.stringContaining('--aad, MINIAPP_DECRYPT_AAD, `miniapp config set decrypt-aad VALUE --profile staging`'),
    });
  });
});

describe('setting validation', () => {
  it('accepts well-formed values and normalises them', () => {
    expect(settingSpec('base-url').validate(' https://api.example.com/ ')).toBe('https://api.example.com');
    expect(settingSpec('path-prefix').validate('/api-partner/v1/apps-in-toss/user/oauth2/')).toBe('/api-partner/v1/apps-in-toss/user/oauth2');
    expect(settingSpec('grpc-addr').validate('localhost:50051')).toBe('localhost:50051');
    expect(settingSpec('graph-version').validate('v21.0')).toBe('v21.0');
  });

  it.each([
    ['base-url', 'not a url'],
    ['base-url', 'ftp://example.com'],
    ['relay-url', 'http://x.example/?q=1'],
    ['path-prefix', 'no-slash'],
    ['decrypt-key', 'abcd'],
    ['decrypt-aad', 'hex:xyz'],
    ['decrypt-aad', 'text:'],
    ['graph-version', '18'],
    ['grpc-addr', 'localhost'],
    ['grpc-addr', 'localhost:70000'],
    ['mtls-cert', '/no/such/file.pem'],
    ['mtls-key', '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----'],
    ['graph-token', '   '],
  ])('rejects %s = %j', (key, value) => {
    expect(() => settingSpec(key).validate(value)).toThrow(ConfigError);
  });

  it('rejects an unknown key with the list of valid ones', () => {
    expect(() => settingSpec('base_url')).toThrow('unknown setting "base_url"');
    try {
      settingSpec('base_url');
    } catch (error) {
      for (const spec of SETTINGS) expect((error as ConfigError).hint).toContain(spec.key);
    }
  });

  it('checks profile names', () => {
    expect(checkProfileName('prod-1.eu_west')).toBe('prod-1.eu_west');
    expect(() => checkProfileName('../etc')).toThrow(ConfigError);
    expect(() => checkProfileName('')).toThrow(ConfigError);
  });
});
