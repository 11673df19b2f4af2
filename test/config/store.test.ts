import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigStore } from '../../src/config/store.js';
import { configDir, configFilePath, dataDir } from '../../src/config/paths.js';
import { ConfigError } from '../../src/errors.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'miniapp-store-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const mode = (path: string) => statSync(path).mode & 0o777;

describe('ConfigStore', () => {
  it('round-trips settings and keeps profiles apart', () => {
    const store = new ConfigStore(dir);
    store.setSetting('default', 'base-url', 'https://a.example');
    store.setSetting('staging', 'base-url', 'https://b.example');
    store.setSetting('staging', 'decrypt-aad', 'abcd');

    const reopened = new ConfigStore(dir);
    expect(reopened.getSetting('default', 'base-url')).toBe('https://a.example');
    expect(reopened.getSetting('staging', 'base-url')).toBe('https://b.example');
    expect(reopened.getSetting('default', 'decrypt-aad')).toBeUndefined();
    expect(reopened.settings('staging')).toEqual({ 'base-url': 'https://b.example', 'decrypt-aad': 'abcd' });
    expect(reopened.profileNames()).toEqual(['default', 'staging']);
  });

  it('unsets a key and says whether it was there', () => {
    const store = new ConfigStore(dir);
    store.setSetting('default', 'graph-token', 't');
    expect(store.unsetSetting('default', 'graph-token')).toBe(true);
    expect(store.unsetSetting('default', 'graph-token')).toBe(false);
    expect(new ConfigStore(dir).getSetting('default', 'graph-token')).toBeUndefined();
  });

  it('keeps sections beside settings without touching them', () => {
    const store = new ConfigStore(dir);
    store.setSetting('default', 'base-url', 'https://a.example');
    store.setSection('default', 'tokens', { accessToken: 'x', expiresAt: '2026-01-01T00:00:00Z' });
    expect(new ConfigStore(dir).getSection('default', 'tokens')).toEqual({ accessToken: 'x', expiresAt: '2026-01-01T00:00:00Z' });
    store.setSection('default', 'tokens', undefined);
    expect(store.getSection('default', 'tokens')).toBeUndefined();
    expect(store.getSetting('default', 'base-url')).toBe('https://a.example');
  });

  it('writes the file with mode 0600 in a 0700 directory', () => {
    const nested = join(dir, 'fresh', 'miniapp');
    const store = new ConfigStore(nested);
    store.setSetting('default', 'decrypt-key', 'secret');
    expect(store.path).toBe(configFilePath(nested));
    expect(mode(store.path)).toBe(0o600);
    expect(mode(nested)).toBe(0o700);
  });

  it('tightens an older file that others could read', () => {
    const path = configFilePath(dir);
    writeFileSync(path, JSON.stringify({ profiles: { default: { settings: { 'base-url': 'https://x.example' } } } }));
    chmodSync(path, 0o644);
    const store = new ConfigStore(dir);
    expect(mode(path)).toBe(0o600);
    expect(store.getSetting('default', 'base-url')).toBe('https://x.example');
  });

  it('reports a file that is not JSON and leaves it as it was', () => {
    const path = configFilePath(dir);
    writeFileSync(path, '{ "profiles": ');
    expect(() => new ConfigStore(dir)).toThrow(ConfigError);
    expect(() => new ConfigStore(dir)).toThrow(path);
    expect(readFileSync(path, 'utf8')).toBe('{ "profiles": ');
  });
});

describe('paths', () => {
  it('prefers MINIAPP_* then XDG then the home directory', () => {
    expect(configDir({ MINIAPP_CONFIG_DIR: '/c', XDG_CONFIG_HOME: '/x' }, '/home/u')).toBe('/c');
    expect(configDir({ XDG_CONFIG_HOME: '/x' }, '/home/u')).toBe('/x/miniapp');
    expect(configDir({ MINIAPP_CONFIG_DIR: '' }, '/home/u')).toBe('/home/u/.config/miniapp');
    expect(dataDir({ MINIAPP_DATA_DIR: '/d' }, '/home/u')).toBe('/d');
    expect(dataDir({ XDG_DATA_HOME: '/xd' }, '/home/u')).toBe('/xd/miniapp');
    expect(dataDir({}, '/home/u')).toBe('/home/u/.local/share/miniapp');
  });
});

describe('directory permissions', () => {
  it('does not loosen an existing directory', () => {
    const existing = join(dir, 'existing');
    mkdirSync(existing, { mode: 0o700 });
    new ConfigStore(existing).setSetting('default', 'base-url', 'https://a.example');
    expect(mode(existing)).toBe(0o700);
  });
});
