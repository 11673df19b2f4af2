/**
 * grpc.health.v1.Health, as grpc-health-check implements it (Check, Watch,
 * List over a map of statuses), with two changes of serve's:
 * - its open Watch calls are kept (`watches`), so that shutdown can end them;
 * - Check's NOT_FOUND names at most MAX_ECHOED_NAME characters of the
 *   service asked for (the library repeated the whole name into the status
 *   trailer; past about 8 KB, a grpcio client heard RESOURCE_EXHAUSTED).
 *
 * Its messages are those of proto/grpc/health/v1/health.proto, loaded with
 * serve's other services (protos.ts): the library loads its own copy of the
 * same file with proto-loader when it is imported, a parse of its own at
 * every start of serve.
 */
import type * as grpc from '@grpc/grpc-js';

/** A status a service may be set to (SERVICE_UNKNOWN is only what Watch says of a service it does not know). */
export type ServingStatus = 'UNKNOWN' | 'SERVING' | 'NOT_SERVING';

/** The longest service name a health Check's NOT_FOUND repeats (a name is the client's, of any length up to the 4 MiB limit). */
const MAX_ECHOED_NAME = 200;
/** List answers RESOURCE_EXHAUSTED past this many services, as the library does. */
const LIST_LIMIT = 100;
const NOT_FOUND = 5;
const RESOURCE_EXHAUSTED = 8;

interface HealthRequest {
  service?: string;
}

export class HealthService {
  readonly #statuses = new Map<string, ServingStatus>();
  /** The watchers of each name watched now: a name leaves with its last watcher. */
  readonly watchers = new Map<string, Set<(status: ServingStatus) => void>>();
  /** Watch calls open now. */
  readonly watches = new Set<grpc.ServerWritableStream<unknown, unknown>>();

  constructor(initial: Record<string, ServingStatus>) {
    for (const [service, status] of Object.entries(initial)) this.#statuses.set(service, status);
  }

  /** Sets a service's status; every watcher of it is told, changed or not (as the library does). */
  setStatus(service: string, status: ServingStatus): void {
    this.#statuses.set(service, status);
    for (const watcher of this.watchers.get(service) ?? []) watcher(status);
  }

  handlers(): grpc.UntypedServiceImplementation {
    return {
      check: (call: grpc.ServerUnaryCall<HealthRequest, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const name = call.request.service ?? '';
        const status = this.#statuses.get(name);
        if (status) {
          callback(null, { status });
          return;
        }
        const shown = name.length > MAX_ECHOED_NAME ? `${name.slice(0, MAX_ECHOED_NAME)}… (${name.length} characters)` : name;
        callback({ code: NOT_FOUND, details: `Health status unknown for service ${shown}` }, null);
      },
      watch: (call: grpc.ServerWritableStream<HealthRequest, unknown>) => {
        const name = call.request.service ?? '';
        this.watches.add(call);
        const watcher = (status: ServingStatus) => call.write({ status });
        const watchers = this.watchers.get(name) ?? new Set();
        this.watchers.set(name, watchers);
        watchers.add(watcher);
        // However the call ends: its watcher goes, and with the last one the name (a client picks the names, so a
        // set kept for each name ever watched grew without bound).
        const forget = () => {
          this.watches.delete(call);
          watchers.delete(watcher);
          if (watchers.size === 0 && this.watchers.get(name) === watchers) this.watchers.delete(name);
        };
        call.once('close', forget);
        call.once('finish', forget);
        call.once('cancelled', forget);
        call.write({ status: this.#statuses.get(name) ?? 'SERVICE_UNKNOWN' });
      },
      list: (_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        if (this.#statuses.size > LIST_LIMIT) {
          callback({ code: RESOURCE_EXHAUSTED, details: 'Too many services to list.' }, null);
          return;
        }
        const statuses: Record<string, { status: ServingStatus }> = {};
        for (const [service, status] of this.#statuses) statuses[service] = { status };
        callback(null, { statuses });
      },
    };
  }
}
