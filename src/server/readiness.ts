/**
 * Whether serve can do its work now: its database answers. Liveness
 * (/health) says the process runs; readiness (/health/ready, and the gRPC
 * health service's SERVING / NOT_SERVING) says a load balancer may send it
 * traffic. While the database is unreachable the instance is not ready,
 * and it becomes ready again by itself when the database is back.
 */
import type { Store } from '../store/store.js';

export interface ReadinessOptions {
  store: Store;
  /** Told each time readiness changes (the gRPC health statuses follow it). */
  onChange?: (ready: boolean) => void;
  /** How often the database is asked while all is well, and while it is not. */
  intervalMs?: number;
  retryMs?: number;
  /** How long one check may take before it counts as a failure. */
  checkTimeoutMs?: number;
}

export class Readiness {
  #ready = true;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  #reason: string | undefined;
  #draining = false;

  constructor(private readonly options: ReadinessOptions) {}

  get ready(): boolean {
    return this.#ready;
  }

  /** Why the instance is not ready, for the readiness answer. */
  get reason(): string | undefined {
    return this.#reason;
  }

  /** Whether the instance is shutting down (see `drain`). */
  get draining(): boolean {
    return this.#draining;
  }

  /**
   * The instance is shutting down: not ready from now on, whatever the
   * database says, so that load balancers move traffic away while it still
   * answers what reaches it (serve's drain period).
   */
  drain(): void {
    if (this.#draining) return;
    this.#set(false, 'draining: this instance is shutting down');
    this.#draining = true;
  }

  /** Asks the database now, records the answer and returns it. */
  async check(): Promise<boolean> {
    if (this.#draining) return false;
    const timeoutMs = this.options.checkTimeoutMs ?? 2_000;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.options.store.ready(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
      this.#set(true, undefined);
    } catch (error) {
      this.#set(false, (error as Error).message);
    } finally {
      clearTimeout(timer);
    }
    return this.#ready;
  }

  /** Checks on a timer (PostgreSQL only: SQLite in the data dir is always there). */
  start(): void {
    if (this.options.store.kind !== 'postgres') return;
    const loop = async () => {
      if (this.#stopped) return;
      await this.check();
      if (this.#stopped) return;
      this.#timer = setTimeout(loop, this.#ready ? (this.options.intervalMs ?? 5_000) : (this.options.retryMs ?? 1_000));
      this.#timer.unref();
    };
    void loop();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #set(ready: boolean, reason: string | undefined): void {
    // A check that was under way when the drain began says nothing any more.
    if (this.#draining) return;
    this.#reason = reason;
    if (ready === this.#ready) return;
    this.#ready = ready;
    this.options.onChange?.(ready);
  }
}
