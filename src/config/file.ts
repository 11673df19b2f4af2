/**
 * Reading the config file: a command that only reads settings or stored
 * tokens (`config get`, `token show`, every client command resolving its
 * address and token) parses the one small JSON file, and loads nothing of
 * the writer. Writes go through ConfigStore (store.ts): atomic, mode 0600.
 *
 * The file is read afresh on every call, so that a value written
 * through ConfigStore earlier in the same command is seen. A file that is
 * not valid JSON is reported, never read as empty.
 */
import { chmodSync, readFileSync, statSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import { notADirectory } from '../directories.js';
import { isJsonObject, jsonKind, jsonSyntaxProblem } from '../json-syntax.js';
import { configFilePath } from './paths.js';

export interface ProfileData {
  settings?: Record<string, string>;
  [section: string]: unknown;
}

export const FILE_MODE = 0o600;

/** What to do about a config dir that cannot be used. */
export const CONFIG_DIR_HINT = 'choose another config dir with MINIAPP_CONFIG_DIR, or make this one writable';

/** Removes group and other permissions from a file that has them. */
function tighten(path: string): void {
  try {
    if ((statSync(path).mode & 0o077) !== 0) chmodSync(path, FILE_MODE);
  } catch (error) {
    // A file where a directory of the path should be: reading the file says so (ConfigFile).
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw error;
  }
}

/** The file could not be read, or (given its `text`) is not JSON: said without quoting it, as it holds keys and tokens. */
function unreadableConfig(path: string, error: unknown, text?: string): ConfigError {
  return badConfig(path, text === undefined ? (error as Error).message : `not valid JSON: ${jsonSyntaxProblem(text, error)}`, error);
}

/** A config file that cannot be used as it is; nothing is written over it. */
function badConfig(path: string, why: string, cause?: unknown): ConfigError {
  return new ConfigError(`cannot read the config file ${path}: ${why}`, { hint: 'fix it by hand, or move the file away to start afresh', cause });
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

  /** The whole file as it holds it now, profiles and anything beside them (read afresh; {} when there is none). */
  protected whole(): Record<string, unknown> {
    this.profiles();
    try {
      return JSON.parse(readFileSync(this.path, 'utf8')) as Record<string, unknown>;
    } catch {
      return {};
    }
  }

  /** The profiles as the file holds them now (read afresh each time). */
  protected profiles(): Record<string, ProfileData> {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
      const wrong = (error as NodeJS.ErrnoException).code === 'ENOTDIR' ? notADirectory(this.dir, 'the config dir') : undefined;
      if (wrong) throw new ConfigError(wrong, { hint: CONFIG_DIR_HINT, cause: error });
      throw unreadableConfig(this.path, error);
    }
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch (error) {
      throw unreadableConfig(this.path, error, text);
    }
    // Anything but this shape is refused, never read as empty: a write would then replace what the file holds.
    if (!isJsonObject(data)) throw badConfig(this.path, `it holds ${jsonKind(data)}, not an object with "profiles"`);
    const profiles = data.profiles;
    if (profiles === undefined) return {};
    if (!isJsonObject(profiles)) throw badConfig(this.path, `"profiles" is ${jsonKind(profiles)}, not an object of profiles`);
    for (const [name, profile] of Object.entries(profiles)) {
      if (!isJsonObject(profile)) throw badConfig(this.path, `profile "${name}" is ${jsonKind(profile)}, not an object`);
      if (profile.settings !== undefined && !isJsonObject(profile.settings)) {
        throw badConfig(this.path, `the settings of profile "${name}" are ${jsonKind(profile.settings)}, not an object`);
      }
    }
    return profiles as Record<string, ProfileData>;
  }
}
