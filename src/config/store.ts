/**
 * The config file, on `conf`: one JSON file holding named profiles, each a
 * separate namespace of settings plus state that later commands keep there
 * (stored tokens). Written atomically with mode 0600; an older, looser file
 * is tightened on open. A file that is not valid JSON is reported, never
 * cleared.
 */
import Conf from 'conf';
import { ensureDirectory } from '../directories.js';
import { ConfigError } from '../errors.js';
import { CONFIG_DIR_HINT, ConfigFile, FILE_MODE, unreadableConfig, type ProfileData } from './file.js';
import { CONFIG_NAME, configFilePath } from './paths.js';

export type { ProfileData } from './file.js';

interface FileShape {
  profiles: Record<string, ProfileData>;
  [other: string]: unknown;
}

const DIR_HINT = CONFIG_DIR_HINT;

/** A write of the config file that failed (a read-only dir or disk, no space): said as a write, with the directory. */
function unwritableConfig(dir: string, error: unknown): ConfigError {
  const code = (error as NodeJS.ErrnoException).code;
  return new ConfigError(`cannot write the config file ${configFilePath(dir)}: ${code ?? (error as Error).message} (the config dir is ${dir})`, {
    hint: DIR_HINT,
    cause: error,
  });
}

const isSystemError = (error: unknown) => typeof (error as NodeJS.ErrnoException | undefined)?.code === 'string' && /^E[A-Z]+$/.test((error as NodeJS.ErrnoException).code!);

export class ConfigStore extends ConfigFile {
  readonly #conf: Conf<FileShape>;

  constructor(dir: string) {
    // One level at a time, each failure with the directory's name (a file on the way, a read-only file system).
    ensureDirectory(dir, 'the config dir', DIR_HINT);
    // Tightens the file and reports one that is not valid JSON, before conf could touch it.
    super(dir);
    try {
      this.#conf = new Conf<FileShape>({
        cwd: dir,
        configName: CONFIG_NAME,
        configFileMode: FILE_MODE,
        accessPropertiesByDotNotation: false,
        clearInvalidConfig: false,
        watch: false,
        defaults: { profiles: {} },
      });
    } catch (error) {
      // The file was read above: a system error here is conf writing it (its defaults, on a first run).
      throw isSystemError(error) ? unwritableConfig(dir, error) : unreadableConfig(configFilePath(dir), error);
    }
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
    const profiles = this.profiles();
    try {
      this.#conf.set('profiles', { ...profiles, [profile]: change(profiles[profile] ?? {}) });
    } catch (error) {
      throw isSystemError(error) ? unwritableConfig(this.dir, error) : error;
    }
  }
}
