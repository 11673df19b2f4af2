/** A failure the sandbox answers with: HTTP status, errorCode and reason. */
export class PartnerFailure extends Error {
  constructor(
    readonly status: number,
    readonly errorCode: string,
    readonly reason: string,
  ) {
    super(`${errorCode}: ${reason}`);
  }
}
