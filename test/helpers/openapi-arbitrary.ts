/**
 * fast-check arbitraries from the JSON Schemas of an OpenAPI document:
 * values that satisfy a schema, and values that break it in one named way
 * (wrong type, out of range, too long, missing required, extra property,
 * bad format...). Every value is checked with ajv (and ajv-formats, as
 * Fastify uses) before it is handed out, so "valid" and "invalid" mean what
 * a standard validator says, not what this file believes.
 */
import fc from 'fast-check';
import { Ajv, type ValidateFunction } from 'ajv';
import ajvFormats from 'ajv-formats';

/** A JSON Schema as ajv takes it: OpenAPI's dialect converted, `$ref`s inlined. */
export type Schema = { [keyword: string]: unknown };

export interface Invalid {
  value: unknown;
  /** Which rule the value breaks, in words, without the value itself (it names a class of inputs). */
  reason: string;
}

export interface ArbitraryOptions {
  /**
   * Known-good values by property or parameter name (ids that exist, a real
   * user's credentials), offered often wherever they fit the schema, so that
   * generated requests reach success paths and not only "not found".
   */
  hints?: Readonly<Record<string, readonly unknown[]>>;
}

const JSON_TYPES = ['null', 'boolean', 'integer', 'number', 'string', 'array', 'object'] as const;
type JsonType = (typeof JSON_TYPES)[number];

// ---- ajv ----

const ajv = new Ajv({
  allErrors: true,
  // Unknown keywords are errors: a schema this file does not understand must not be taken as "anything goes".
  strictSchema: true,
  strictTypes: false,
  strictTuples: false,
  strictRequired: false,
  allowUnionTypes: true,
  validateFormats: true,
});
ajvFormats.default(ajv);
const compiled = new WeakMap<Schema, ValidateFunction>();

/** ajv's validator for a converted schema, compiled once per schema object. */
export function validatorOf(schema: Schema): ValidateFunction {
  let validate = compiled.get(schema);
  if (!validate) {
    validate = ajv.compile(schema);
    compiled.set(schema, validate);
  }
  return validate;
}

export function isValid(schema: Schema, value: unknown): boolean {
  return validatorOf(schema)(value) as boolean;
}

// ---- OpenAPI documents ----

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Follows a local `$ref` ('#/components/...'), and chains of them, to the object they name. */
export function resolveRef<T = Record<string, unknown>>(document: unknown, node: unknown): T {
  const seen = new Set<string>();
  let current = node;
  while (isObject(current) && typeof current.$ref === 'string') {
    const ref = current.$ref;
    if (!ref.startsWith('#/')) throw new Error(`only local $refs are supported, not ${ref}`);
    if (seen.has(ref)) throw new Error(`$ref cycle at ${ref}`);
    seen.add(ref);
    let target: unknown = document;
    for (const raw of ref.slice(2).split('/')) {
      const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
      target = isObject(target) || Array.isArray(target) ? (target as Record<string, unknown>)[key] : undefined;
      if (target === undefined) throw new Error(`$ref ${ref} names nothing in the document`);
    }
    current = target;
  }
  return current as T;
}

/** Keywords of OpenAPI's schema dialect that JSON Schema validators do not know; annotations only. */
const OPENAPI_ONLY = new Set(['example', 'xml', 'externalDocs', 'discriminator', 'nullable']);

/**
 * An OpenAPI schema object (3.0 or 3.1) as a plain JSON Schema: `$ref`s
 * inlined, `nullable` turned into a `null` type, 3.0's boolean exclusive
 * bounds into numbers, annotations that ajv would reject dropped.
 */
export function toJsonSchema(document: unknown, schema: unknown, inProgress: string[] = []): Schema {
  if (schema === true || schema === undefined) return {};
  if (schema === false) return { not: {} };
  if (!isObject(schema)) throw new Error(`not a schema: ${JSON.stringify(schema)}`);
  if (typeof schema.$ref === 'string') {
    // A recursive schema is cut at its second appearance: "anything" there keeps validation sound, only less strict.
    if (inProgress.includes(schema.$ref)) return {};
    return toJsonSchema(document, resolveRef(document, { $ref: schema.$ref }), [...inProgress, schema.$ref]);
  }
  const out: Schema = {};
  for (const [keyword, value] of Object.entries(schema)) {
    if (OPENAPI_ONLY.has(keyword) || keyword.startsWith('x-')) continue;
    switch (keyword) {
      case 'properties':
      case 'patternProperties':
      case 'definitions':
      case '$defs':
        out[keyword] = Object.fromEntries(
          Object.entries(value as Record<string, unknown>).map(([name, sub]) => [name, toJsonSchema(document, sub, inProgress)]),
        );
        break;
      case 'items':
        out.items = Array.isArray(value) ? value.map((sub) => toJsonSchema(document, sub, inProgress)) : toJsonSchema(document, value, inProgress);
        break;
      case 'additionalProperties':
      case 'additionalItems':
      case 'not':
      case 'contains':
      case 'propertyNames':
        out[keyword] = typeof value === 'boolean' ? value : toJsonSchema(document, value, inProgress);
        break;
      case 'allOf':
      case 'anyOf':
      case 'oneOf':
        out[keyword] = (value as unknown[]).map((sub) => toJsonSchema(document, sub, inProgress));
        break;
      case 'exclusiveMinimum':
      case 'exclusiveMaximum':
        if (typeof value === 'number') out[keyword] = value;
        break;
      default:
        out[keyword] = value;
    }
  }
  // OpenAPI 3.0's `exclusiveMinimum: true` qualifies `minimum`; JSON Schema's is the bound itself.
  if (schema.exclusiveMinimum === true && typeof schema.minimum === 'number') {
    out.exclusiveMinimum = schema.minimum;
    delete out.minimum;
  }
  if (schema.exclusiveMaximum === true && typeof schema.maximum === 'number') {
    out.exclusiveMaximum = schema.maximum;
    delete out.maximum;
  }
  if (schema.nullable === true) {
    if (typeof out.type === 'string') out.type = [out.type, 'null'];
    else if (Array.isArray(out.type) && !out.type.includes('null')) out.type = [...out.type, 'null'];
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
  }
  return out;
}

// ---- shared pieces ----

/** The JSON types a schema allows; undefined when it says nothing about type. */
function typesOf(schema: Schema): JsonType[] | undefined {
  const declared = typeof schema.type === 'string' ? [schema.type] : Array.isArray(schema.type) ? (schema.type as string[]) : undefined;
  if (declared) return declared.filter((t): t is JsonType => (JSON_TYPES as readonly string[]).includes(t));
  // Keywords imply a type where a schema leaves it out (OpenAPI generators often do).
  if (schema.properties || schema.required || schema.additionalProperties !== undefined) return ['object'];
  if (schema.items || schema.maxItems !== undefined || schema.minItems !== undefined) return ['array'];
  if (schema.minLength !== undefined || schema.maxLength !== undefined || schema.pattern || schema.format) return ['string'];
  if (schema.minimum !== undefined || schema.maximum !== undefined) return ['number'];
  return undefined;
}

function num(schema: Schema, keyword: string): number | undefined {
  const value = schema[keyword];
  return typeof value === 'number' ? value : undefined;
}

/**
 * Keeps the values a validator accepts (or rejects). Dropping candidates
 * that never pass in a trial sample keeps fast-check's filter from looping
 * forever on a rule that a schema makes impossible to break (or to meet).
 */
function keep<T>(candidates: { arbitrary: fc.Arbitrary<T>; weight: number }[], accept: (value: T) => boolean): fc.Arbitrary<T> | undefined {
  const useful = candidates.filter(({ arbitrary }) => fc.sample(arbitrary, { numRuns: 30, seed: 7 }).some(accept));
  if (useful.length === 0) return undefined;
  return fc.oneof(...useful).filter(accept);
}

const ALNUM = [...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'];
const WORDY = [...ALNUM, '_', '.', '-'];

/**
 * Any code point but a lone surrogate, as fast-check's 'binary' unit draws them. Not that unit itself: on its first
 * use fast-check builds a reverse map of all 1.1 million code points (2 s of CPU in every test worker).
 */
const ANY_CODE_POINT = fc.oneof(fc.integer({ min: 0, max: 0xd7ff }), fc.integer({ min: 0xe000, max: 0x10ffff })).map((point) => String.fromCodePoint(point));

/** Characters of three kinds: identifier-like (what real clients mostly send), printable ASCII, and any code point. */
function stringOf(minLength: number, maxLength: number): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.string({ unit: fc.constantFrom(...WORDY), minLength, maxLength }) },
    { weight: 2, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength, maxLength }) },
    { weight: 1, arbitrary: fc.string({ unit: ANY_CODE_POINT, minLength, maxLength }) },
  );
}

const codePoints = (value: string) => [...value].length;
const fill = (length: number) => 'x'.repeat(Math.max(0, length));

/**
 * Strings of exactly `length` code points. Long ones repeat a short random
 * ASCII stem: generating and validating 100,000 random units per value
 * would cost seconds and find nothing a repeated stem does not.
 */
function stringOfLength(length: number): fc.Arbitrary<string> {
  if (length <= 256) return stringOf(length, length);
  return fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 16 }).map((stem) => stem.repeat(Math.ceil(length / stem.length)).slice(0, length));
}

// ---- formats ----

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

const dateText = fc
  .date({ min: new Date('0001-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true })
  .map((d) => d.toISOString().slice(0, 10));
const offsetText = fc.oneof(
  fc.constantFrom('Z', 'z', '+00:00', '-00:00'),
  fc.tuple(fc.constantFrom('+', '-'), fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 })).map(([sign, h, m]) => `${sign}${pad(h)}:${pad(m)}`),
);
const timeOfDay = fc
  .tuple(fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 }), fc.integer({ min: 0, max: 59 }), fc.option(fc.integer({ min: 0, max: 999_999_999 })))
  .map(([h, m, s, fraction]) => `${pad(h)}:${pad(m)}:${pad(s)}${fraction === null ? '' : `.${fraction}`}`);
const dateTimeText = fc.oneof(
  { weight: 6, arbitrary: fc.tuple(dateText, fc.constantFrom('T', 't'), timeOfDay, offsetText).map((parts) => parts.join('')) },
  // RFC 3339's edges: leap seconds (valid at 23:59:60 UTC only), the first and the last representable instants, the widest offset.
  {
    weight: 1,
    arbitrary: fc.constantFrom('1998-12-31T23:59:60Z', '2016-12-31T23:59:60Z', '0001-01-01T00:00:00Z', '9999-12-31T23:59:59.999Z', '2024-02-29T12:00:00+14:00'),
  },
);
const emailText = fc.oneof(
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.string({ unit: fc.constantFrom(...ALNUM), minLength: 1, maxLength: 12 }),
        fc.string({ unit: fc.constantFrom(...ALNUM), minLength: 1, maxLength: 10 }),
      )
      .map(([local, domain]) => `${local}@${domain}.example`),
  },
  { weight: 1, arbitrary: fc.emailAddress() },
);
/**
 * An RFC 3986 character of a path, query or fragment: unreserved and sub-delims mostly, now and then any code point
 * percent-encoded (what fc.webUrl draws, without its full-Unicode reverse map: see ANY_CODE_POINT).
 */
const urlChar = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom(...ALNUM, ...`-._~!$&'()*+,;=:@`) },
  { weight: 1, arbitrary: ANY_CODE_POINT.map((point) => encodeURIComponent(point)) },
);
const urlPart = (maxLength: number) => fc.string({ unit: urlChar, maxLength });
const webUrlText = fc
  .tuple(
    fc.constantFrom('http', 'https'),
    fc.domain(),
    fc.option(fc.integer({ min: 1, max: 65535 }), { nil: undefined }),
    fc.array(urlPart(10), { maxLength: 4 }),
    fc.option(urlPart(16), { nil: undefined }),
    fc.option(urlPart(10), { nil: undefined }),
  )
  .map(
    ([scheme, host, port, path, query, fragment]) =>
      `${scheme}://${host}${port === undefined ? '' : `:${port}`}/${path.join('/')}${query === undefined ? '' : `?${query}`}${fragment === undefined ? '' : `#${fragment}`}`,
  );
const uriText = fc.oneof(
  { weight: 4, arbitrary: webUrlText },
  {
    weight: 1,
    arbitrary: fc.constantFrom('urn:isbn:0451450523', 'mailto:someone@example.com', 'ftp://ftp.example.com/file.txt', 'data:,hello', 'http://[::1]:8080/'),
  },
);

const FORMATS: Record<string, fc.Arbitrary<string>> = {
  date: dateText,
  'date-time': dateTimeText,
  time: dateTimeText.map((value) => value.slice(11)),
  email: emailText,
  uri: uriText,
  'uri-reference': fc.oneof(uriText, fc.constantFrom('/relative/path', '?q=1', '#top', '')),
  url: uriText,
  uuid: fc.uuid(),
  hostname: fc.domain(),
  ipv4: fc.ipV4(),
  ipv6: fc.ipV6(),
  byte: fc.uint8Array({ maxLength: 48 }).map((bytes) => Buffer.from(bytes).toString('base64')),
  binary: fc.string({ unit: ANY_CODE_POINT, maxLength: 64 }),
  password: stringOf(0, 40),
};

/** Strings that look like a format but are not: the classic mistakes for each. */
const MALFORMED: Record<string, readonly string[]> = {
  date: ['2026-02-30', '2026-13-01', '2026-1-1', '26-01-01', '2026/01/01', '01.01.2026', 'yesterday', '2026-01-01T00:00:00Z', '', '0'],
  'date-time': [
    '2026-01-01',
    '2026-01-01T25:00:00Z',
    '2026-01-01T00:00:00',
    '2026-01-01 00:00',
    '2026-01-01T00:00:00+25:00',
    '2026-01-01T12:00:60Z',
    'now',
    '1700000000',
    '',
  ],
  time: ['25:00:00Z', '12:00', 'noon', ''],
  email: ['plainaddress', '@example.com', 'user@', 'user@@example.com', 'user example@example.com', 'user@exa mple.com', ''],
  uri: ['not a uri', '//no-scheme.example', 'http//missing-colon', '://example.com', 'example.com/path', '', 'http://exa mple.com'],
  url: ['not a url', 'example.com', ''],
  uuid: ['not-a-uuid', '123', '00000000-0000-0000-0000-00000000000g'],
  hostname: ['-bad-.example', 'a..b', 'under_score.example', ''],
  ipv4: ['256.1.1.1', '1.2.3', 'a.b.c.d'],
  ipv6: ['::g', '1:2:3', 'not-an-ip'],
  byte: ['not base64!', '@@@@'],
};

// ---- valid values ----

/** Arbitraries per options and schema: nested schemas are reached again and again while building invalid objects. */
const memo = new WeakMap<ArbitraryOptions, WeakMap<Schema, Map<string, fc.Arbitrary<unknown> | undefined>>>();
function memoised<T>(kind: string, schema: Schema, options: ArbitraryOptions, name: string | undefined, make: () => T): T {
  let bySchema = memo.get(options);
  if (!bySchema) {
    bySchema = new WeakMap();
    memo.set(options, bySchema);
  }
  let byKey = bySchema.get(schema);
  if (!byKey) {
    byKey = new Map();
    bySchema.set(schema, byKey);
  }
  const key = `${kind}:${name ?? ''}`;
  if (!byKey.has(key)) byKey.set(key, make() as fc.Arbitrary<unknown> | undefined);
  return byKey.get(key) as T;
}

const NO_OPTIONS: ArbitraryOptions = {};

export function validArbitrary(schema: Schema, options: ArbitraryOptions = NO_OPTIONS, name?: string): fc.Arbitrary<unknown> {
  return memoised('valid', schema, options, name, () => makeValid(schema, options, name));
}

function makeValid(schema: Schema, options: ArbitraryOptions, name: string | undefined): fc.Arbitrary<unknown> {
  const validate = validatorOf(schema);
  const accept = (value: unknown) => validate(value) as boolean;
  const generated = keep(
    validCandidates(schema, options).map((arbitrary) => ({ arbitrary, weight: 1 })),
    accept,
  );
  const hinted = name ? (options.hints?.[name] ?? []).filter(accept) : [];
  if (!generated && hinted.length === 0) throw new Error(`no value satisfies the schema ${JSON.stringify(schema)}`);
  if (hinted.length === 0) return generated!;
  const hint = fc.constantFrom(...hinted);
  return generated ? fc.oneof({ weight: 3, arbitrary: hint }, { weight: 1, arbitrary: generated }) : hint;
}

function validCandidates(schema: Schema, options: ArbitraryOptions): fc.Arbitrary<unknown>[] {
  if ('const' in schema) return [fc.constant(schema.const)];
  if (Array.isArray(schema.enum)) return [fc.constantFrom(...(schema.enum as unknown[]))];
  const base = { ...schema };
  for (const combinator of ['anyOf', 'oneOf'] as const) {
    const branches = schema[combinator];
    if (Array.isArray(branches)) {
      delete base[combinator];
      return (branches as Schema[]).flatMap((branch) => validCandidates(merge(base, branch), options));
    }
  }
  if (Array.isArray(schema.allOf)) {
    delete base.allOf;
    return validCandidates((schema.allOf as Schema[]).reduce(merge, base), options);
  }
  const types = typesOf(schema);
  if (!types) return [fc.jsonValue({ maxDepth: 2 })];
  return types.map((type) => validOfType(schema, type, options));
}

/** Both schemas' keywords; the branch's win on a clash, and the final ajv filter sorts out what that loses. */
function merge(base: Schema, branch: Schema): Schema {
  const merged: Schema = { ...base, ...branch };
  if (isObject(base.properties) && isObject(branch.properties)) merged.properties = { ...base.properties, ...branch.properties };
  if (Array.isArray(base.required) && Array.isArray(branch.required)) merged.required = [...new Set([...base.required, ...branch.required])];
  return merged;
}

function validOfType(schema: Schema, type: JsonType, options: ArbitraryOptions): fc.Arbitrary<unknown> {
  switch (type) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer':
    case 'number':
      return numberInRange(schema, type === 'integer');
    case 'string':
      return validString(schema);
    case 'array':
      return validArray(schema, options);
    case 'object':
      return validObject(schema, options);
  }
}

/** The inclusive integer bounds a schema sets (undefined: unbounded on that side). */
function integerBounds(schema: Schema): { low: number | undefined; high: number | undefined } {
  const minimum = num(schema, 'minimum');
  const exclusiveMinimum = num(schema, 'exclusiveMinimum');
  const maximum = num(schema, 'maximum');
  const exclusiveMaximum = num(schema, 'exclusiveMaximum');
  const lows = [minimum !== undefined ? Math.ceil(minimum) : undefined, exclusiveMinimum !== undefined ? Math.floor(exclusiveMinimum) + 1 : undefined].filter(
    (v) => v !== undefined,
  );
  const highs = [maximum !== undefined ? Math.floor(maximum) : undefined, exclusiveMaximum !== undefined ? Math.ceil(exclusiveMaximum) - 1 : undefined].filter(
    (v) => v !== undefined,
  );
  return { low: lows.length ? Math.max(...lows) : undefined, high: highs.length ? Math.min(...highs) : undefined };
}

function integerBetween(low: number, high: number): fc.Arbitrary<number> {
  if (low >= -(2 ** 31) && high <= 2 ** 31 - 1) return fc.integer({ min: low, max: high });
  return fc.bigInt({ min: BigInt(Math.trunc(low)), max: BigInt(Math.trunc(high)) }).map(Number);
}

function numberInRange(schema: Schema, integer: boolean): fc.Arbitrary<number> {
  const { low, high } = integerBounds(schema);
  const lo = low ?? -Number.MAX_SAFE_INTEGER;
  const hi = high ?? Number.MAX_SAFE_INTEGER;
  const candidates: { weight: number; arbitrary: fc.Arbitrary<number> }[] = [
    { weight: 4, arbitrary: integerBetween(Math.max(lo, Math.min(hi, -1000)), Math.min(hi, Math.max(lo, 1000))) },
    { weight: 2, arbitrary: integerBetween(lo, hi) },
  ];
  // The edges of the range, where off-by-one mistakes live.
  const edges = [low, low !== undefined ? low + 1 : undefined, high, high !== undefined ? high - 1 : undefined].filter(
    (v): v is number => v !== undefined && v >= lo && v <= hi,
  );
  if (edges.length) candidates.push({ weight: 2, arbitrary: fc.constantFrom(...edges) });
  // No upper bound means any integer JSON can carry is valid, including ones past 2^53 that no database column holds.
  if (high === undefined) candidates.push({ weight: 1, arbitrary: fc.constantFrom(2 ** 53 - 1, 2 ** 53, 2 ** 63, 1e21, 1e300).filter((v) => v >= lo) });
  if (low === undefined) candidates.push({ weight: 1, arbitrary: fc.constantFrom(-(2 ** 53), -(2 ** 63), -1e300).filter((v) => v <= hi) });
  if (!integer) {
    candidates.push({
      weight: 2,
      arbitrary: fc.double({ min: low ?? -1e12, max: high ?? 1e12, noNaN: true, noDefaultInfinity: true }),
    });
  }
  const multipleOf = num(schema, 'multipleOf');
  const arbitrary = fc.oneof(...candidates);
  return multipleOf ? arbitrary.map((v) => Math.round(v / multipleOf) * multipleOf) : arbitrary;
}

function validString(schema: Schema): fc.Arbitrary<string> {
  const minLength = num(schema, 'minLength') ?? 0;
  const maxLength = num(schema, 'maxLength');
  const fits = (value: string) => codePoints(value) >= minLength && (maxLength === undefined || codePoints(value) <= maxLength);
  const format = typeof schema.format === 'string' ? FORMATS[schema.format] : undefined;
  if (format) return format.filter(fits);
  if (typeof schema.pattern === 'string') return fc.stringMatching(new RegExp(schema.pattern, 'u')).filter(fits);
  // Unbounded strings stay short: length is probed where a schema sets a limit.
  const typicalMax = Math.min(maxLength ?? minLength + 40, minLength + 40);
  const candidates: { weight: number; arbitrary: fc.Arbitrary<string> }[] = [{ weight: 10, arbitrary: stringOf(minLength, typicalMax) }];
  // The exact limits, where off-by-one and "the schema allows more than the server takes" live.
  if (maxLength !== undefined) candidates.push({ weight: 1, arbitrary: stringOfLength(maxLength) });
  if (minLength > 0) candidates.push({ weight: 1, arbitrary: stringOfLength(minLength) });
  return fc.oneof(...candidates);
}

function validArray(schema: Schema, options: ArbitraryOptions): fc.Arbitrary<unknown[]> {
  const items = isObject(schema.items) ? (schema.items as Schema) : {};
  const minLength = num(schema, 'minItems') ?? 0;
  const maxItems = num(schema, 'maxItems');
  const item = validArbitrary(items, options);
  const typical = { minLength, maxLength: Math.min(maxItems ?? minLength + 4, minLength + 4) };
  const array = (constraints: { minLength: number; maxLength: number }) =>
    schema.uniqueItems === true ? fc.uniqueArray(item, { ...constraints, selector: (v) => JSON.stringify(v) }) : fc.array(item, constraints);
  const candidates = [{ weight: 5, arbitrary: array(typical) }];
  if (maxItems !== undefined) candidates.push({ weight: 1, arbitrary: array({ minLength: maxItems, maxLength: maxItems }) });
  return fc.oneof(...candidates);
}

function propertiesOf(schema: Schema): Record<string, Schema> {
  return isObject(schema.properties) ? (schema.properties as Record<string, Schema>) : {};
}

function requiredOf(schema: Schema): string[] {
  return Array.isArray(schema.required) ? (schema.required as string[]) : [];
}

function validObject(schema: Schema, options: ArbitraryOptions): fc.Arbitrary<Record<string, unknown>> {
  const properties = propertiesOf(schema);
  const required = requiredOf(schema);
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [name, sub] of Object.entries(properties)) model[name] = validArbitrary(sub, options, name);
  for (const name of required) model[name] ??= fc.jsonValue({ maxDepth: 1 });
  const record = fc.record(model, { requiredKeys: required });
  if (schema.additionalProperties === false) return record;
  // Where a schema allows more properties, a client may send them; the server must take them or drop them quietly.
  const extraValue = isObject(schema.additionalProperties) ? validArbitrary(schema.additionalProperties as Schema, options) : fc.jsonValue({ maxDepth: 1 });
  const extraKey = fc.string({ unit: fc.constantFrom(...WORDY), minLength: 1, maxLength: 12 }).filter((key) => !(key in model) && key !== '__proto__');
  return fc.oneof(
    { weight: 3, arbitrary: record },
    { weight: 1, arbitrary: fc.tuple(record, fc.dictionary(extraKey, extraValue, { maxKeys: 3 })).map(([known, extra]) => ({ ...extra, ...known })) },
  );
}

// ---- invalid values ----

/**
 * Values the schema rejects, each labelled with the rule it breaks; undefined
 * for a schema that accepts everything.
 */
export function invalidArbitrary(schema: Schema, options: ArbitraryOptions = NO_OPTIONS): fc.Arbitrary<Invalid> | undefined {
  return memoised('invalid', schema, options, undefined, () => {
    const validate = validatorOf(schema);
    return keep(invalidCandidates(schema, options), (candidate) => !validate(candidate.value));
  });
}

type Candidate = { weight: number; arbitrary: fc.Arbitrary<Invalid> };

const labelled = (reason: string, values: fc.Arbitrary<unknown>, weight = 1): Candidate => ({ weight, arbitrary: values.map((value) => ({ value, reason })) });

/** A sample of each JSON type, for "wrong type" values. */
const OF_TYPE: Record<JsonType, fc.Arbitrary<unknown>> = {
  null: fc.constant(null),
  boolean: fc.boolean(),
  integer: fc.integer({ min: -5, max: 1000 }),
  number: fc.constantFrom(1.5, -0.25, 3.14),
  string: fc.constantFrom('', 'text', 'true', '1.5', '[]', '{}', 'null'),
  array: fc.constantFrom([], [1, 'two'], [{}]),
  object: fc.constantFrom({}, { key: 'value' }),
};

function invalidCandidates(schema: Schema, options: ArbitraryOptions): Candidate[] {
  const candidates: Candidate[] = [];
  const types = typesOf(schema);
  if (types) {
    for (const other of JSON_TYPES) {
      // An integer is also a number; listing integer for a number schema would offer only valid values.
      if (types.includes(other) || (other === 'integer' && types.includes('number'))) continue;
      candidates.push(labelled(`wrong type: ${other} where ${types.join(' or ')} is expected`, OF_TYPE[other]));
    }
  }
  if (Array.isArray(schema.enum)) {
    const allowed = schema.enum as unknown[];
    const variants = allowed.filter((v): v is string => typeof v === 'string').flatMap((v) => [v.toUpperCase(), ` ${v}`, `${v}x`]);
    candidates.push(
      labelled('not one of the enum values', fc.oneof(fc.string({ maxLength: 12 }), ...(variants.length ? [fc.constantFrom(...variants)] : [])), 2),
    );
  }
  for (const combinator of ['anyOf', 'oneOf'] as const) {
    const branches = schema[combinator];
    if (!Array.isArray(branches)) continue;
    const base = { ...schema };
    delete base[combinator];
    // A value that breaks a branch may satisfy another; invalidArbitrary's ajv filter keeps only those that break all.
    for (const branch of branches as Schema[])
      candidates.push(
        ...invalidCandidates(merge(base, branch), options).map((c) => ({
          ...c,
          arbitrary: c.arbitrary.map((inv) => ({ ...inv, reason: `${combinator}: ${inv.reason}` })),
        })),
      );
  }
  if (Array.isArray(schema.allOf)) {
    const base = { ...schema };
    delete base.allOf;
    candidates.push(...invalidCandidates((schema.allOf as Schema[]).reduce(merge, base), options));
  }
  if (types?.includes('integer') || types?.includes('number'))
    candidates.push(...invalidNumbers(schema, types.includes('integer') && !types.includes('number')));
  if (types?.includes('string')) candidates.push(...invalidStrings(schema));
  if (types?.includes('array')) candidates.push(...invalidArrays(schema, options));
  if (types?.includes('object')) candidates.push(...invalidObjects(schema, options));
  return candidates;
}

function invalidNumbers(schema: Schema, integer: boolean): Candidate[] {
  const candidates: Candidate[] = [];
  const { low, high } = integerBounds(schema);
  if (integer) candidates.push(labelled('not an integer', fc.constantFrom(0.5, 1.5, -2.25, (low ?? 0) + 0.5)));
  // Near the safe-integer edge the range below (above) a bound may hold one number only: never an empty range.
  if (low !== undefined)
    candidates.push(
      labelled(
        'below the minimum',
        fc.oneof(fc.constant(low - 1), integerBetween(Math.min(low - 1, Math.max(low - 1_000_000, -Number.MAX_SAFE_INTEGER)), low - 1), fc.constant(-1e21)),
      ),
    );
  if (high !== undefined)
    candidates.push(
      labelled(
        'above the maximum',
        fc.oneof(fc.constant(high + 1), integerBetween(high + 1, Math.max(high + 1, Math.min(high + 1_000_000, Number.MAX_SAFE_INTEGER))), fc.constant(1e21)),
      ),
    );
  const multipleOf = num(schema, 'multipleOf');
  if (multipleOf) candidates.push(labelled('not a multiple of multipleOf', fc.constant(multipleOf * 1.5 + (integer ? 0 : 0.1))));
  return candidates;
}

function invalidStrings(schema: Schema): Candidate[] {
  const candidates: Candidate[] = [];
  const minLength = num(schema, 'minLength');
  const maxLength = num(schema, 'maxLength');
  if (minLength !== undefined && minLength > 0)
    candidates.push(labelled('shorter than minLength', fc.oneof(stringOfLength(minLength - 1), stringOf(0, minLength - 1))));
  if (maxLength !== undefined)
    candidates.push(labelled('longer than maxLength', fc.oneof(stringOfLength(maxLength + 1), fc.constant(fill(maxLength * 2 + 10)))));
  if (typeof schema.format === 'string' && MALFORMED[schema.format]) {
    candidates.push(labelled(`not a valid ${schema.format}`, fc.constantFrom(...MALFORMED[schema.format]!), 2));
  }
  if (typeof schema.pattern === 'string') candidates.push(labelled('does not match the pattern', stringOf(0, 20)));
  return candidates;
}

function invalidArrays(schema: Schema, options: ArbitraryOptions): Candidate[] {
  const candidates: Candidate[] = [];
  const items = isObject(schema.items) ? (schema.items as Schema) : {};
  const item = validArbitrary(items, options);
  const minItems = num(schema, 'minItems');
  const maxItems = num(schema, 'maxItems');
  if (minItems !== undefined && minItems > 0) candidates.push(labelled('fewer items than minItems', fc.array(item, { maxLength: minItems - 1 })));
  if (maxItems !== undefined) candidates.push(labelled('more items than maxItems', fc.array(item, { minLength: maxItems + 1, maxLength: maxItems + 3 })));
  const badItem = invalidArbitrary(items, options);
  if (badItem) {
    candidates.push({
      weight: 2,
      arbitrary: fc.tuple(fc.array(item, { maxLength: Math.min(3, Math.max(0, (maxItems ?? 4) - 1)) }), badItem, fc.nat()).map(([good, bad, at]) => {
        const value = [...good];
        value.splice(at % (good.length + 1), 0, bad.value);
        return { value, reason: `an item is invalid (${bad.reason})` };
      }),
    });
  }
  if (schema.uniqueItems === true) candidates.push({ weight: 1, arbitrary: item.map((v) => ({ value: [v, v], reason: 'items are not unique' })) });
  return candidates;
}

function invalidObjects(schema: Schema, options: ArbitraryOptions): Candidate[] {
  const candidates: Candidate[] = [];
  const properties = propertiesOf(schema);
  const required = requiredOf(schema);
  // Only the object branch of a schema such as { type: [object, null] } can lose a property.
  const valid = validArbitrary(schema, options).filter(isObject);
  if (required.length > 0) {
    candidates.push({
      weight: 2,
      arbitrary: fc.tuple(valid, fc.constantFrom(...required)).map(([value, missing]) => {
        const copy = { ...value };
        delete copy[missing];
        return { value: copy, reason: `required property "${missing}" is missing` };
      }),
    });
  }
  if (schema.additionalProperties === false) {
    const extraKey = fc.constantFrom('unexpected', 'id', 'author', 'is_admin', 'constructor').filter((key) => !(key in properties));
    candidates.push({
      weight: 1,
      arbitrary: fc
        .tuple(valid, extraKey, fc.jsonValue({ maxDepth: 1 }))
        .map(([value, key, extra]) => ({ value: { ...value, [key]: extra }, reason: 'a property that additionalProperties: false forbids' })),
    });
  }
  const broken = Object.entries(properties).flatMap(([name, sub]) => {
    const bad = invalidArbitrary(sub, options);
    return bad ? [{ name, bad }] : [];
  });
  if (broken.length > 0) {
    candidates.push({
      weight: 3,
      arbitrary: fc
        .tuple(valid, fc.constantFrom(...broken))
        .chain(([value, { name, bad }]) => bad.map((inv) => ({ value: { ...value, [name]: inv.value }, reason: `property "${name}": ${inv.reason}` }))),
    });
  }
  return candidates;
}

// ---- edge cases ----

export interface EdgeCase {
  value: unknown;
  /** Whether ajv accepts the value; decided by the validator, not by the list below. */
  valid: boolean;
  reason: string;
}

/** Format values at the rim of what the format allows, and just past it. */
const FORMAT_EDGES: Record<string, readonly string[]> = {
  date: ['0001-01-01', '9999-12-31', '2024-02-29', '2023-02-29', '0000-01-01'],
  'date-time': [
    '1998-12-31T23:59:60Z',
    '2016-12-31T23:59:60Z',
    '0001-01-01T00:00:00Z',
    '9999-12-31T23:59:59.999Z',
    '2024-02-29T12:00:00+14:00',
    '2026-01-01T00:00:00-23:59',
    '2026-06-01T12:00:00.123456789z',
  ],
  email: ['a@b.co', `${'l'.repeat(64)}@example.com`, 'first.last+tag@sub.example.org', '"quoted"@example.com'],
  uri: ['http://[::1]:8080/', 'urn:isbn:0451450523', 'javascript:alert(1)', 'data:,hello', `https://example.com/${'p'.repeat(2000)}`],
};

/**
 * A short, fixed list of values at and just past each limit a schema sets,
 * plus the values that break parsers (huge integers, leap seconds, empty
 * strings). Random sampling finds these only by luck; the list makes sure
 * every run tries them.
 */
export function edgeCases(schema: Schema): EdgeCase[] {
  const values = new Map<string, { value: unknown; reason: string }>();
  const add = (value: unknown, reason: string) => {
    const key = JSON.stringify(value) ?? 'undefined';
    if (!values.has(key)) values.set(key, { value, reason });
  };
  const types = typesOf(schema) ?? [];
  if (Array.isArray(schema.enum)) {
    for (const value of schema.enum as unknown[]) add(value, 'an enum value');
    add('not-in-enum', 'not one of the enum values');
  }
  if (types.includes('integer') || types.includes('number')) {
    const { low, high } = integerBounds(schema);
    if (low !== undefined) {
      add(low, 'the minimum');
      add(low - 1, 'one below the minimum');
    }
    if (high !== undefined) {
      add(high, 'the maximum');
      add(high + 1, 'one above the maximum');
    }
    for (const value of [0, -1, 2 ** 31, 2 ** 53, 1e21, 1e300, -1e21]) add(value, 'an integer at a machine limit');
    add(1.5, 'a fraction');
  }
  if (types.includes('string')) {
    const minLength = num(schema, 'minLength');
    const maxLength = num(schema, 'maxLength');
    add('', 'the empty string');
    if (minLength) add(fill(minLength), 'exactly minLength');
    if (maxLength !== undefined) {
      add(fill(maxLength), 'exactly maxLength');
      add(fill(maxLength + 1), 'one past maxLength');
    }
    add('é😀\u0000', 'non-ASCII and NUL');
    const format = typeof schema.format === 'string' ? schema.format : undefined;
    for (const value of (format && FORMAT_EDGES[format]) || []) add(value, `a ${format} at the rim of the format`);
    for (const value of (format && MALFORMED[format]) || []) add(value, `not a valid ${format}`);
    // `{ anyOf: [{ format: date }, { format: date-time }] }`: the formats live in the branches.
    for (const branch of (Array.isArray(schema.anyOf) ? schema.anyOf : Array.isArray(schema.oneOf) ? schema.oneOf : []) as Schema[]) {
      const branchFormat = typeof branch.format === 'string' ? branch.format : undefined;
      for (const value of (branchFormat && FORMAT_EDGES[branchFormat]) || []) add(value, `a ${branchFormat} at the rim of the format`);
    }
  }
  if (types.includes('boolean')) {
    add(true, 'true');
    add(false, 'false');
  }
  if (types.includes('array')) {
    add([], 'an empty array');
    const maxItems = num(schema, 'maxItems');
    const item = isObject(schema.items) ? (schema.items as Schema) : {};
    const sample = fc.sample(validArbitrary(item), { numRuns: 1, seed: 1 })[0];
    if (maxItems !== undefined) {
      add(
        Array.from({ length: maxItems }, () => sample),
        'exactly maxItems',
      );
      add(
        Array.from({ length: maxItems + 1 }, () => sample),
        'one past maxItems',
      );
    }
  }
  if (types.includes('object')) add({}, 'an empty object');
  add(null, 'null');
  const validate = validatorOf(schema);
  return [...values.values()].map(({ value, reason }) => ({ value, reason, valid: validate(value) as boolean }));
}
