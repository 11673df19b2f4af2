/**
 * Graph API versions and when Meta retires them.
 *
 * Meta's versioning policy (Platform Versioning, "Version Schedules"): a
 * version is usable until two years after the release of the version that
 * follows it; a call to a version that is no longer usable, or a call with
 * no version segment from an app whose own version is gone, is served at
 * the oldest version still usable (the Graph API upgrades it; only the
 * Marketing API refuses with an error). The answer's `facebook-api-version`
 * header names the version that served it.
 *
 * Release dates are Meta's changelog and release posts. v25.0's is not
 * known to this table with the same certainty (early 2026): it only bounds
 * v24.0's life, which no check here reaches before 2027.
 *
 * Pure data and functions, no imports: doctor and the sandbox both read it.
 */

interface GraphVersion {
  version: string;
  /** ISO date of the release. */
  released: string;
}

/** Oldest first. */
const GRAPH_VERSIONS: readonly GraphVersion[] = [
  { version: 'v10.0', released: '2021-02-23' },
  { version: 'v11.0', released: '2021-06-08' },
  { version: 'v12.0', released: '2021-09-14' },
  { version: 'v13.0', released: '2022-02-08' },
  { version: 'v14.0', released: '2022-05-25' },
  { version: 'v15.0', released: '2022-09-15' },
  { version: 'v16.0', released: '2023-02-02' },
  { version: 'v17.0', released: '2023-05-23' },
  { version: 'v18.0', released: '2023-09-12' },
  { version: 'v19.0', released: '2024-01-23' },
  { version: 'v20.0', released: '2024-05-21' },
  { version: 'v21.0', released: '2024-10-02' },
  { version: 'v22.0', released: '2025-01-21' },
  { version: 'v23.0', released: '2025-05-29' },
  { version: 'v24.0', released: '2025-10-08' },
  { version: 'v25.0', released: '2026-02-18' },
];

/** The newest version this table knows: what doctor suggests. */
export const CURRENT_GRAPH_VERSION = GRAPH_VERSIONS.at(-1)!.version;

/** `v18.0` -> 18, or undefined for anything else. */
export function versionNumber(text: string): number | undefined {
  const match = /^v(\d+)\.(\d+)$/.exec(text);
  return match ? Number(match[1]) + Number(match[2]) / 10 : undefined;
}

export function isVersionSegment(text: string): boolean {
  return versionNumber(text) !== undefined;
}

/** When `version` stops being usable (ms), or undefined while no later version is out (or the version is unknown). */
export function retiresAt(version: string): number | undefined {
  const n = versionNumber(version);
  if (n === undefined) return undefined;
  const next = GRAPH_VERSIONS.find((v) => versionNumber(v.version)! > n);
  if (!next) return undefined;
  const [year, month, day] = next.released.split('-').map(Number) as [number, number, number];
  return Date.UTC(year + 2, month - 1, day);
}

/** Whether `version` is past its retirement at `now`. */
function isRetired(version: string, now: number): boolean {
  const at = retiresAt(version);
  return at !== undefined && at <= now;
}

/** The oldest version still usable at `now`: where a retired or unversioned call is served. */
export function oldestUsable(now: number): string {
  return (GRAPH_VERSIONS.find((v) => !isRetired(v.version, now)) ?? GRAPH_VERSIONS.at(-1)!).version;
}

/** Whether Meta has released `version` (by this table): v99.0 has not. */
export function isKnownOrOlder(version: string): boolean {
  const n = versionNumber(version);
  return n !== undefined && n <= versionNumber(CURRENT_GRAPH_VERSION)!;
}

/** The version that serves a call asked at `asked` (undefined: no version segment) at `now`. */
export function servingVersion(asked: string | undefined, now: number): string {
  if (asked === undefined || isRetired(asked, now)) return oldestUsable(now);
  return asked;
}

export interface VersionAdvice {
  status: 'ok' | 'warn';
  detail: string;
}

/** What doctor says of the configured graph-version at `now`. */
export function adviseVersion(version: string, now: number): VersionAdvice {
  const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
  if (version === '') {
    return { status: 'ok', detail: `none: calls are served at the app's default version (the oldest usable, ${oldestUsable(now)}, for an app that old)` };
  }
  const at = retiresAt(version);
  if (at !== undefined && at <= now) {
    return {
      status: 'warn',
      detail:
        `${version} was retired on ${day(at)}: Meta serves its calls at ${oldestUsable(now)}, whose metrics differ; ` +
        `set the current one: \`miniapp config set graph-version ${CURRENT_GRAPH_VERSION}\``,
    };
  }
  if (!isKnownOrOlder(version)) return { status: 'warn', detail: `${version} is newer than any version miniapp knows (${CURRENT_GRAPH_VERSION})` };
  return { status: 'ok', detail: at === undefined ? `${version}, the current version` : `${version}, usable until ${day(at)}` };
}
