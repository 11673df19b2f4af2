/**
 * A store's Sql that tells of each statement sent through it (and through
 * its transactions) before sending it, and of each transaction begun: for
 * tests that count a step's round trips or look at its statements' plans.
 */
import type { Param, Sql, TransactionOptions } from '../../src/store/sql.js';

export interface SqlObserver {
  /** A statement about to be sent; `inTransaction`: inside one of this Sql's transactions. */
  statement?(text: string, params: readonly Param[] | undefined, inTransaction: boolean): void;
  /** A transaction about to begin. */
  transaction?(): void;
}

export function observedSql(sql: Sql, observer: SqlObserver): Sql {
  const wrap = (inner: Sql, inside: boolean): Sql => {
    const seen = (text: string, params?: readonly Param[]) => observer.statement?.(text, params, inside);
    return {
      dialect: inner.dialect,
      all: <T>(text: string, params?: readonly Param[]) => {
        seen(text, params);
        return inner.all<T>(text, params);
      },
      one: <T>(text: string, params?: readonly Param[]) => {
        seen(text, params);
        return inner.one<T>(text, params);
      },
      run: (text: string, params?: readonly Param[]) => {
        seen(text, params);
        return inner.run(text, params);
      },
      exec: (text: string) => inner.exec(text),
      afterCommit: (hook: () => void) => inner.afterCommit(hook),
      transaction: <T>(work: (tx: Sql) => Promise<T>, options?: TransactionOptions) => {
        observer.transaction?.();
        return inner.transaction((tx) => work(wrap(tx, true)), options);
      },
    };
  };
  return wrap(sql, false);
}
