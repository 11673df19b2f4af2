/**
 * `promtool check metrics` for tests, since CI has no promtool: a parser of
 * the Prometheus text format (0.0.4) that builds metric families the way
 * expfmt's TextParser does, and the lint rules of client_golang's
 * prometheus/testutil/promlint (validations/*.go at 89c60c05), with their
 * messages. `checkMetrics` returns promtool's lines, so an empty list is
 * what a silent promtool means. A scrape promtool could not parse throws.
 */

type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  /** Absent when there is no HELP line, or it has no text (expfmt leaves Help unset then). */
  help: string | undefined;
  type: MetricType;
  samples: Sample[];
}

export interface Problem {
  metric: string;
  text: string;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES: readonly MetricType[] = ['counter', 'gauge', 'histogram', 'summary', 'untyped'];

class ParseError extends Error {
  constructor(line: number, message: string) {
    super(`text format parsing error in line ${line}: ${message}`);
  }
}

function unescaped(text: string, line: number, quotes: boolean): string {
  return text.replace(/\\(.)/g, (_all, char: string) => {
    if (char === '\\') return '\\';
    if (char === 'n') return '\n';
    if (char === '"' && quotes) return '"';
    throw new ParseError(line, `invalid escape sequence '\\${char}'`);
  });
}

function parseValue(text: string, line: number): number {
  const lower = text.toLowerCase();
  if (lower === '+inf' || lower === 'inf') return Infinity;
  if (lower === '-inf') return -Infinity;
  if (lower === 'nan') return NaN;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) throw new ParseError(line, `expected float as value, got "${text}"`);
  return Number(text);
}

/** `{a="1",b="2"}` at `text[0]`: the labels and the rest of the line. */
function parseLabels(text: string, line: number): { labels: Record<string, string>; rest: string } {
  const labels: Record<string, string> = {};
  let i = 1;
  for (;;) {
    while (text[i] === ' ' || text[i] === '\t') i++;
    if (text[i] === '}') return { labels, rest: text.slice(i + 1) };
    const name = /^[^=\s]*/.exec(text.slice(i))![0];
    if (!LABEL_NAME.test(name)) throw new ParseError(line, `invalid label name "${name}"`);
    if (name === '__name__') throw new ParseError(line, 'label name "__name__" is reserved');
    if (name in labels) throw new ParseError(line, `duplicate label name "${name}"`);
    i += name.length;
    while (text[i] === ' ' || text[i] === '\t') i++;
    if (text[i] !== '=') throw new ParseError(line, `expected '=' after label name "${name}"`);
    i++;
    while (text[i] === ' ' || text[i] === '\t') i++;
    if (text[i] !== '"') throw new ParseError(line, `expected '"' to start the value of label "${name}"`);
    let j = i + 1;
    while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
    if (j >= text.length) throw new ParseError(line, `unterminated value of label "${name}"`);
    labels[name] = unescaped(text.slice(i + 1, j), line, true);
    i = j + 1;
    while (text[i] === ' ' || text[i] === '\t') i++;
    if (text[i] === ',') i++;
    else if (text[i] !== '}') throw new ParseError(line, `unexpected "${text[i] ?? 'end of line'}" in the labels`);
  }
}

/** The families of a scrape, in the order they first appear; throws what expfmt would reject. */
export function parseText(text: string): Family[] {
  const families = new Map<string, Family>();
  const typed = new Set<string>();
  const helped = new Set<string>();
  const family = (name: string): Family => {
    let found = families.get(name);
    if (!found) {
      found = { name, help: undefined, type: 'untyped', samples: [] };
      families.set(name, found);
    }
    return found;
  };
  /** The family a sample belongs to: its own name, or a summary's or histogram's _sum, _count, _bucket. */
  const familyOfSample = (name: string): Family => {
    const own = families.get(name);
    if (own) return own;
    const base = /^(.*)_(sum|count|bucket)$/.exec(name);
    if (base) {
      const parent = families.get(base[1]!);
      if (parent?.type === 'histogram' || (parent?.type === 'summary' && base[2] !== 'bucket')) return parent;
    }
    return family(name);
  };

  const lines = text.split('\n');
  lines.forEach((raw, index) => {
    const line = index + 1;
    const content = raw.replace(/^[ \t]+/, '');
    if (content === '') return;
    if (content.startsWith('#')) {
      const comment = /^#[ \t]+(HELP|TYPE)[ \t]+(\S+)(?:[ \t]+(.*))?$/.exec(content);
      if (!comment) return;
      const [, keyword, name, rest = ''] = comment as unknown as [string, 'HELP' | 'TYPE', string, string | undefined];
      if (!METRIC_NAME.test(name)) throw new ParseError(line, `invalid metric name "${name}"`);
      const target = family(name);
      if (keyword === 'HELP') {
        if (helped.has(name)) throw new ParseError(line, `second HELP line for metric name "${name}"`);
        helped.add(name);
        const help = unescaped(rest, line, false);
        if (help.trim() !== '') target.help = help;
      } else {
        const type = rest.trim() as MetricType;
        if (!TYPES.includes(type)) throw new ParseError(line, `unknown metric type "${rest.trim()}"`);
        if (typed.has(name) || target.samples.length > 0) {
          throw new ParseError(line, `second TYPE line for metric name "${name}", or TYPE reported after samples`);
        }
        typed.add(name);
        target.type = type;
      }
      return;
    }
    const name = /^[^{\s]*/.exec(content)![0];
    if (!METRIC_NAME.test(name)) throw new ParseError(line, `invalid metric name "${name}"`);
    let rest = content.slice(name.length).replace(/^[ \t]+/, '');
    let labels: Record<string, string> = {};
    if (rest.startsWith('{')) ({ labels, rest } = parseLabels(rest, line));
    const fields = rest.trim().split(/[ \t]+/);
    if (fields.length < 1 || fields[0] === '' || fields.length > 2)
      throw new ParseError(line, `expected a value and an optional timestamp, got "${rest.trim()}"`);
    if (fields[1] !== undefined && !/^-?\d+$/.test(fields[1])) throw new ParseError(line, `expected integer as timestamp, got "${fields[1]}"`);
    const value = parseValue(fields[0]!, line);
    const owner = familyOfSample(name);
    if (owner.type === 'histogram' && name === `${owner.name}_bucket`) {
      if (labels.le === undefined) throw new ParseError(line, `missing "le" label on a histogram bucket of "${owner.name}"`);
      parseValue(labels.le, line);
    }
    if (owner.type === 'summary' && name === owner.name) {
      if (labels.quantile === undefined) throw new ParseError(line, `missing "quantile" label on a summary sample of "${owner.name}"`);
      parseValue(labels.quantile, line);
    }
    owner.samples.push({ name, labels, value });
  });
  // expfmt drops families without samples, so promtool never lints them.
  return [...families.values()].filter((f) => f.samples.length > 0);
}

/**
 * The label sets of a family's metrics, as expfmt groups them: one per
 * sample line for counters, gauges and untyped; one per series for
 * histograms (without `le`) and summaries (without `quantile`).
 */
function metricLabelSets(family: Family): Record<string, string>[] {
  if (family.type !== 'histogram' && family.type !== 'summary') return family.samples.map((s) => s.labels);
  const drop = family.type === 'histogram' ? 'le' : 'quantile';
  const seen = new Map<string, Record<string, string>>();
  for (const sample of family.samples) {
    const labels = Object.fromEntries(Object.entries(sample.labels).filter(([key]) => key !== drop));
    const key = JSON.stringify(Object.entries(labels).sort());
    if (!seen.has(key)) seen.set(key, labels);
  }
  return [...seen.values()];
}

// units.go
const UNITS: Readonly<Record<string, string>> = {
  amperes: 'amperes',
  bytes: 'bytes',
  celsius: 'celsius',
  grams: 'grams',
  joules: 'joules',
  kelvin: 'kelvin',
  meters: 'meters',
  metres: 'metres',
  seconds: 'seconds',
  volts: 'volts',
  minutes: 'seconds',
  hours: 'seconds',
  days: 'seconds',
  weeks: 'seconds',
  kelvins: 'kelvin',
  fahrenheit: 'celsius',
  rankine: 'celsius',
  inches: 'meters',
  yards: 'meters',
  miles: 'meters',
  bits: 'bytes',
  calories: 'joules',
  pounds: 'grams',
  ounces: 'grams',
};
const UNIT_PREFIXES = [
  'pico',
  'nano',
  'micro',
  'milli',
  'centi',
  'deci',
  'deca',
  'hecto',
  'kilo',
  'kibi',
  'mega',
  'mibi',
  'giga',
  'gibi',
  'tera',
  'tebi',
  'peta',
  'pebi',
];
const UNIT_ABBREVIATIONS = ['s', 'ms', 'us', 'ns', 'sec', 'b', 'kb', 'mb', 'gb', 'tb', 'pb', 'm', 'h', 'd'];
const CAMEL_CASE = /[a-z][A-Z]/;

function metricUnit(name: string): { unit: string; base: string } | undefined {
  for (const part of name.split('_')) {
    if (Object.hasOwn(UNITS, part)) return { unit: part, base: UNITS[part]! };
    for (const prefix of UNIT_PREFIXES) {
      const rest = part.slice(prefix.length);
      if (part.startsWith(prefix) && Object.hasOwn(UNITS, rest)) return { unit: part, base: UNITS[rest]! };
    }
  }
  return undefined;
}

const hasPart = (name: string, part: string) => name.includes(`_${part}_`) || name.endsWith(`_${part}`);

/** Each of promlint's default validations, by its Go name. */
const RULES: Readonly<Record<string, (family: Family) => string[]>> = {
  LintHelp: (f) => (f.help === undefined ? ['no help text'] : []),
  LintMetricUnits: (f) => {
    const found = metricUnit(f.name);
    return found && found.unit !== found.base ? [`use base unit "${found.base}" instead of "${found.unit}"`] : [];
  },
  LintCounter: (f) => {
    const total = f.name.endsWith('_total');
    if (f.type === 'counter' && !total) return ['counter metrics should have "_total" suffix'];
    if (f.type !== 'counter' && f.type !== 'untyped' && total) return ['non-counter metrics should not have "_total" suffix'];
    return [];
  },
  LintHistogramSummaryReserved: (f) => {
    if (f.type === 'untyped') return [];
    const problems: string[] = [];
    const histogram = f.type === 'histogram';
    const summary = f.type === 'summary';
    if (!histogram && f.name.endsWith('_bucket')) problems.push('non-histogram metrics should not have "_bucket" suffix');
    if (!histogram && !summary && f.name.endsWith('_count')) problems.push('non-histogram and non-summary metrics should not have "_count" suffix');
    if (!histogram && !summary && f.name.endsWith('_sum')) problems.push('non-histogram and non-summary metrics should not have "_sum" suffix');
    for (const labels of metricLabelSets(f)) {
      for (const label of Object.keys(labels)) {
        if (!histogram && label === 'le') problems.push('non-histogram metrics should not have "le" label');
        if (!summary && label === 'quantile') problems.push('non-summary metrics should not have "quantile" label');
      }
    }
    return problems;
  },
  LintMetricTypeInName: (f) => {
    if (f.type === 'untyped') return [];
    return hasPart(f.name.toLowerCase(), f.type) ? [`metric name should not include type '${f.type}'`] : [];
  },
  LintReservedChars: (f) => (f.name.includes(':') ? ["metric names should not contain ':'"] : []),
  LintCamelCase: (f) => {
    const problems: string[] = [];
    if (CAMEL_CASE.test(f.name)) problems.push("metric names should be written in 'snake_case' not 'camelCase'");
    for (const labels of metricLabelSets(f)) {
      for (const label of Object.keys(labels)) {
        if (CAMEL_CASE.test(label)) problems.push("label names should be written in 'snake_case' not 'camelCase'");
      }
    }
    return problems;
  },
  LintUnitAbbreviations: (f) => {
    const name = f.name.toLowerCase();
    return UNIT_ABBREVIATIONS.filter((abbreviation) => hasPart(name, abbreviation)).map(() => 'metric names should not contain abbreviated units');
  },
  LintDuplicateMetric: (f) => {
    const problems: string[] = [];
    const sets = metricLabelSets(f).map((labels) => JSON.stringify(Object.entries(labels).sort()));
    sets.forEach((set, i) => {
      if (sets.indexOf(set, i + 1) !== -1) problems.push('metric not unique');
    });
    return problems;
  },
};

/** Every problem promlint finds in a scrape, sorted as promlint sorts them (by metric, then text). */
export function lint(text: string): Problem[] {
  const problems = parseText(text).flatMap((family) =>
    Object.values(RULES).flatMap((rule) => rule(family).map((problem) => ({ metric: family.name, text: problem }))),
  );
  return problems.sort((a, b) => (a.metric === b.metric ? compare(a.text, b.text) : compare(a.metric, b.metric)));
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** What `promtool check metrics` prints for a scrape, one line a problem; [] when it is silent. */
export function checkMetrics(text: string): string[] {
  return lint(text).map((problem) => `${problem.metric} ${problem.text}`);
}
