/**
 * The colour policy, kept apart from chalk so that the start-up path can
 * decide about colour without loading it.
 */

export type ColorLevel = 0 | 1 | 2 | 3;

/**
 * chalk does not read NO_COLOR, so the policy lives here. Order, strongest
 * first: `--no-color`, `--color` (colours even when piped, as deep as the
 * terminal type says), FORCE_COLOR (as Node itself treats it, it beats
 * NO_COLOR), NO_COLOR, then whether the stream is a TTY that is not dumb.
 */
export function resolveColorLevel(options: {
  noColorFlag: boolean;
  colorFlag?: boolean | undefined;
  env: Readonly<Record<string, string | undefined>>;
  isTTY: boolean;
}): ColorLevel {
  const { env } = options;
  if (options.noColorFlag) return 0;
  if (options.colorFlag) return env.COLORTERM === 'truecolor' || env.COLORTERM === '24bit' ? 3 : env.TERM?.includes('256') ? 2 : 1;
  const force = env.FORCE_COLOR;
  if (force !== undefined) {
    if (force === '0' || force.toLowerCase() === 'false') return 0;
    if (force === '2') return 2;
    if (force === '3') return 3;
    return 1;
  }
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return 0;
  if (!options.isTTY || env.TERM === 'dumb') return 0;
  if (env.COLORTERM === 'truecolor' || env.COLORTERM === '24bit') return 3;
  if (env.TERM?.includes('256')) return 2;
  return 1;
}
