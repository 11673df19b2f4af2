/**
 * The schema arbitraries are only worth what their "valid" and "invalid"
 * mean. Each schema here is checked three ways: by a predicate written by
 * hand from the schema's words, by a separate ajv instance, and by the
 * reasons the invalid values give (each targeted rule must show up).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Ajv } from 'ajv';
import ajvFormats from 'ajv-formats';
import { edgeCases, invalidArbitrary, toJsonSchema, validArbitrary, type Schema } from './openapi-arbitrary.js';

const referee = new Ajv({ allErrors: true, strict: false });
ajvFormats.default(referee);

const RUNS = 300;
const codePoints = (value: string) => [...value].length;
const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Calendar dates by hand: the fields must survive a round trip through Date.UTC. */
function isDate(value: unknown): boolean {
  const match = typeof value === 'string' ? /^(\d{4})-(\d{2})-(\d{2})$/.exec(value) : null;
  if (!match) return false;
  const [y, m, d] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const date = new Date(Date.UTC(2000, m - 1, d));
  date.setUTCFullYear(y);
  return date.getUTCFullYear() === y && date.getUTCMonth() === m - 1 && date.getUTCDate() === d;
}

/** RFC 3339 date-times by hand (a leap second allowed at 23:59:60 UTC only). */
function isDateTime(value: unknown): boolean {
  const match = typeof value === 'string' ? /^(\d{4}-\d{2}-\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/.exec(value) : null;
  if (!match || !isDate(match[1])) return false;
  const [h, m, s] = [Number(match[2]), Number(match[3]), Number(match[4])];
  const offset = match[5] ? (match[5] === '+' ? 1 : -1) * (Number(match[6]) * 60 + Number(match[7])) : 0;
  if (match[5] && (Number(match[6]) > 23 || Number(match[7]) > 59)) return false;
  if (h > 23 || m > 59 || s > 60) return false;
  if (s === 60) {
    const utcMinutes = (((h * 60 + m - offset) % 1440) + 1440) % 1440;
    return utcMinutes === 23 * 60 + 59;
  }
  return true;
}

interface Case {
  name: string;
  schema: Schema;
  /** The schema's meaning, written without looking at the generators. */
  holds: (value: unknown) => boolean;
  /** Rules each of which some invalid value must name. */
  reasons: RegExp[];
}

const postCreate = {
  type: 'object',
  properties: {
    title: { type: 'string', minLength: 1, maxLength: 200 },
    content: { type: 'string', minLength: 1, maxLength: 500 },
    tags: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 50 }, maxItems: 20 },
  },
  required: ['title', 'content'],
  additionalProperties: false,
};

const CASES: Case[] = [
  {
    name: 'an integer between 1 and 100',
    schema: { type: 'integer', minimum: 1, maximum: 100 },
    holds: (v) => Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 100,
    reasons: [/wrong type: string/, /not an integer/, /below the minimum/, /above the maximum/],
  },
  {
    name: 'an integer with a lower bound only (a page number)',
    schema: { type: 'integer', minimum: 1 },
    holds: (v) => typeof v === 'number' && v % 1 === 0 && v >= 1,
    reasons: [/below the minimum/, /not an integer/, /wrong type/],
  },
  {
    name: 'a string of 3 to 20 characters',
    schema: { type: 'string', minLength: 3, maxLength: 20 },
    holds: (v) => typeof v === 'string' && codePoints(v) >= 3 && codePoints(v) <= 20,
    reasons: [/shorter than minLength/, /longer than maxLength/, /wrong type: integer/],
  },
  {
    name: 'an enum',
    schema: { type: 'string', enum: ['created_at', '-created_at', 'title', '-title'] },
    holds: (v) => ['created_at', '-created_at', 'title', '-title'].includes(v as string),
    reasons: [/not one of the enum values/, /wrong type/],
  },
  {
    name: 'a date or a date-time',
    schema: { type: 'string', anyOf: [{ format: 'date' }, { format: 'date-time' }] },
    holds: (v) => isDate(v) || isDateTime(v),
    reasons: [/anyOf: not a valid date/, /anyOf: not a valid date-time/],
  },
  {
    name: 'an e-mail address',
    schema: { type: 'string', format: 'email' },
    // A dot-atom local part (no quoted forms) and a dotted host name.
    holds: (v) =>
      typeof v === 'string' && /^[^\s@"(),:;<>[\]\\.]+(\.[^\s@"(),:;<>[\]\\.]+)*@([a-z0-9]([a-z0-9-]*[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]*[a-z0-9])?$/i.test(v),
    reasons: [/not a valid email/, /wrong type/],
  },
  {
    name: 'a URI',
    schema: { type: 'string', format: 'uri' },
    holds: (v) => {
      if (typeof v !== 'string' || !/^[a-z][a-z0-9+.-]*:/i.test(v) || /\s/.test(v)) return false;
      try {
        new URL(v);
        return true;
      } catch {
        return false;
      }
    },
    reasons: [/not a valid uri/],
  },
  {
    name: 'tags: at most 20 strings of 1 to 50 characters',
    schema: postCreate.properties.tags,
    holds: (v) => Array.isArray(v) && v.length <= 20 && v.every((t) => typeof t === 'string' && codePoints(t) >= 1 && codePoints(t) <= 50),
    reasons: [
      /more items than maxItems/,
      /an item is invalid \(shorter than minLength\)/,
      /an item is invalid \(longer than maxLength\)/,
      /wrong type: object/,
    ],
  },
  {
    name: 'a post to create (required and optional properties, no others)',
    schema: postCreate,
    holds: (v) =>
      isRecord(v) &&
      Object.keys(v).every((k) => ['title', 'content', 'tags'].includes(k)) &&
      typeof v.title === 'string' &&
      codePoints(v.title) >= 1 &&
      codePoints(v.title) <= 200 &&
      typeof v.content === 'string' &&
      codePoints(v.content) >= 1 &&
      codePoints(v.content) <= 500 &&
      (v.tags === undefined ||
        (Array.isArray(v.tags) && v.tags.length <= 20 && v.tags.every((t) => typeof t === 'string' && codePoints(t) >= 1 && codePoints(t) <= 50))),
    reasons: [
      /required property "title" is missing/,
      /required property "content" is missing/,
      /additionalProperties: false/,
      /property "tags": /,
      /wrong type: array where object/,
    ],
  },
  {
    name: 'a nullable string (OpenAPI 3.0), converted',
    schema: toJsonSchema({}, { type: 'string', maxLength: 500, nullable: true }),
    holds: (v) => v === null || (typeof v === 'string' && codePoints(v) <= 500),
    reasons: [/longer than maxLength/, /wrong type: boolean/],
  },
];

describe('schema arbitraries', () => {
  for (const c of CASES) {
    it(`${c.name}: valid values hold and ajv accepts them; invalid ones break it and ajv rejects them`, () => {
      const referenceCheck = referee.compile(c.schema);
      for (const value of fc.sample(validArbitrary(c.schema), { seed: 1, numRuns: RUNS })) {
        expect(c.holds(value), `valid? ${JSON.stringify(value)}`).toBe(true);
        expect(referenceCheck(value), `ajv on ${JSON.stringify(value)}`).toBe(true);
      }
      const invalid = invalidArbitrary(c.schema);
      expect(invalid).toBeDefined();
      const samples = fc.sample(invalid!, { seed: 2, numRuns: RUNS });
      for (const { value, reason } of samples) {
        expect(c.holds(value), `invalid (${reason})? ${JSON.stringify(value)}`).toBe(false);
        expect(referenceCheck(value), `ajv on ${JSON.stringify(value)} (${reason})`).toBe(false);
      }
      const reasons = new Set(samples.map((s) => s.reason));
      for (const expected of c.reasons)
        expect(
          [...reasons].some((r) => expected.test(r)),
          `${expected} among ${[...reasons].join(' | ')}`,
        ).toBe(true);
    });
  }

  it('reaches the limits of a range and of a length, not only the middle', () => {
    const integers = new Set(fc.sample(validArbitrary({ type: 'integer', minimum: 1, maximum: 100 }), { seed: 3, numRuns: RUNS }));
    expect(integers.has(1) && integers.has(100)).toBe(true);
    const unbounded = fc.sample(validArbitrary({ type: 'integer', minimum: 1 }), { seed: 3, numRuns: RUNS }) as number[];
    expect(unbounded.some((v) => v > Number.MAX_SAFE_INTEGER)).toBe(true);
    const lengths = new Set(
      fc.sample(validArbitrary({ type: 'string', minLength: 3, maxLength: 20 }), { seed: 3, numRuns: RUNS }).map((v) => codePoints(v as string)),
    );
    expect(lengths.has(3) && lengths.has(20)).toBe(true);
    const posts = fc.sample(validArbitrary(postCreate), { seed: 3, numRuns: RUNS }) as Record<string, unknown>[];
    expect(posts.some((p) => 'tags' in p) && posts.some((p) => !('tags' in p))).toBe(true);
  });

  it('offers known values often where they fit the schema, and never where they do not', () => {
    const schema = { type: 'integer', minimum: 1 };
    const ids = fc.sample(validArbitrary(schema, { hints: { post_id: [7, 0, 'x'] } }, 'post_id'), { seed: 4, numRuns: RUNS });
    expect(ids.filter((v) => v === 7).length).toBeGreaterThan(RUNS / 3);
    expect(ids).not.toContain(0);
    expect(ids).not.toContain('x');
  });

  it('converts OpenAPI schemas: $ref, nullable, boolean exclusive bounds, annotations', () => {
    const document = {
      components: {
        schemas: {
          Tag: { type: 'string', example: 'news', 'x-internal': true },
          Node: { type: 'object', properties: { next: { $ref: '#/components/schemas/Node' } } },
        },
      },
    };
    expect(toJsonSchema(document, { type: 'array', items: { $ref: '#/components/schemas/Tag' } })).toEqual({ type: 'array', items: { type: 'string' } });
    expect(toJsonSchema(document, { type: 'string', enum: ['a', 'b'], nullable: true })).toEqual({ type: ['string', 'null'], enum: ['a', 'b', null] });
    expect(toJsonSchema(document, { type: 'number', minimum: 0, exclusiveMinimum: true, maximum: 1, exclusiveMaximum: false })).toEqual({
      type: 'number',
      exclusiveMinimum: 0,
      maximum: 1,
    });
    // A recursive schema is cut where it repeats, and still compiles.
    const node = toJsonSchema(document, { $ref: '#/components/schemas/Node' });
    expect(node).toEqual({ type: 'object', properties: { next: {} } });
    expect(referee.compile(node)({ next: { anything: 1 } })).toBe(true);
    expect(() => toJsonSchema(document, { $ref: '#/components/schemas/Missing' })).toThrow(/names nothing/);
  });

  it('lists edge values, each marked valid or invalid as the schema says', () => {
    const byValue = (schema: Schema) => new Map(edgeCases(schema).map((e) => [JSON.stringify(e.value), e.valid]));
    const page = byValue({ type: 'integer', minimum: 1, maximum: 100 });
    expect([page.get('1'), page.get('100'), page.get('0'), page.get('101'), page.get('1.5')]).toEqual([true, true, false, false, false]);
    const when = byValue({ type: 'string', anyOf: [{ format: 'date' }, { format: 'date-time' }] });
    expect(when.get('"1998-12-31T23:59:60Z"')).toBe(true);
    expect(when.get('"2024-02-29"')).toBe(true);
    expect(when.get('"2023-02-29"')).toBe(false);
    for (const c of CASES) {
      for (const edge of edgeCases(c.schema)) expect(edge.valid, `${c.name}: ${JSON.stringify(edge.value)}`).toBe(c.holds(edge.value));
    }
  });
});
