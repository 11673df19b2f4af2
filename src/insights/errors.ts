/**
 * Graph API error bodies to typed errors: what failed, in words, and what
 * to do next. The token never appears in a message: API messages and URLs
 * pass through `redact` first.
 */
import { AuthError, ExitCode, MiniappError, UpstreamError, type ErrorOptions } from '../errors.js';
import { RETIRED_METRICS, successorHint } from './metrics.js';

/** Spec 001, "Errors": `{ error: { message, type, code } }`, plus what the real API adds. */
export interface GraphErrorBody {
  message: string;
  type?: string;
  code?: number;
  error_subcode?: number;
  error_user_title?: string;
  error_user_msg?: string;
  fbtrace_id?: string;
  is_transient?: boolean;
}

/** Throttling codes seen (FIELD-NOTES): app 4, user 17, page 32, per-API 613, and the business use case range. */
export function isThrottleCode(code: number | undefined): boolean {
  return code === 4 || code === 17 || code === 32 || code === 613 || (code !== undefined && code >= 80000 && code <= 80014);
}

const TOKEN_HINT = 'create a new token (a page token is recommended) and store it with `miniapp config set graph-token -` or MINIAPP_GRAPH_TOKEN';

/** Removes the access_token parameter from every URL in `text`, and the token itself wherever it appears. */
export function redact(text: string, token?: string): string {
  let out = text.replace(/https?:\/\/[^\s"'<>]+/g, (url) => {
    try {
      const parsed = new URL(url);
      if (!parsed.searchParams.has('access_token')) return url;
      parsed.searchParams.delete('access_token');
      return parsed.href;
    } catch {
      return url;
    }
  });
  out = out.replace(/access_token=[^&\s"'#]*/g, 'access_token=***');
  if (token && token.length >= 4) out = out.split(token).join('***');
  return out;
}

/** A URL fit for a message or a log: no access token, and only the path and query. */
export function redactUrl(url: string | URL): string {
  const parsed = new URL(url);
  parsed.searchParams.delete('access_token');
  return `${parsed.origin}${decodeURIComponent(parsed.pathname)}${parsed.search ? `?${decodeURIComponent(parsed.searchParams.toString())}` : ''}`;
}

/** An error body from a parsed response, if it holds one. */
export function graphErrorOf(body: unknown): GraphErrorBody | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const error = (body as { error?: unknown }).error;
  if (typeof error !== 'object' || error === null) return undefined;
  const { message, code } = error as { message?: unknown; code?: unknown };
  return { ...(error as GraphErrorBody), message: typeof message === 'string' ? message : 'no message', code: typeof code === 'number' ? code : undefined };
}

function describe(graph: GraphErrorBody, token: string | undefined): string {
  const code = graph.code === undefined ? '' : ` ${graph.code}${graph.error_subcode ? `/${graph.error_subcode}` : ''}`;
  const detail = graph.error_user_msg && graph.error_user_msg !== graph.message ? ` (${graph.error_user_msg})` : '';
  return `graph API error${code}: ${redact(graph.message, token)}${detail ? redact(detail, token) : ''}`;
}

/** The graph API answered with an error that has no more specific class. */
export class GraphApiError extends MiniappError {
  override readonly exitCode: ExitCode;
  override readonly code: string;
  constructor(
    message: string,
    readonly graph: GraphErrorBody,
    readonly status: number,
    options: ErrorOptions & { exitCode?: ExitCode; code?: string } = {},
  ) {
    super(message, options);
    this.exitCode = options.exitCode ?? ExitCode.upstream;
    this.code = options.code ?? 'GRAPH_ERROR';
  }
}

/** The API refused one or more of the requested metrics (code 100). Exit 2: the request needs changing. */
export class MetricRejectedError extends MiniappError {
  override readonly exitCode = ExitCode.usage;
  override readonly code: string = 'METRIC_REJECTED';
  constructor(
    message: string,
    /** The requested metrics the API named or left out of its list of valid ones. */
    readonly rejected: readonly string[],
    readonly graph: GraphErrorBody,
    options: ErrorOptions = {},
  ) {
    super(message, options);
  }

  /** Whether every rejected name is one the real API retired. */
  get onlyRetired(): boolean {
    return this.rejected.length > 0 && this.rejected.every((metric) => RETIRED_METRICS[metric] !== undefined);
  }
}

/** The account is personal: insights need a business or creator account. */
export class NotBusinessAccountError extends MiniappError {
  override readonly code: string = 'NOT_BUSINESS_ACCOUNT';
}

/** Throttled, and still throttled after every retry. */
export class RateLimitError extends UpstreamError {
  constructor(message: string, options: ErrorOptions = {}) {
    super(message, { ...options, code: 'RATE_LIMITED' });
  }
}

const PERMISSION = /\b(social_[a-z_]+|pages_[a-z_]+|business_management|instagram_[a-z_]+|read_insights|ads_[a-z_]+)\b/;

/** Which of the requested metrics a code-100 message is about, if it is about metrics at all. */
function rejectedMetrics(message: string, requested: readonly string[]): string[] | undefined {
  const valid = /must be one of the following values:\s*(.+)$/s.exec(message);
  if (valid) {
    const allowed = new Set(valid[1]!.split(',').map((m) => m.trim().replace(/\.$/, '')));
    const outside = requested.filter((metric) => !allowed.has(metric));
    if (outside.length > 0) return outside;
    const index = /metric\[(\d+)\]/.exec(message);
    const named = index ? requested[Number(index[1])] : undefined;
    return named ? [named] : [...requested];
  }
  if (!/metric/i.test(message)) return undefined;
  const named = requested.filter((metric) => new RegExp(`(^|[^A-Za-z0-9_])${metric}($|[^A-Za-z0-9_])`).test(message));
  return named.length > 0 ? named : undefined;
}

export interface ErrorContext {
  status: number;
  /** The request, redacted: for messages. */
  what: string;
  /** Metrics the request asked for, to name the one a code-100 error is about. */
  metrics: readonly string[];
  token: string | undefined;
}

/** The typed error for a graph error body (throttling is handled before this, by the client). */
export function mapGraphError(graph: GraphErrorBody, context: ErrorContext): MiniappError {
  const text = describe(graph, context.token);
  const message = graph.message;
  if (/business or creator account|must be an? business account|not an? (business|professional) account/i.test(message)) {
    return new NotBusinessAccountError(`the account is not a business or creator account, and only those have insights (${text})`, {
      hint: 'convert the account to business or creator and link it to a page, then create a new token',
    });
  }
  if (graph.code === 190) {
    const what =
      graph.error_subcode === 463
        ? 'the graph API token has expired'
        : graph.error_subcode === 460
          ? 'the graph API token was invalidated (the password changed)'
          : 'the graph API rejected the token (invalid or expired)';
    return new AuthError(`${what}: ${text}`, { hint: TOKEN_HINT, code: 'GRAPH_TOKEN_INVALID' });
  }
  if (graph.code === 2500 && /access token/i.test(message)) {
    return new AuthError(`the graph API wants an access token: ${text}`, { hint: TOKEN_HINT, code: 'GRAPH_TOKEN_MISSING' });
  }
  if (graph.code === 10 || (graph.code !== undefined && graph.code >= 200 && graph.code <= 299)) {
    const permission = PERMISSION.exec(message)?.[1];
    return new AuthError(permission ? `the graph API token lacks the ${permission} permission: ${text}` : `the graph API token lacks a permission: ${text}`, {
      hint: `add ${permission ?? 'the permission'} to the app, grant it, then ${TOKEN_HINT}`,
      code: 'GRAPH_PERMISSION',
    });
  }
  if (graph.code === 100) {
    const rejected = rejectedMetrics(message, context.metrics);
    if (rejected) {
      const successors = successorHint(rejected);
      const valid = /must be one of the following values:\s*(.+)$/s.exec(message)?.[1];
      return new MetricRejectedError(`the graph API rejected the metric${rejected.length > 1 ? 's' : ''} ${rejected.join(', ')}: ${text}`, rejected, graph, {
        hint: successors
          ? `retired by the graph API; ask for the successors instead: ${successors}`
          : valid
            ? `metrics this object answers: ${valid}`
            : 'check the metric names (`miniapp insights --help` lists them by media type)',
      });
    }
    if (graph.error_subcode === 2108006) {
      return new GraphApiError(`no insights for media posted before the account became a business account (${context.what}): ${text}`, graph, context.status, {
        exitCode: ExitCode.failure,
        code: 'GRAPH_MEDIA_PREDATES_BUSINESS',
        hint: 'insights exist only for media posted after the conversion to a business or creator account',
      });
    }
    if (graph.error_subcode === 33) {
      return new GraphApiError(`no object that this token can read at ${context.what}: ${text}`, graph, context.status, {
        exitCode: ExitCode.failure,
        code: 'GRAPH_NOT_FOUND',
        hint: 'check the ID (`miniapp insights media` lists media IDs; stories disappear after 24 hours) and that the token reaches its account',
      });
    }
    // Any other invalid parameter: the request needs changing.
    return new GraphApiError(`the graph API refused a parameter: ${text} (GET ${context.what})`, graph, context.status, {
      exitCode: ExitCode.usage,
      code: 'GRAPH_INVALID_PARAMETER',
      hint: 'check the flags against `miniapp insights COMMAND --help`',
    });
  }
  return new GraphApiError(`${text} (GET ${context.what}, HTTP ${context.status})`, graph, context.status);
}
