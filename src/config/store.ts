/**
 * The config file, on `conf`: one JSON file holding named profiles, each a
 * separate namespace of settings plus state that later commands keep there
 * (stored tokens). Written atomically with mode 0600; an older, looser file
 * is tightened on open. A file that is not valid JSON is reported, never
 * cleared.
 */
import { mkdirSync } from 'node:fs';
import Conf from 'conf';
import { ConfigFile, FILE_MODE, unreadableConfig, type ProfileData } from './file.js';
import { CONFIG_NAME, configFilePath } from './paths.js';

export type { ProfileData } from './file.js';

interface FileShape {
  profiles: Record<string, ProfileData>;
  [other: string]: unknown;
}

const DIR_MODE = 0o700;

export class ConfigStore extends ConfigFile {
  readonly #conf: Conf<FileShape>;

  constructor(dir: string) {
    mkdirSync(dir, { recursive: true, mode: DIR_MODE });
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
      throw unreadableConfig(configFilePath(dir), error);
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
    this.#conf.set('profiles', { ...profiles, [profile]: change(profiles[profile] ?? {}) });
  }
}
