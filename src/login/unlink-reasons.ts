/**
 * Why a login connection was removed: the `referrer` of the unlink callback
 * (spec 000, "Events"). The spec names three; the vendor's documentation
 * writes the platform-leave reason `WITHDRAWAL_TOSS` where the spec writes
 * `WITHDRAWAL_PLATFORM` (FIELD-NOTES, "Unlink callback"), so both are known.
 * Any other value is recorded as it came, as unknown.
 */
const UNLINK_REASONS = {
  UNLINK: 'the user removed the connection',
  WITHDRAWAL_TERMS: 'the user withdrew consent to the terms',
  WITHDRAWAL_PLATFORM: 'the user left the host platform',
  WITHDRAWAL_TOSS: "the user left the host platform (the vendor's name for WITHDRAWAL_PLATFORM)",
} as const;

export type UnlinkReason = keyof typeof UNLINK_REASONS;

/** The known reasons, the spec's first. */
export const UNLINK_REASON_NAMES = Object.keys(UNLINK_REASONS) as UnlinkReason[];

export function isKnownUnlinkReason(referrer: string | null | undefined): referrer is UnlinkReason {
  return typeof referrer === 'string' && Object.hasOwn(UNLINK_REASONS, referrer);
}

/** What a recorded referrer means, for people: its meaning, or that it is unknown (or absent). */
export function unlinkMeaning(referrer: string | null | undefined): string {
  if (isKnownUnlinkReason(referrer)) return UNLINK_REASONS[referrer];
  return referrer === null || referrer === undefined || referrer === '' ? 'no reason given' : 'unknown reason, recorded as it came';
}
