/**
 * The terms a first-time user is asked to agree to (spec 000, "Flow" step 1,
 * and the console's "required and optional terms, each with a terms tag").
 * The tags agreed to come back in login-me's `agreedTerms`. The sandbox
 * starts with DEFAULT_TERMS; `--required-term` and `--optional-term`
 * replace them.
 */
import { PartnerFailure } from './failure.js';

export interface Term {
  /** The terms tag, as registered in the console (login-me's `agreedTerms` lists these). */
  tag: string;
  /** What the consent screen shows. */
  title: string;
  required: boolean;
}

export const DEFAULT_TERMS: readonly Term[] = [
  { tag: 'terms_service_required', title: 'Terms of service', required: true },
  { tag: 'terms_privacy_required', title: 'Collection and use of personal information', required: true },
  { tag: 'terms_marketing_optional', title: 'Marketing messages and benefits', required: false },
];

const TAG = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const MAX_TITLE = 200;

/** `TAG=TITLE` (a flag's value) as a term; throws an Error whose message names `flag`. */
export function parseTerm(text: string, required: boolean, flag: string): Term {
  const at = text.indexOf('=');
  const tag = (at < 0 ? text : text.slice(0, at)).trim();
  const title = at < 0 ? '' : text.slice(at + 1).trim();
  if (!TAG.test(tag)) {
    throw new Error(
      `${flag} must be TAG=TITLE, the tag of letters, digits, _ . - (at most 64), such as terms_service_required=Terms of service; got "${text}"`,
    );
  }
  // Control characters would reach the consent screen and the terminal.
  if (!title || title.length > MAX_TITLE || /[\p{Cc}]/u.test(title)) {
    throw new Error(`${flag} ${tag}: the title after "=" must be 1 to ${MAX_TITLE} printable characters; got "${text}"`);
  }
  return { tag, title, required };
}

/** The terms in effect: at least one, no tag twice. */
export function checkTerms(terms: readonly Term[]): Term[] {
  if (terms.length === 0) throw new Error('the consent screen needs at least one term');
  const seen = new Set<string>();
  for (const term of terms) {
    if (seen.has(term.tag)) throw new Error(`the terms tag ${term.tag} is given twice`);
    seen.add(term.tag);
  }
  return terms.map((term) => ({ ...term }));
}

export function requiredTags(terms: readonly Term[]): string[] {
  return terms.filter((term) => term.required).map((term) => term.tag);
}

/**
 * What a user agreed to on the consent screen, in the terms' order: every
 * required tag must be there, and only tags the screen showed.
 */
export function agreedTags(terms: readonly Term[], given: unknown): string[] {
  if (!Array.isArray(given) || given.some((tag) => typeof tag !== 'string')) {
    throw new PartnerFailure(400, 'BAD_REQUEST', 'agreedTerms must be an array of terms tags');
  }
  const known = new Set(terms.map((term) => term.tag));
  const unknown = given.filter((tag) => !known.has(tag));
  if (unknown.length > 0) throw new PartnerFailure(400, 'UNKNOWN_TERMS', `no such terms tag: ${unknown.join(', ')}`);
  const missing = requiredTags(terms).filter((tag) => !given.includes(tag));
  if (missing.length > 0) {
    throw new PartnerFailure(400, 'REQUIRED_TERMS_MISSING', `every required term must be accepted to log in; missing ${missing.join(', ')}`);
  }
  return terms.filter((term) => given.includes(term.tag)).map((term) => term.tag);
}
