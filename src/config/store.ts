/**
 * The config file: one JSON file holding named profiles, each a separate
 * namespace of settings plus state that later commands keep there (stored
 * tokens). Written atomically (a temporary file, flushed, then renamed
 * over it) with mode 0600; an older, looser file is tightened on open. A
 * file that is not valid JSON is reported, never cleared.
 *
 * Written here rather than through `conf`: its writer (atomically) loads
 * when-exit, which takes over SIGINT and SIGTERM and sends the signal again
 * once it has cleaned up, so that a serve that had saved its profile took
 * one SIGTERM for two and stopped without its drain.
 */
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { ensureDirectory } from '../directories.js';
import { ConfigError } from '../errors.js';
import { CONFIG_DIR_HINT, ConfigFile, FILE_MODE, type ProfileData } from './file.js';
import { configFilePath } from './paths.js';

export type { ProfileData } from './file.js';

const DIR_HINT = CONFIG_DIR_HINT;

/** A write of the config file that failed (a read-only dir or disk, no space): said as a write, with the directory. */
function unwritableConfig(dir: string, error: unknown): ConfigError {
  const code = (error as NodeJS.ErrnoException).code;
  return new ConfigError(`cannot write the config file ${configFilePath(dir)}: ${code ?? (error as Error).message} (the config dir is ${dir})`, {
    hint: DIR_HINT,
    cause: error,
  });
}

const isSystemError = (error: unknown) =>
  typeof (error as NodeJS.ErrnoException | undefined)?.code === 'string' && /^E[A-Z]+$/.test((error as NodeJS.ErrnoException).code!);

export class ConfigStore extends ConfigFile {
  constructor(dir: string) {
    // One level at a time, each failure with the directory's name (a file on the way, a read-only file system).
    ensureDirectory(dir, 'the config dir', DIR_HINT);
    // Tightens the file and reports one that is not valid JSON, before anything is written over it.
    super(dir);
  }

  setSetting(profile: string, key: string, value: string): void {
    this.#update(profile, (data) => ({ ...data, settings: { ...data.settings, [key]: value } }));
  }

  /** Returns whether the key was set. */
  unsetSetting(profile: string, key: string): boolean {
    const had = this.getSetting(profile, key) !== undefined;
    if (had) {
      this.#update(profile, (data) => {
        const { [key]: _removed, ...settings } = data.settings ?? {};
        return { ...data, settings };
      });
    }
    return had;
  }

  setSection(profile: string, section: string, value: unknown): void {
    if (section === 'settings') throw new Error('use setSetting for settings');
    this.#update(profile, (data) => {
      const next: ProfileData = { ...data, [section]: value };
      if (value === undefined) delete next[section];
      return next;
    });
  }

  #update(profile: string, change: (data: ProfileData) => ProfileData): void {
    // Read afresh: what another command wrote since is kept, and so is anything beside the profiles.
    const whole = this.whole();
    const profiles = this.profiles();
    this.#write({ ...whole, profiles: { ...profiles, [profile]: change(profiles[profile] ?? {}) } });
  }

  /** The whole file replaced at once: a reader sees the old file or the new one, never half of it. */
  #write(data: Record<string, unknown>): void {
    const temporary = `${this.path}.tmp-${randomBytes(8).toString('hex')}`;
    try {
      const fd = openSync(temporary, 'w', FILE_MODE);
      try {
        writeSync(fd, JSON.stringify(data, undefined, '\t'));
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(temporary, this.path);
    } catch (error) {
      rmSync(temporary, { force: true });
      throw isSystemError(error) ? unwritableConfig(this.dir, error) : error;
    }
  }
}
