/**
 * The store's query interface (sql.ts) with a span for every statement and
 * transaction, when tracing is on. postgres and better-sqlite3 have no
 * instrumentation of their own that fits both, so the one seam every
 * repository goes through is wrapped once.
 *
 * A statement's span is named by what it does to which table ("SELECT
 * users", "INSERT webhook_deliveries"), as OpenTelemetry's database
 * conventions name query summaries, and carries the statement's text with
 * its placeholders (`$1`), never a parameter's value. Spans start only
 * below an active span: the background work of serve (readiness probes,
 * the webhook dispatcher's polls, sweeps) makes no traces of its own.
 */
import type { Span, Telemetry } from '../telemetry/telemetry.js';
import { SPAN_KIND } from '../telemetry/telemetry.js';
import type { Param, Sql, TransactionOptions } from './sql.js';

const OPERATION =
  /^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|DROP|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|PRAGMA|LOCK|NOTIFY|LISTEN|VACUUM|ANALYZE|SET|SHOW|TRUNCATE|COPY)\b/i;
const TABLE = /\b(?:FROM|INTO|UPDATE|JOIN|TABLE)\s+(?:ONLY\s+)?("?[A-Za-z_][\w.]*"?)/i;

/** "SELECT users" for `SELECT ... FROM users WHERE ...`: the span name of a statement. */
export function statementSummary(text: string): { operation: string; table: string | undefined; name: string } {
  const operation = (OPERATION.exec(text)?.[1] ?? 'QUERY').toUpperCase();
  // A WITH names its tables inside; the main statement follows the last parenthesis of the CTEs.
  const main = operation === 'WITH' ? text.slice(text.lastIndexOf(')') + 1) : text;
  const mainOperation = operation === 'WITH' ? (OPERATION.exec(main)?.[1]?.toUpperCase() ?? 'WITH') : operation;
  const table = (TABLE.exec(main) ?? TABLE.exec(text))?.[1]?.replaceAll('"', '');
  return { operation: mainOperation, table, name: table ? `${mainOperation} ${table}` : mainOperation };
}

const DB_SYSTEM = { sqlite: 'sqlite', postgres: 'postgresql' } as const;

export class TracedSql implements Sql {
  readonly dialect: Sql['dialect'];
  /** Summaries by statement text: the texts are the repositories' constants, a bounded set. */
  readonly #summaries: Map<string, ReturnType<typeof statementSummary>>;

  constructor(
    readonly inner: Sql,
    readonly telemetry: Telemetry,
    summaries = new Map<string, ReturnType<typeof statementSummary>>(),
  ) {
    this.dialect = inner.dialect;
    this.#summaries = summaries;
  }

  #start(text: string): Span | undefined {
    let summary = this.#summaries.get(text);
    if (!summary) {
      summary = statementSummary(text);
      this.#summaries.set(text, summary);
    }
    return this.telemetry.startSpan(summary.name, {
      kind: SPAN_KIND.CLIENT,
      requireParent: true,
      attributes: {
        'db.system.name': DB_SYSTEM[this.dialect],
        'db.operation.name': summary.operation,
        ...(summary.table ? { 'db.collection.name': summary.table } : {}),
        'db.query.summary': summary.name,
        'db.query.text': text,
      },
    });
  }

  async #traced<T>(text: string, run: () => Promise<T>): Promise<T> {
    const span = this.#start(text);
    if (!span) return run();
    try {
      return await run();
    } catch (error) {
      this.telemetry.fail(span, (error as { code?: string })?.code ?? (error as Error)?.constructor?.name ?? 'Error');
      throw error;
    } finally {
      span.end();
    }
  }

  all<T>(text: string, params?: readonly Param[]): Promise<T[]> {
    return this.#traced(text, () => this.inner.all<T>(text, params));
  }

  one<T>(text: string, params?: readonly Param[]): Promise<T | undefined> {
    return this.#traced(text, () => this.inner.one<T>(text, params));
  }

  run(text: string, params?: readonly Param[]): Promise<number> {
    return this.#traced(text, () => this.inner.run(text, params));
  }

  exec(text: string): Promise<void> {
    return this.#traced(text, () => this.inner.exec(text));
  }

  afterCommit(hook: () => void): void {
    this.inner.afterCommit(hook);
  }

  transaction<T>(work: (tx: Sql) => Promise<T>, options?: TransactionOptions): Promise<T> {
    return this.telemetry.inSpan(
      'transaction',
      { kind: SPAN_KIND.CLIENT, requireParent: true, attributes: { 'db.system.name': DB_SYSTEM[this.dialect] } },
      () => this.inner.transaction((tx) => work(tx === this.inner ? this : new TracedSql(tx, this.telemetry, this.#summaries)), options),
    );
  }
}
