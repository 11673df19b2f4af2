/**
 * Reading the config file without `conf`: a command that only reads
 * settings or stored tokens (`config get`, `token show`, every client
 * command resolving its address and token) parses the one small JSON file
 * itself, since loading conf (and the ajv, atomically and dot-prop it
 * brings) costs more than the whole rest of such a command. Writes still go
 * through ConfigStore (conf): atomic, mode 0600.
 *
 * The file is read afresh on every call, as conf does, so a value written
 * through ConfigStore earlier in the same command is seen. A file that is
 * not valid JSON is reported with the same message ConfigStore gives.
 */
import { chmodSync, readFileSync, statSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import { jsonSyntaxProblem } from '../json-syntax.js';
import { configFilePath } from './paths.js';

export interface ProfileData {
  settings?: Record<string, string>;
  [section: string]: unknown;
}

export const FILE_MODE = 0o600;

/** Removes group and other permissions from a file that has them. */
export function tighten(path: string): void {
  try {
    if ((statSync(path).mode & 0o077) !== 0) chmodSync(path, FILE_MODE);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

/** The file could not be read, or (given its `text`) is not JSON: said without quoting it, as it holds keys and tokens. */
export function unreadableConfig(path: string, error: unknown, text?: string): ConfigError {
  const why = text === undefined ? (error as Error).message : `not valid JSON: ${jsonSyntaxProblem(text, error)}`;
  return new ConfigError(`cannot read the config file ${path}: ${why}`, {
    hint: 'fix the JSON by hand, or move the file away to start afresh',
    cause: error,
  });
}

/** The read side of the config file, without conf; ConfigStore adds the writes. */
export class ConfigFile {
  readonly path: string;

  /** Throws a ConfigError at once when the file is not valid JSON, as opening ConfigStore does. */
  constructor(readonly dir: string) {
    this.path = configFilePath(dir);
    tighten(this.path);
    this.profiles();
  }

  profileNames(): string[] {
    return Object.keys(this.profiles()).sort();
  }

  settings(profile: string): Record<string, string> {
    return { ...this.profiles()[profile]?.settings };
  }

  /** What the file holds for the setting: a string unless the file was edited by hand (Settings.get says so). */
  getSetting(profile: string, key: string): unknown {
    return this.profiles()[profile]?.settings?.[key];
  }

  /** State kept by commands beside the settings (stored tokens, for example). */
  getSection<T>(profile: string, section: string): T | undefined {
    return this.profiles()[profile]?.[section] as T | undefined;
  }

  /** The profiles as the file holds them now (read afresh each time). */
  protected profiles(): Record<string, ProfileData> {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw unreadableConfig(this.path, error);
    }
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch (error) {
      throw unreadableConfig(this.path, error, text);
    }
    // Anything but this shape is refused, never read as empty: a write would then replace what the file holds.
    if (!isObject(data)) throw misshapen(this.path, `it holds ${kindOf(data)}, not an object with "profiles"`);
    const profiles = data['profiles'];
    if (profiles === undefined) return {};
    if (!isObject(profiles)) throw misshapen(this.path, `"profiles" is ${kindOf(profiles)}, not an object of profiles`);
    for (const [name, profile] of Object.entries(profiles)) {
      if (!isObject(profile)) throw misshapen(this.path, `profile "${name}" is ${kindOf(profile)}, not an object`);
      if (profile['settings'] !== undefined && !isObject(profile['settings'])) {
        throw misshapen(this.path, `the settings of profile "${name}" are ${kindOf(profile['settings'])}, not an object`);
      }
    }
    return profiles as Record<string, ProfileData>;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** "a string", "an array", "null": what a JSON value is, never what it says. */
export function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value === 'bigint' ? 'number' : typeof value}`;
}

function misshapen(path: string, why: string): ConfigError {
  return new ConfigError(`cannot read the config file ${path}: ${why}`, { hint: 'fix it by hand, or move the file away to start afresh' });
}
