/**
 * A statement put together from pieces, each taking its values' `$n`
 * placeholders in turn: multi-row VALUES lists, and on PostgreSQL a step's
 * writes as one statement of data-modifying CTEs, whose pieces come from
 * the modules that own the tables.
 */
import type { Param } from '../../store/sql.js';

export class Statement {
  readonly params: Param[] = [];

  /** The placeholder of `value` (a new one each time it is called). */
  $(value: Param): string {
    this.params.push(value);
    return `$${this.params.length}`;
  }

  /**
   * `SELECT * FROM unnest($1::int[], $2::text[], ...) AS r (a, b, ...)`:
   * rows given as arrays, a column each (PostgreSQL), so that the
   * statement's text is one whatever their number and its plan is kept.
   */
  unnest(columns: Record<string, [values: readonly (string | number | boolean | null)[], type: string]>): string {
    const arrays = Object.values(columns).map(([values, type]) => `${this.$(values as Param)}::${type}[]`);
    return `SELECT * FROM unnest(${arrays.join(', ')}) AS r (${Object.keys(columns).join(', ')})`;
  }

  /** `($1, $2), ($3, $4), ...`: the rows of a multi-row VALUES. */
  rows(rows: readonly (readonly Param[])[]): string {
    return rows.map((row) => `(${row.map((value) => this.$(value)).join(', ')})`).join(', ');
  }
}
