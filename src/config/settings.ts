/**
 * Resolves a setting for the active profile: the environment beats the
 * file, the file beats the default. The config file is read only when a
 * value is not already in the environment, and read without `conf` (heavy
 * to load), which is loaded only to write (`store()`).
 */
import { AuthError, ConfigError } from '../errors.js';
import { configDir } from './paths.js';
import { settingSpec, type SettingSpec } from './keys.js';
import { ConfigFile } from './file.js';
import { jsonKind } from '../json-syntax.js';
import type { ConfigStore } from './store.js';

type SettingSource = 'env' | 'profile' | 'default';

export interface ResolvedSetting {
  spec: SettingSpec;
  value: string | undefined;
  source: SettingSource | undefined;
}

type Env = Readonly<Record<string, string | undefined>>;

const PROFILE_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

export function checkProfileName(name: string): string {
  if (!PROFILE_NAME.test(name)) {
    throw new ConfigError(`invalid profile name "${name}"`, {
      hint: 'a profile name is 1 to 64 letters, digits, ".", "_" or "-"',
    });
  }
  return name;
}

export class Settings {
  #store: Promise<ConfigStore> | undefined;
  #file: ConfigFile | undefined;

  constructor(
    readonly profile: string,
    private readonly env: Env,
    private readonly homedir: string,
  ) {}

  get configDir(): string {
    return configDir(this.env, this.homedir);
  }

  /** The config file to read from (a ConfigError at once when it is not valid JSON). */
  file(): ConfigFile {
    this.#file ??= new ConfigFile(this.configDir);
    return this.#file;
  }

  /** The config file to write to, on conf. */
  store(): Promise<ConfigStore> {
    this.#store ??= import('./store.js').then(({ ConfigStore }) => new ConfigStore(this.configDir));
    return this.#store;
  }

  /** The environment's value, if the variable is set and not empty. */
  fromEnv(spec: SettingSpec): string | undefined {
    const value = this.env[spec.env];
    return value !== undefined && value.trim() !== '' ? value : undefined;
  }

  /** Resolves and validates a setting, naming where a bad value came from. */
  async get(key: string): Promise<ResolvedSetting> {
    const spec = settingSpec(key);
    const fromEnv = this.fromEnv(spec);
    let resolved: ResolvedSetting;
    if (fromEnv !== undefined) {
      resolved = { spec, value: fromEnv, source: 'env' };
    } else {
      const stored = this.file().getSetting(this.profile, key);
      if (stored !== undefined && typeof stored !== 'string') {
        throw new ConfigError(`${spec.key} (from profile "${this.profile}"): the config file holds ${jsonKind(stored)}, not a text`, {
          hint: `set it again: \`miniapp config set ${spec.key} VALUE${this.profile === 'default' ? '' : ` --profile ${this.profile}`}\``,
        });
      }
      resolved =
        stored !== undefined
          ? { spec, value: stored, source: 'profile' }
          : { spec, value: spec.default, source: spec.default === undefined ? undefined : 'default' };
    }
    if (resolved.value !== undefined && resolved.source !== 'default') {
      try {
        resolved.value = spec.validate(resolved.value);
      } catch (error) {
        if (error instanceof ConfigError) {
          // Validators name the key themselves ("mtls-key: no file at ..."): say where it came from once.
          const message = error.message.startsWith(`${spec.key}: `) ? error.message.slice(spec.key.length + 2) : error.message;
          throw new ConfigError(`${this.describeSource(resolved)}: ${message}`, { hint: error.hint });
        }
        throw error;
      }
    }
    return resolved;
  }

  /** A setting that must be present, with a message on how to provide it (exit 4 for a missing credential, else 2). */
  async require(key: string, flag?: string): Promise<string> {
    const resolved = await this.get(key);
    if (resolved.value === undefined) {
      const ways = [flag, resolved.spec.env, `\`miniapp config set ${key} VALUE${this.profile === 'default' ? '' : ` --profile ${this.profile}`}\``]
        .filter(Boolean)
        .join(', ');
      const hint = `provide it with ${ways}${resolved.spec.whereToGet ? ` (${resolved.spec.whereToGet})` : ''}`;
      const message = `${key} is not set in profile "${this.profile}"`;
      throw resolved.spec.credential ? new AuthError(message, { code: 'NO_CREDENTIALS', hint }) : new ConfigError(message, { hint });
    }
    return resolved.value;
  }

  describeSource(resolved: ResolvedSetting): string {
    switch (resolved.source) {
      case 'env':
        return `${resolved.spec.key} (from ${resolved.spec.env})`;
      case 'profile':
        return `${resolved.spec.key} (from profile "${this.profile}")`;
      default:
        return resolved.spec.key;
    }
  }
}
