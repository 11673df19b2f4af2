/**
 * Whether traces are on, and where they go, from the standard OpenTelemetry
 * environment variables (`OTEL_*`, as every OpenTelemetry SDK reads them)
 * and serve's `--otlp-endpoint`. Tracing is off unless an exporter is
 * named: an OTLP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`,
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `--otlp-endpoint`) or
 * `OTEL_TRACES_EXPORTER=otlp|console`. `OTEL_SDK_DISABLED=true` and
 * `OTEL_TRACES_EXPORTER=none` turn it off whatever else is set.
 *
 * Only the decision and its description live here (no OpenTelemetry module
 * is loaded to make it): the SDK itself (otel.ts) is imported only when
 * tracing is on, so that off costs nothing.
 */
import { UsageError } from '../errors.js';

type OtlpProtocol = 'http/protobuf' | 'http/json' | 'grpc';
const OTLP_PROTOCOLS: readonly OtlpProtocol[] = ['http/protobuf', 'http/json', 'grpc'];

export interface TracingConfig {
  exporter: 'otlp' | 'console';
  protocol: OtlpProtocol;
  /**
   * Where spans are sent, as the exporter is given it: the traces URL of an
   * HTTP protocol (`.../v1/traces`) or the gRPC target (by default the
   * collector on localhost); "standard error" for the console.
   */
  url: string;
  serviceName: string;
  /** OTEL_TRACES_SAMPLER (and its argument), for the banner. */
  sampler: string;
  /** How long one export may take (OTEL_EXPORTER_OTLP_TRACES_TIMEOUT or OTEL_EXPORTER_OTLP_TIMEOUT; default 10 s). */
  timeoutMs: number;
}

export type Env = Readonly<Record<string, string | undefined>>;

const DEFAULT_HTTP_ENDPOINT = 'http://localhost:4318';
/** The OTLP exporters' own default time-out of one export. */
const DEFAULT_EXPORT_TIMEOUT_MS = 10_000;
const DEFAULT_GRPC_ENDPOINT = 'http://localhost:4317';

/** Checks an endpoint URL given on the command line or in the environment; returns it without a trailing slash. */
function parseOtlpEndpoint(text: string, source = '--otlp-endpoint'): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`${source} must be a URL such as http://127.0.0.1:4318; got '${text}'`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError(
      `${source} must be an http:// or https:// URL such as http://127.0.0.1:4318; got '${url.username || url.password ? `${url.protocol}//...` : text}'`,
    );
  }
  if (url.username || url.password) {
    throw new UsageError(`${source} must not carry credentials in the URL; put them in OTEL_EXPORTER_OTLP_HEADERS`);
  }
  return text.replace(/\/+$/, '');
}

function truthy(value: string | undefined): boolean {
  return value !== undefined && /^(true|1|yes|on)$/i.test(value.trim());
}

/**
 * The tracing set-up `env` and the flag ask for, or undefined when tracing
 * is off. Malformed values are refused with a UsageError that names the
 * variable, rather than silently not tracing.
 */
export function resolveTracing(env: Env, flags: { otlpEndpoint?: string | undefined; defaultServiceName?: string } = {}): TracingConfig | undefined {
  if (truthy(env.OTEL_SDK_DISABLED)) return undefined;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter(Boolean);
  if (exporters.includes('none')) return undefined;
  for (const name of exporters) {
    if (name !== 'otlp' && name !== 'console') {
      throw new UsageError(`OTEL_TRACES_EXPORTER '${name}' is not supported; use otlp, console or none`);
    }
  }
  const tracesEndpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || undefined;
  const endpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || undefined;
  const flagEndpoint = flags.otlpEndpoint === undefined ? undefined : parseOtlpEndpoint(flags.otlpEndpoint);
  const wanted = flagEndpoint !== undefined || tracesEndpoint !== undefined || endpoint !== undefined || exporters.length > 0;
  if (!wanted) return undefined;

  const protocolText = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf').trim();
  if (!(OTLP_PROTOCOLS as readonly string[]).includes(protocolText)) {
    throw new UsageError(`OTEL_EXPORTER_OTLP_PROTOCOL '${protocolText}' is not supported; use ${OTLP_PROTOCOLS.join(', ')}`);
  }
  const protocol = protocolText as OtlpProtocol;
  const serviceName = env.OTEL_SERVICE_NAME?.trim() || flags.defaultServiceName || 'miniapp';
  const samplerArg = env.OTEL_TRACES_SAMPLER_ARG?.trim();
  const sampler = `${env.OTEL_TRACES_SAMPLER?.trim() || 'parentbased_always_on'}${samplerArg ? ` (${samplerArg})` : ''}`;
  const timeoutName = env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT !== undefined ? 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT' : 'OTEL_EXPORTER_OTLP_TIMEOUT';
  const timeoutText = env[timeoutName]?.trim();
  if (timeoutText && !/^\d{1,9}$/.test(timeoutText)) throw new UsageError(`${timeoutName} must be a whole number of milliseconds; got '${timeoutText}'`);
  const timeoutMs = timeoutText ? Number(timeoutText) : DEFAULT_EXPORT_TIMEOUT_MS;
  if (exporters.length > 0 && !exporters.includes('otlp') && flagEndpoint === undefined) {
    return { exporter: 'console', protocol, url: 'standard error', serviceName, sampler, timeoutMs };
  }
  // The flag is a convenience for OTEL_EXPORTER_OTLP_ENDPOINT: a base URL, to which HTTP adds /v1/traces.
  // A traces endpoint from the environment is used as it is, as the specification says.
  // The flag wins over the environment (it was typed for this run).
  const base = flagEndpoint ?? (endpoint === undefined ? undefined : parseOtlpEndpoint(endpoint, 'OTEL_EXPORTER_OTLP_ENDPOINT'));
  let url: string;
  if (flagEndpoint === undefined && tracesEndpoint !== undefined) url = parseOtlpEndpoint(tracesEndpoint, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  else if (protocol === 'grpc') url = base ?? DEFAULT_GRPC_ENDPOINT;
  else url = `${base ?? DEFAULT_HTTP_ENDPOINT}/v1/traces`;
  return { exporter: 'otlp', protocol, url, serviceName, sampler, timeoutMs };
}

/** One line for serve's banner and the log: where traces go. */
export function describeTracing(config: TracingConfig | undefined): string {
  if (!config) return 'off (set OTEL_EXPORTER_OTLP_ENDPOINT or --otlp-endpoint)';
  if (config.exporter === 'console') return `as JSON lines on standard error as service ${config.serviceName}, sampler ${config.sampler}`;
  return `OTLP ${config.protocol} to ${config.url} as service ${config.serviceName}, sampler ${config.sampler}`;
}
