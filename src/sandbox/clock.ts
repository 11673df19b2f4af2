/**
 * The sandbox's own clock: real time plus an offset that `miniapp sandbox
 * advance` moves forward, so that an hour-long token expires in a second.
 */
export class SandboxClock {
  #offsetMs = 0;

  constructor(private readonly base: () => number = Date.now) {}

  now(): number {
    return this.base() + this.#offsetMs;
  }

  advance(ms: number): number {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError('the sandbox clock only moves forward');
    this.#offsetMs += ms;
    return this.now();
  }

  get offsetMs(): number {
    return this.#offsetMs;
  }
}
