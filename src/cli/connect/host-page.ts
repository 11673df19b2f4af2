/**
 * The host page's flags, shared by `serve` and `sandbox`: the mini-app it
 * shows (--app-url) and the consent screen's terms (--required-term,
 * --optional-term, each TAG=TITLE and repeatable; given, they replace the
 * default terms).
 */
import type { Command } from '../commander.js';
import { UsageError } from '../../errors.js';
import { checkAppUrl } from '../../sandbox/host/app-url.js';
import { checkTerms, DEFAULT_TERMS, parseTerm, type Term } from '../../sandbox/partner/terms.js';

export interface HostPageFlags {
  appUrl?: string;
  requiredTerm: string[];
  optionalTerm: string[];
}

const collect = (value: string, all: string[]) => [...all, value];

export function addHostPageOptions(command: Command): Command {
  const defaults = (required: boolean) =>
    DEFAULT_TERMS.filter((term) => term.required === required)
      .map((term) => term.tag)
      .join(', ');
  return command
    .option(
      '--app-url <url>',
      'the mini-app the host page (/host/) shows in its phone frame, e.g. your dev server http://127.0.0.1:5173/ (default: a built-in demo)',
    )
    .option(
      '--required-term <tag=title>',
      `a term the consent screen requires (repeatable; with --optional-term, replaces the default terms: required ${defaults(true)})`,
      collect,
      [] as string[],
    )
    .option('--optional-term <tag=title>', `a term the consent screen offers (repeatable; default: ${defaults(false)})`, collect, [] as string[]);
}

/** The flags as the host page's options; the terms are undefined unless a term flag was given (the defaults). */
export function hostPageOptions(flags: HostPageFlags): { appUrl: string | undefined; terms: Term[] | undefined } {
  let appUrl: string | undefined;
  let terms: Term[] | undefined;
  try {
    appUrl = flags.appUrl === undefined ? undefined : checkAppUrl(flags.appUrl).href;
    const given = [
      ...flags.requiredTerm.map((text) => parseTerm(text, true, '--required-term')),
      ...flags.optionalTerm.map((text) => parseTerm(text, false, '--optional-term')),
    ];
    terms = given.length > 0 ? checkTerms(given) : undefined;
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  return { appUrl, terms };
}

/** Whether any host page flag was given (serve refuses them in front of a real partner API). */
export function hostPageFlagsGiven(flags: HostPageFlags): boolean {
  return flags.appUrl !== undefined || flags.requiredTerm.length > 0 || flags.optionalTerm.length > 0;
}
