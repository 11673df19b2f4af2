/** The fault proxy of test/helpers/tcp-proxy.js (plain JavaScript, so that benchmarks use it too). */
export type ProxyMode = 'pass' | 'blackhole' | 'reset';

export interface TcpProxy {
  port: number;
  readonly mode: ProxyMode;
  setMode(mode: ProxyMode): void;
  /** Where new connections go from now on. */
  retarget(target: { host: string; port: number }): void;
  /** Connections open through the proxy now. */
  connections(): number;
  /** Cuts every connection and stops listening. */
  stop(): Promise<void>;
}

export function startTcpProxy(initial: { host: string; port: number }): Promise<TcpProxy>;
