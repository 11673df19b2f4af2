/**
 * Fuzzing an HTTP API from its OpenAPI document: the operations as the
 * document states them, fast-check arbitraries of requests for each (valid
 * ones, and ones broken in one named way), the checks an answer must pass,
 * and a log that keeps every distinct violation with a request that
 * reproduces it. Nothing here knows a route of this project: what it sends
 * and what it expects come from the document.
 */
import fc from 'fast-check';
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request as httpRequest } from 'undici';
import {
  edgeCases,
  invalidArbitrary,
  isValid,
  resolveRef,
  toJsonSchema,
  validArbitrary,
  validatorOf,
  type ArbitraryOptions,
  type Schema,
} from './openapi-arbitrary.js';
import { jpeg, png, webp } from './images.js';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required: boolean;
  schema: Schema;
  explode: boolean;
}

interface MediaSchema {
  schema: Schema;
  /** For multipart bodies: the content types a part may declare, by part name. */
  partTypes: Record<string, string[]>;
}

export interface Operation {
  /** "POST /api/v2/blog/posts", and the operationId when the document gives one. */
  label: string;
  operationId: string | undefined;
  method: string;
  /** The path template as the document writes it. */
  path: string;
  /** The server URL the document names (or implies), joined with the path template. */
  urlTemplate: string;
  parameters: Parameter[];
  body: { required: boolean; content: Record<string, MediaSchema> } | undefined;
  /** The operation's effective security: a token is needed unless one alternative is empty. */
  requiresAuth: boolean;
  /** Documented responses by status key ("200", "4XX", "default"): media type to schema (undefined: no schema). */
  responses: Record<string, Record<string, Schema | undefined>>;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function serverUrl(document: Record<string, unknown>, operation: Record<string, unknown>, pathItem: Record<string, unknown>, documentUrl: string): string {
  const servers = [operation.servers, pathItem.servers, document.servers].find((list) => Array.isArray(list) && list.length > 0) as
    | Record<string, unknown>[]
    | undefined;
  // No servers means "/" (OpenAPI 3, 4.8.1); a relative server URL is relative to where the document was served.
  const server = servers?.[0] ?? { url: '/' };
  let url = String(server.url);
  for (const [name, variable] of Object.entries((server.variables as Record<string, { default: string }>) ?? {}))
    url = url.replaceAll(`{${name}}`, variable.default);
  return new URL(url, documentUrl).href.replace(/\/$/, '');
}

/** Every operation of the document, with `$ref`s resolved and schemas converted to JSON Schema. */
export function operationsOf(document: Record<string, unknown>, documentUrl: string): Operation[] {
  const operations: Operation[] = [];
  for (const [path, rawItem] of Object.entries((document.paths as Record<string, unknown>) ?? {})) {
    const pathItem = resolveRef(document, rawItem);
    for (const method of METHODS) {
      const operation = pathItem[method];
      if (!isObject(operation)) continue;
      const byKey = new Map<string, Record<string, unknown>>();
      // Operation-level parameters override path-level ones with the same name and location.
      for (const raw of [...((pathItem.parameters as unknown[]) ?? []), ...((operation.parameters as unknown[]) ?? [])]) {
        const parameter = resolveRef(document, raw);
        byKey.set(`${parameter.in as string}:${parameter.name as string}`, parameter);
      }
      const parameters: Parameter[] = [...byKey.values()].map((p) => {
        const content = isObject(p.content) ? Object.values(p.content)[0] : undefined;
        const style = (p.style as string | undefined) ?? (p.in === 'query' || p.in === 'cookie' ? 'form' : 'simple');
        return {
          name: p.name as string,
          in: p.in as Parameter['in'],
          required: p.in === 'path' || p.required === true,
          schema: toJsonSchema(document, isObject(content) ? content.schema : p.schema),
          explode: (p.explode as boolean | undefined) ?? style === 'form',
        };
      });
      let body: Operation['body'];
      if (operation.requestBody !== undefined) {
        const requestBody = resolveRef(document, operation.requestBody);
        const content: Record<string, MediaSchema> = {};
        for (const [type, rawMedia] of Object.entries((requestBody.content as Record<string, unknown>) ?? {})) {
          const media = resolveRef(document, rawMedia);
          const partTypes: Record<string, string[]> = {};
          for (const [part, encoding] of Object.entries((media.encoding as Record<string, { contentType?: string }>) ?? {})) {
            if (encoding.contentType) partTypes[part] = encoding.contentType.split(',').map((t) => t.trim());
          }
          content[type] = { schema: toJsonSchema(document, media.schema), partTypes };
        }
        body = { required: requestBody.required === true, content };
      }
      const security = (operation.security ?? document.security ?? []) as Record<string, unknown>[];
      const responses: Operation['responses'] = {};
      for (const [status, rawResponse] of Object.entries((operation.responses as Record<string, unknown>) ?? {})) {
        const response = resolveRef(document, rawResponse);
        const content: Record<string, Schema | undefined> = {};
        for (const [type, rawMedia] of Object.entries((response.content as Record<string, unknown>) ?? {})) {
          const media = resolveRef(document, rawMedia);
          content[type] = media.schema === undefined ? undefined : toJsonSchema(document, media.schema);
        }
        responses[status] = content;
      }
      const operationId = typeof operation.operationId === 'string' ? operation.operationId : undefined;
      const server = serverUrl(document, operation, pathItem, documentUrl);
      // The server's path belongs in the label: documents of several mounts may share paths and operationIds.
      const fullPath = `${new URL(server).pathname.replace(/\/$/, '')}${path}`;
      operations.push({
        label: `${method.toUpperCase()} ${fullPath}${operationId ? ` (${operationId})` : ''}`,
        operationId,
        method: method.toUpperCase(),
        path,
        urlTemplate: `${server}${path}`,
        parameters,
        body,
        requiresAuth: security.length > 0 && !security.some((requirement) => Object.keys(requirement).length === 0),
        responses,
      });
    }
  }
  return operations;
}

// ---- requests ----

export type AuthKind = 'none' | 'valid' | 'invalid';
const AUTH_KINDS: readonly AuthKind[] = ['none', 'valid', 'invalid'];

/** A generated request before its Authorization header is chosen. */
export interface RequestShape {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: Buffer | undefined;
  /** The one thing the request breaks on purpose; undefined for a request the document says is valid. */
  broken: string | undefined;
  /** The Authorization header values for the 'valid' and 'invalid' variants. */
  validAuthorization: string;
  invalidAuthorization: string;
}

export interface FuzzRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: Buffer | undefined;
  broken: string | undefined;
  auth: AuthKind;
  /** What else is worth knowing about how the request was made (an edge value it probes). */
  note?: string;
  /** For a request cut down to what still fails: how the request it was cut from was made. */
  cutFrom?: string;
}

export interface FuzzOptions {
  /** Tokens that authenticate (any one per request), by the name a reproduction uses for them: { USER_TOKEN: 'mat_...' }. */
  tokens: Record<string, string>;
  /**
   * Known-good values by property or parameter name: ids that exist, a user's
   * credentials. Half the requests draw on them (all together, so a login
   * gets a matching email and password), half do not (so a sign-up is not
   * always a duplicate).
   */
  hints?: ArbitraryOptions['hints'];
}

export function withAuth(shape: RequestShape, auth: AuthKind): FuzzRequest {
  const headers = { ...shape.headers };
  if (auth === 'valid') headers.authorization = shape.validAuthorization;
  if (auth === 'invalid') headers.authorization = shape.invalidAuthorization;
  return { method: shape.method, url: shape.url, headers, body: shape.body, broken: shape.broken, auth };
}

function scalar(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === null || value === undefined) return '';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/** Query pairs in the document's style for the parameter (form; exploded unless it says otherwise). */
function queryPairs(parameter: Parameter, value: unknown): [string, string][] {
  if (Array.isArray(value)) return parameter.explode ? value.map((item) => [parameter.name, scalar(item)]) : [[parameter.name, value.map(scalar).join(',')]];
  if (isObject(value)) {
    const entries = Object.entries(value).map(([k, v]): [string, string] => [k, scalar(v)]);
    return parameter.explode ? entries : [[parameter.name, entries.flat().join(',')]];
  }
  return [[parameter.name, scalar(value)]];
}

const encodeQuery = (pairs: [string, string][]) => pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
/** HTTP header values carry visible Latin-1 only; anything else is percent-encoded rather than dropped. */
const headerSafe = (value: string) => (/^[\t\x20-\x7e\x80-\xff]*$/.test(value) ? value : encodeURIComponent(value));

/** Marks a required parameter left out on purpose (undefined is an optional one not sent). */
const MISSING = Symbol('missing');

interface Draft {
  values: unknown[];
  /** A path value sent as it is, not percent-encoded: for malformed escapes. */
  rawPath?: { index: number; text: string };
  body: { contentType: string | undefined; bytes: Buffer } | undefined;
  broken: string | undefined;
}

function build(operation: Operation, draft: Draft, extraHeaders: Record<string, string>): Omit<RequestShape, 'validAuthorization' | 'invalidAuthorization'> {
  let url = operation.urlTemplate;
  const query: [string, string][] = [];
  const headers: Record<string, string> = { ...extraHeaders };
  const cookies: string[] = [];
  operation.parameters.forEach((parameter, index) => {
    const value = draft.values[index];
    if (value === undefined || value === MISSING) return;
    if (parameter.in === 'path') {
      const text = draft.rawPath?.index === index ? draft.rawPath.text : encodeURIComponent(Array.isArray(value) ? value.map(scalar).join(',') : scalar(value));
      url = url.replace(`{${parameter.name}}`, text);
    } else if (parameter.in === 'query') query.push(...queryPairs(parameter, value));
    else if (parameter.in === 'header') headers[parameter.name.toLowerCase()] = headerSafe(scalar(value));
    else cookies.push(`${parameter.name}=${encodeURIComponent(scalar(value))}`);
  });
  if (cookies.length) headers.cookie = cookies.join('; ');
  if (draft.body?.contentType !== undefined) headers['content-type'] = draft.body.contentType;
  return {
    method: operation.method,
    url: query.length ? `${url}?${encodeQuery(query)}` : url,
    headers,
    body: draft.body?.bytes,
    broken: draft.broken,
  };
}

// -- bodies --

const isJsonType = (type: string) => /^application\/(.+\+)?json$/i.test(type);
const BOUNDARY = '----miniappFuzzBoundary7MA4YWxkTrZu0gW';

interface Part {
  name: string;
  filename?: string;
  contentType?: string;
  data: Buffer;
}

/** A multipart/form-data body with CRLF line ends, as browsers and curl write it. */
function multipartBody(parts: Part[], boundary = BOUNDARY): Buffer {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition = `form-data; name="${part.name}"${part.filename !== undefined ? `; filename="${part.filename}"` : ''}`;
    const head = `--${boundary}\r\nContent-Disposition: ${disposition}\r\n${part.contentType ? `Content-Type: ${part.contentType}\r\n` : ''}\r\n`;
    chunks.push(Buffer.from(head, 'utf8'), part.data, Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}

const isFileSchema = (schema: Schema) => schema.format === 'binary' || schema.contentMediaType !== undefined || schema.contentEncoding === 'binary';

/** A file property of a multipart schema: one part, or (for an array of files) several under the same name. */
interface FileField {
  name: string;
  many: boolean;
  maxItems: number | undefined;
  minItems: number;
  required: boolean;
}

function fileFields(schema: Schema): FileField[] {
  const properties = isObject(schema.properties) ? (schema.properties as Record<string, Schema>) : {};
  const required = Array.isArray(schema.required) ? (schema.required as string[]) : [];
  return Object.entries(properties).flatMap(([name, sub]): FileField[] => {
    if (isFileSchema(sub)) return [{ name, many: false, maxItems: undefined, minItems: 1, required: required.includes(name) }];
    if (isObject(sub.items) && isFileSchema(sub.items as Schema)) {
      return [
        {
          name,
          many: true,
          maxItems: sub.maxItems as number | undefined,
          minItems: Math.max(1, (sub.minItems as number | undefined) ?? 1),
          required: required.includes(name),
        },
      ];
    }
    return [];
  });
}

const IMAGE_KINDS = { png: { make: png, type: 'image/png' }, jpeg: { make: jpeg, type: 'image/jpeg' }, webp: { make: webp, type: 'image/webp' } } as const;

/** A real, small image of a documented type (any of ours when the document names none). */
function imageFile(allowed: string[] | undefined): fc.Arbitrary<{ filename: string; contentType: string; data: Buffer }> {
  const kinds = (Object.keys(IMAGE_KINDS) as (keyof typeof IMAGE_KINDS)[]).filter(
    (kind) => !allowed?.length || allowed.some((type) => type === IMAGE_KINDS[kind].type || type === 'image/*' || type === '*/*'),
  );
  return fc
    .tuple(
      fc.constantFrom(...(kinds.length ? kinds : (['png'] as const))),
      fc.integer({ min: 1, max: 64 }),
      fc.integer({ min: 1, max: 64 }),
      fc.constantFrom('photo', 'IMG_0001', 'résumé scan', '../../etc/passwd', ''),
    )
    .map(([kind, width, height, stem]) => ({ filename: `${stem}.${kind}`, contentType: IMAGE_KINDS[kind].type, data: IMAGE_KINDS[kind].make(width, height) }));
}

/** Bytes that are no image: empty, text, a truncated PNG header, random noise. */
const junkFile = fc
  .oneof(
    fc.constant(Buffer.alloc(0)),
    fc.constant(Buffer.from('not an image\n')),
    fc.constant(png(8, 8).subarray(0, 20)),
    fc.constant(Buffer.from('GIF89a\x01\x00\x01\x00\x00\x00\x00;', 'latin1')),
    fc.uint8Array({ minLength: 1, maxLength: 512 }).map((bytes) => Buffer.from(bytes)),
  )
  .map((data) => ({ filename: 'junk.png', contentType: 'image/png', data }));

interface BodyVariant {
  valid: fc.Arbitrary<{ contentType: string | undefined; bytes: Buffer }>;
  /** Bodies broken in one way each, labelled. */
  broken: { weight: number; arbitrary: fc.Arbitrary<{ contentType: string | undefined; bytes: Buffer; reason: string }> }[];
}

function jsonBody(type: string, media: MediaSchema, options: ArbitraryOptions): BodyVariant {
  const valid = validArbitrary(media.schema, options);
  const contentType = fc.constantFrom(type, `${type}; charset=utf-8`);
  const invalid = invalidArbitrary(media.schema, options);
  const text = (value: unknown) => Buffer.from(JSON.stringify(value) ?? 'null', 'utf8');
  const broken: BodyVariant['broken'] = [
    {
      weight: 2,
      arbitrary: fc
        .tuple(valid, fc.constantFrom('truncate', '{', '{"a":}', "{'single': 1}", 'NaN', '[1,]', '{"a":1}{"b":2}', '\u0000', '{"a":"\\x"}', ' '))
        .map(([value, how]) => {
          const json = JSON.stringify(value) ?? 'null';
          return {
            contentType: type,
            bytes: Buffer.from(how === 'truncate' ? json.slice(0, Math.max(1, json.length - 1)) : how, 'utf8'),
            reason: 'malformed JSON',
          };
        }),
    },
    {
      weight: 2,
      arbitrary: fc
        .tuple(
          valid,
          fc.constantFrom(
            'text/plain',
            'application/x-www-form-urlencoded',
            'application/xml',
            'application/octet-stream',
            `multipart/form-data; boundary=${BOUNDARY}`,
            'text/json',
            'application/json-patch+json',
            undefined,
          ),
        )
        .map(([value, other]) => ({
          contentType: other,
          bytes: text(value),
          reason: other === undefined ? 'a JSON body without a content-type' : `a JSON body sent as ${other.split(';')[0]}`,
        })),
    },
  ];
  if (invalid)
    broken.push({
      weight: 4,
      arbitrary: fc.tuple(invalid, contentType).map(([inv, ct]) => ({ contentType: ct, bytes: text(inv.value), reason: `body: ${inv.reason}` })),
    });
  return { valid: fc.tuple(valid, contentType).map(([value, ct]) => ({ contentType: ct, bytes: text(value) })), broken };
}

function multipartVariant(type: string, media: MediaSchema, options: ArbitraryOptions): BodyVariant {
  const files = fileFields(media.schema);
  const properties = isObject(media.schema.properties) ? (media.schema.properties as Record<string, Schema>) : {};
  const required = Array.isArray(media.schema.required) ? (media.schema.required as string[]) : [];
  const fields = Object.entries(properties).filter(([name]) => !files.some((f) => f.name === name));
  const contentType = `${type.split(';')[0]}; boundary=${BOUNDARY}`;
  const fileParts = (
    field: FileField,
    count: fc.Arbitrary<number>,
    file: fc.Arbitrary<{ filename: string; contentType: string; data: Buffer }>,
    name = field.name,
  ) => count.chain((n) => fc.array(file, { minLength: n, maxLength: n })).map((list) => list.map((f): Part => ({ name, ...f })));
  const validCount = (field: FileField) =>
    field.many ? fc.integer({ min: field.minItems, max: Math.max(field.minItems, Math.min(field.maxItems ?? 3, 4)) }) : fc.constant(1);
  const image = (field: FileField) => imageFile(media.partTypes[field.name]);
  const textParts = fc
    .tuple(
      ...fields.map(([name, schema]) =>
        required.includes(name) ? validArbitrary(schema, options, name) : fc.option(validArbitrary(schema, options, name), { nil: undefined }),
      ),
    )
    .map((values) => values.flatMap((value, i): Part[] => (value === undefined ? [] : [{ name: fields[i]![0], data: Buffer.from(scalar(value), 'utf8') }])));
  const fileSets = (choose: (field: FileField) => fc.Arbitrary<Part[]> | undefined) =>
    fc.tuple(...files.map((field) => choose(field) ?? fc.constant([] as Part[]))).map((sets) => sets.flat());
  const assemble = (sets: fc.Arbitrary<Part[]>) => fc.tuple(sets, textParts).map(([fileList, texts]) => [...texts, ...fileList]);
  const validParts = assemble(
    fileSets((field) =>
      field.required
        ? fileParts(field, validCount(field), image(field))
        : fc.option(fileParts(field, validCount(field), image(field)), { nil: undefined }).map((p) => p ?? []),
    ),
  );
  const broken: BodyVariant['broken'] = [];
  const wrap = (parts: fc.Arbitrary<Part[]>, reason: string, weight = 1) =>
    broken.push({ weight, arbitrary: parts.map((list) => ({ contentType, bytes: multipartBody(list), reason })) });
  if (files.length > 0) {
    wrap(assemble(fileSets((field) => fileParts(field, validCount(field), junkFile))), 'file parts hold bytes that are no image', 2);
    wrap(
      assemble(
        fileSets((field) =>
          fc
            .constantFrom('image', 'File', `${field.name}[]`, field.many ? field.name.replace(/s$/, '') : `${field.name}s`, 'upload')
            .chain((name) => fileParts(field, fc.constant(1), image(field), name)),
        ),
      ),
      'a file under a part name the document does not give',
      2,
    );
    wrap(
      assemble(fileSets((field) => fc.constant([{ name: field.name, data: Buffer.from('a text field, not a file') }]))),
      'a text field where a file is documented',
    );
    const capped = files.filter((field) => field.many && field.maxItems !== undefined);
    if (capped.length)
      wrap(
        assemble(fileSets((field) => (capped.includes(field) ? fileParts(field, fc.constant(field.maxItems! + 1), image(field)) : undefined))),
        'more files than maxItems',
      );
  }
  if (required.length > 0) wrap(fc.constant([]), 'no parts at all');
  broken.push({
    weight: 2,
    arbitrary: fc.tuple(validParts, fc.constantFrom('truncated', 'other boundary', 'no boundary', 'as JSON')).map(([parts, how]) => {
      const bytes = multipartBody(parts);
      if (how === 'truncated') return { contentType, bytes: bytes.subarray(0, Math.max(1, bytes.length - 40)), reason: 'a truncated multipart body' };
      if (how === 'other boundary')
        return { contentType: `${type}; boundary=not-the-boundary`, bytes, reason: 'a multipart body whose boundary is not the declared one' };
      if (how === 'no boundary') return { contentType: type, bytes, reason: 'multipart/form-data without a boundary' };
      return { contentType: 'application/json', bytes: Buffer.from(JSON.stringify({ file: 'x' })), reason: 'JSON where multipart/form-data is documented' };
    }),
  });
  return { valid: validParts.map((parts) => ({ contentType, bytes: multipartBody(parts) })), broken };
}

function formBody(type: string, media: MediaSchema, options: ArbitraryOptions): BodyVariant {
  const encode = (value: unknown) =>
    Buffer.from(isObject(value) ? encodeQuery(Object.entries(value).map(([k, v]): [string, string] => [k, scalar(v)])) : scalar(value));
  const invalid = invalidArbitrary(media.schema, options);
  return {
    valid: validArbitrary(media.schema, options).map((value) => ({ contentType: type, bytes: encode(value) })),
    broken: invalid ? [{ weight: 1, arbitrary: invalid.map((inv) => ({ contentType: type, bytes: encode(inv.value), reason: `body: ${inv.reason}` })) }] : [],
  };
}

function otherBody(type: string): BodyVariant {
  return { valid: fc.uint8Array({ maxLength: 256 }).map((bytes) => ({ contentType: type, bytes: Buffer.from(bytes) })), broken: [] };
}

function bodyVariants(operation: Operation, options: ArbitraryOptions): BodyVariant[] {
  return Object.entries(operation.body?.content ?? {}).map(([type, media]) => {
    const bare = type.split(';')[0]!.trim().toLowerCase();
    if (isJsonType(bare)) return jsonBody(bare, media, options);
    if (bare === 'multipart/form-data') return multipartVariant(bare, media, options);
    if (bare === 'application/x-www-form-urlencoded') return formBody(bare, media, options);
    return otherBody(bare);
  });
}

// -- authorization --

function authorizationHeaders(tokens: Record<string, string>): { valid: fc.Arbitrary<string>; invalid: fc.Arbitrary<string> } {
  const values = Object.values(tokens);
  if (values.length === 0) throw new Error('fuzzing needs at least one token that authenticates');
  const token = fc.constantFrom(...values);
  return {
    valid: token.map((t) => `Bearer ${t}`),
    invalid: fc.oneof(
      fc.constantFrom('Bearer', 'Bearer ', 'Bearer not-a-token', 'Basic dXNlcjpwYXNzd29yZA==', 'Token abc', 'null', `Bearer ${'A'.repeat(2048)}`, 'Bearer a b'),
      token.chain((t) => fc.constantFrom(`Bearer ${t}x`, `Bearer ${t.slice(0, -1)}`, `Token ${t}`, `Bearer ${t} extra`, t, `Bearer ${t.toUpperCase()}`)),
    ),
  };
}

// -- the request arbitrary --

/**
 * Requests for one operation: half valid by the document, half broken in
 * exactly one named way (a parameter, a missing one, the body, its content
 * type, its encoding), so that an answer can be traced to its cause.
 */
export function requestArbitrary(operation: Operation, options: FuzzOptions): fc.Arbitrary<RequestShape> {
  const drafts = options.hints ? fc.oneof(draftArbitrary(operation, { hints: options.hints }), draftArbitrary(operation, {})) : draftArbitrary(operation, {});
  const auth = authorizationHeaders(options.tokens);
  return fc.tuple(drafts, auth.valid, auth.invalid).map(([draft, validAuthorization, invalidAuthorization]) => ({
    ...build(operation, draft, { accept: 'application/json' }),
    validAuthorization,
    invalidAuthorization,
  }));
}

function draftArbitrary(operation: Operation, arbitraryOptions: ArbitraryOptions): fc.Arbitrary<Draft> {
  const parameters = operation.parameters;
  const validValues = parameters.map((p) => validArbitrary(p.schema, arbitraryOptions, p.name));
  const values = fc.tuple(...parameters.map((p, i) => (p.required ? validValues[i]! : fc.option(validValues[i]!, { nil: undefined, freq: 2 }))));
  const variants = bodyVariants(operation, arbitraryOptions);
  const needsBody = operation.body?.required === true && variants.length > 0;
  const validBody =
    variants.length === 0
      ? fc.constant(undefined)
      : needsBody
        ? fc.oneof(...variants.map((v) => v.valid))
        : fc.option(fc.oneof(...variants.map((v) => v.valid)), { nil: undefined, freq: 4 });

  const valid: fc.Arbitrary<Draft> = fc.tuple(values, validBody).map(([vals, body]) => ({ values: vals, body, broken: undefined }));
  const broken: fc.Arbitrary<Draft>[] = [];
  parameters.forEach((parameter, index) => {
    const invalid = invalidArbitrary(parameter.schema, arbitraryOptions);
    if (invalid) {
      broken.push(
        fc.tuple(valid, invalid).map(([draft, inv]) => {
          const copy = [...draft.values];
          copy[index] = inv.value;
          return { ...draft, values: copy, broken: `${parameter.in} parameter "${parameter.name}": ${inv.reason}` };
        }),
      );
    }
    if (parameter.required && parameter.in !== 'path') {
      broken.push(
        valid.map((draft) => ({
          ...draft,
          values: draft.values.map((v, i) => (i === index ? MISSING : v)),
          broken: `required ${parameter.in} parameter "${parameter.name}" is missing`,
        })),
      );
    }
    if (parameter.in === 'path') {
      broken.push(
        fc
          .tuple(valid, fc.constantFrom('%', '%zz', '%E0%A4%A', '%C0%AF', '%FF', '%%', '1%'))
          .map(([draft, text]) => ({ ...draft, rawPath: { index, text }, broken: `path parameter "${parameter.name}" with malformed percent-encoding` })),
      );
    }
  });
  for (const variant of variants)
    for (const b of variant.broken)
      broken.push(
        fc
          .tuple(values, b.arbitrary)
          .map(([vals, body]) => ({ values: vals, body: { contentType: body.contentType, bytes: body.bytes }, broken: body.reason })),
      );
  if (needsBody) broken.push(values.map((vals) => ({ values: vals, body: undefined, broken: 'the required body is missing' })));
  if (variants.length === 0 && !['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE'].includes(operation.method)) {
    broken.push(
      values.map((vals) => ({
        values: vals,
        body: { contentType: 'application/json', bytes: Buffer.from('{"unexpected":true}') },
        broken: 'a body the operation does not describe',
      })),
    );
  }
  return broken.length ? fc.oneof({ weight: 1, arbitrary: valid }, { weight: 1, arbitrary: fc.oneof(...broken) }) : valid;
}

/** Of a few samples, the one with the shortest JSON: a plain base for edge requests, not a 100 kB one. */
function plainest<T>(arbitrary: fc.Arbitrary<T>, seed: number): T {
  const samples = fc.sample(arbitrary, { seed, numRuns: 20 });
  const size = (value: T) => (Buffer.isBuffer(value) ? value.length : (JSON.stringify(value) ?? '').length);
  return samples.reduce((best, value) => (size(value) < size(best) ? value : best));
}

/** A plain valid value: a known one where the hints have one that fits, else required properties only, else the plainest sample. */
function plainValue(schema: Schema, hints: NonNullable<ArbitraryOptions['hints']>, name: string | undefined, seed: number): unknown {
  const hinted = name === undefined ? undefined : hints[name]?.find((value) => isValid(schema, value));
  if (hinted !== undefined) return hinted;
  if (isObject(schema.properties)) {
    const properties = schema.properties as Record<string, Schema>;
    const required = Array.isArray(schema.required) ? (schema.required as string[]) : [];
    const value = Object.fromEntries(required.filter((key) => properties[key]).map((key) => [key, plainValue(properties[key]!, hints, key, seed)]));
    if (isValid(schema, value)) return value;
  }
  return plainest(validArbitrary(schema, { hints }), seed);
}

/**
 * The plain phase and the edge phase. Plain: the operation's plainest valid
 * request, once with the known values (hints) and once without, so that
 * each operation has a request that should succeed whatever the random
 * phase drew. Edge: one request per edge value (see edgeCases) of each
 * parameter and of each top-level property of a JSON body, in an otherwise
 * plain request. Sent with valid tokens only, taken in turn: these requests
 * are there to reach the handlers, which a secured operation does not run
 * without a token; the random phase covers the other kinds of Authorization.
 */
function edgeRequests(operation: Operation, options: FuzzOptions, seed: number): FuzzRequest[] {
  const hints = options.hints ?? {};
  const parameters = operation.parameters;
  const paramsWith = (known: typeof hints) => parameters.map((p) => (p.required ? plainValue(p.schema, known, p.name, seed) : undefined));
  const jsonType = Object.keys(operation.body?.content ?? {}).find((type) => isJsonType(type.split(';')[0]!.trim().toLowerCase()));
  const jsonSchema = jsonType ? operation.body!.content[jsonType]!.schema : undefined;
  const variants = bodyVariants(operation, { hints });
  const bodyWith = (known: typeof hints): Draft['body'] => {
    if (jsonType && jsonSchema) return { contentType: jsonType, bytes: Buffer.from(JSON.stringify(plainValue(jsonSchema, known, undefined, seed)) ?? 'null') };
    return variants.length && operation.body?.required ? plainest(variants[0]!.valid, seed) : undefined;
  };
  const tokens = Object.values(options.tokens);
  const requests: FuzzRequest[] = [];
  const push = (draft: Draft, note: string) => {
    const token = tokens[requests.length % tokens.length]!;
    requests.push({ ...build(operation, draft, { accept: 'application/json', authorization: `Bearer ${token}` }), auth: 'valid', note });
  };
  push({ values: paramsWith(hints), body: bodyWith(hints), broken: undefined }, 'the plain request with known values');
  push({ values: paramsWith({}), body: bodyWith({}), broken: undefined }, 'the plain request without known values');
  const base = paramsWith(hints);
  const baseBody = bodyWith({});
  parameters.forEach((parameter, index) => {
    if (parameter.in === 'path')
      push(
        { values: base, rawPath: { index, text: '%E0%A4%A' }, body: baseBody, broken: `path parameter "${parameter.name}" with malformed percent-encoding` },
        'edge: a malformed escape in the path',
      );
    for (const edge of edgeCases(parameter.schema)) {
      if (parameter.in === 'path' && (edge.value === '' || edge.value === null)) continue; // an empty segment is another route
      const values = [...base];
      values[index] = edge.value;
      push(
        { values, body: baseBody, broken: edge.valid ? undefined : `${parameter.in} parameter "${parameter.name}": ${edge.reason}` },
        `edge: ${parameter.in} parameter "${parameter.name}" is ${edge.reason}`,
      );
    }
  });
  if (jsonType && jsonSchema && isObject(jsonSchema.properties)) {
    const plain = plainValue(jsonSchema, {}, undefined, seed);
    const bodyBase = isObject(plain) ? plain : {};
    for (const [name, schema] of Object.entries(jsonSchema.properties as Record<string, Schema>)) {
      for (const edge of edgeCases(schema)) {
        const value = { ...bodyBase, [name]: edge.value };
        push(
          {
            values: base,
            body: { contentType: jsonType, bytes: Buffer.from(JSON.stringify(value)) },
            broken: isValid(jsonSchema, value) ? undefined : `body property "${name}": ${edge.reason}`,
          },
          `edge: body property "${name}" is ${edge.reason}`,
        );
      }
    }
  }
  return requests;
}

/** A fixed seed per operation, from its label, so adding an operation does not reshuffle the others. */
function seedFor(operation: Operation, base: number): number {
  return (createHash('sha256').update(operation.label).digest().readInt32BE(0) ^ base) | 0;
}

// ---- answers ----

export interface Answer {
  status: number;
  contentType: string | undefined;
  text: string;
}

export async function send(request: FuzzRequest): Promise<Answer> {
  const response = await httpRequest(request.url, { method: request.method as 'GET', headers: request.headers, body: request.body });
  const text = await response.body.text();
  const type = response.headers['content-type'];
  return { status: response.statusCode, contentType: Array.isArray(type) ? type[0] : type, text };
}

const STACK_TRACE = /\n\s+at\s|\bat\s+\S+\s+\((?:file:|node:|\/)|node:internal|\.(?:[cm]?js|ts):\d+:\d+/;
const ERROR_KEYS = ['error', 'detail', 'code'];

/** The documented response for a status: the exact code, then its range ("4XX"), then "default". */
function documentedResponse(operation: Operation, status: number): { key: string; content: Record<string, Schema | undefined> } | undefined {
  for (const key of [String(status), `${String(status)[0]}XX`, 'default']) {
    const content = operation.responses[key] ?? operation.responses[key.toLowerCase()];
    if (content) return { key, content };
  }
  return undefined;
}

function mediaMatches(documented: string, actual: string): boolean {
  const [type, sub] = documented.toLowerCase().split(';')[0]!.trim().split('/');
  const [aType, aSub] = actual.split('/');
  return (type === '*' || type === aType) && (sub === '*' || sub === aSub);
}

/** Short, value-free descriptions of ajv's errors, so the same defect seen twice is one violation. */
function schemaErrors(schema: Schema, value: unknown): string | undefined {
  const validate = validatorOf(schema);
  if (validate(value)) return undefined;
  const messages = new Set((validate.errors ?? []).map((e) => `${e.instancePath.replace(/\/\d+(?=\/|$)/g, '/*') || '(root)'} ${e.message ?? e.keyword}`));
  return [...messages].sort().join('; ');
}

function errorBodyProblem(body: unknown): string | undefined {
  if (!isObject(body)) return 'the error body is not a JSON object';
  const problems: string[] = [];
  const missing = ERROR_KEYS.filter((key) => !(key in body));
  const extra = Object.keys(body).filter((key) => !ERROR_KEYS.includes(key));
  if (missing.length) problems.push(`missing ${missing.join(', ')}`);
  if (extra.length) problems.push(`extra ${extra.sort().join(', ')}`);
  if ('error' in body && (typeof body.error !== 'string' || body.error === '')) problems.push('error is not a non-empty string');
  if ('code' in body && (typeof body.code !== 'string' || body.code === '')) problems.push('code is not a non-empty string');
  if ('detail' in body && typeof body.detail !== 'string' && !isObject(body.detail)) problems.push('detail is neither a string nor an object');
  return problems.length ? `the error body is not { error, detail, code }: ${problems.join('; ')}` : undefined;
}

/** Every way an answer breaks the document or the house rules; empty when it is fine. */
export function checkAnswer(operation: Operation, request: FuzzRequest, answer: Answer): string[] {
  const problems: string[] = [];
  let parsed: unknown;
  let isJson = false;
  const mediaType = answer.contentType?.split(';')[0]?.trim().toLowerCase();
  if (answer.text !== '' && mediaType && isJsonType(mediaType)) {
    try {
      parsed = JSON.parse(answer.text);
      isJson = true;
    } catch {
      problems.push(`the body is declared ${mediaType} but is not JSON`);
    }
  }
  const code = isJson && isObject(parsed) && typeof parsed.code === 'string' ? ` (code ${parsed.code})` : '';
  if (answer.status >= 500) problems.push(`a server error${code}`);
  if (STACK_TRACE.test(answer.text)) problems.push('the body shows a stack trace or a source path');
  if (answer.status >= 200 && answer.status < 300 && operation.requiresAuth && request.auth !== 'valid') {
    problems.push(`succeeded without a valid token (${request.auth === 'none' ? 'no Authorization header' : 'a bad Authorization header'})`);
  }
  const errorShape =
    answer.status >= 400 ? (isJson ? errorBodyProblem(parsed) : `the error body is not JSON (content-type ${mediaType ?? 'none'})`) : undefined;
  if (errorShape) problems.push(`${errorShape}${code}`);
  const documented = documentedResponse(operation, answer.status);
  if (!documented) {
    // A 5xx is already reported as one; "and it is not documented" would only say it twice.
    if (answer.status < 500)
      problems.push(`status ${answer.status}${code} is not documented (documented: ${Object.keys(operation.responses).join(', ') || 'none'})`);
  } else {
    const types = Object.keys(documented.content);
    if (types.length === 0) {
      if (answer.text !== '') problems.push(`a body where the documented ${documented.key} response has none`);
    } else if (answer.text === '') {
      problems.push(`an empty body where the documented ${documented.key} response has one`);
    } else {
      const match = mediaType ? types.find((type) => mediaMatches(type, mediaType)) : undefined;
      if (!match) problems.push(`content-type ${mediaType ?? '(none)'} is not documented for ${documented.key} (documented: ${types.join(', ')})`);
      const schema = match ? documented.content[match] : undefined;
      // An error body already found off the house shape fails its documented schema for the same reason; one report is enough.
      if (schema && isJson && !errorShape) {
        const errors = schemaErrors(schema, parsed);
        if (errors) problems.push(`the body does not match the documented ${documented.key} schema: ${errors}`);
      }
    }
  }
  return problems;
}

// ---- running ----

/** The query pairs and top-level JSON body properties of a request, each removable on its own. */
function inputsOf(request: FuzzRequest): { query: [string, string][]; body: Record<string, unknown> | undefined } {
  const url = new URL(request.url);
  const query = url.search
    ? url.search
        .slice(1)
        .split('&')
        .map((pair): [string, string] => {
          const at = pair.indexOf('=');
          return at < 0 ? [pair, ''] : [pair.slice(0, at), pair.slice(at + 1)];
        })
    : [];
  let body: Record<string, unknown> | undefined;
  if (request.body && isJsonType((request.headers['content-type'] ?? '').split(';')[0]!.trim())) {
    try {
      const parsed: unknown = JSON.parse(request.body.toString('utf8'));
      if (isObject(parsed)) body = parsed;
    } catch {
      // Malformed JSON stays whole.
    }
  }
  return { query, body };
}

function withInputs(request: FuzzRequest, query: [string, string][], body: Record<string, unknown> | undefined): FuzzRequest {
  const url = new URL(request.url);
  const raw = query.map(([k, v]) => `${k}=${v}`).join('&');
  return { ...request, url: `${url.origin}${url.pathname}${raw ? `?${raw}` : ''}`, body: body ? Buffer.from(JSON.stringify(body)) : request.body };
}

/**
 * The smallest request (fewest query pairs, fewest body properties) that
 * still fails, found by leaving inputs out one at a time. The answer of a
 * 5xx says nothing of its cause; the inputs that are left do.
 */
export async function minimise(
  request: FuzzRequest,
  stillFails: (request: FuzzRequest) => Promise<boolean>,
): Promise<{ request: FuzzRequest; inputs: string[] }> {
  let { query, body } = inputsOf(request);
  for (let i = query.length - 1; i >= 0; i--) {
    const fewer: [string, string][] = query.filter((_, j) => j !== i);
    if (await stillFails(withInputs(request, fewer, body))) query = fewer;
  }
  if (body) {
    for (const key of Object.keys(body)) {
      const fewer: Record<string, unknown> = { ...body };
      delete fewer[key];
      if (await stillFails(withInputs(request, query, fewer))) body = fewer;
    }
  }
  let minimal = withInputs(request, query, body);
  if (minimal.headers.authorization !== undefined && (await stillFails(anonymous(minimal)))) minimal = anonymous(minimal);
  const inputs = [...new Set(query.map(([k]) => `query ${decodeURIComponent(k)}`)), ...Object.keys(body ?? {}).map((k) => `body ${k}`)];
  return { request: minimal, inputs };
}

export interface FuzzRun extends FuzzOptions {
  operations: Operation[];
  seed: number;
  runsPerOperation: number;
  /**
   * Operations that use up the token they are sent with (a revocation), by operationId: each of their requests that
   * carries the named token carries a fresh one instead, made by `mint`, so the token the rest of the run uses
   * stays valid, and each such request can reach the success path. A reproduction names it `${name}` as well.
   */
  consumesToken?: { operationIds: string[]; name: string; mint: () => Promise<string> };
}

/**
 * Sends every generated request to its operation, with each kind of
 * Authorization, one after the other (so the run is the same every time),
 * and logs what breaks; a 5xx is minimised so that its cause shows.
 */
export async function fuzz(run: FuzzRun): Promise<ViolationLog> {
  const log = new ViolationLog(run.tokens);
  for (const operation of run.operations) {
    const seed = seedFor(operation, run.seed);
    const culprits: Culprits = new Map();
    const consumes = run.consumesToken?.operationIds.includes(operation.operationId ?? '') ? run.consumesToken : undefined;
    const send = async (request: FuzzRequest) =>
      exchange(log, operation, consumes ? await withFreshToken(request, run.tokens, consumes, log) : request, culprits);
    for (const shape of fc.sample(requestArbitrary(operation, run), { seed, numRuns: run.runsPerOperation })) {
      for (const auth of AUTH_KINDS) await send(withAuth(shape, auth));
    }
    for (const sent of edgeRequests(operation, run, seed)) await send(sent);
  }
  log.checkReachedSuccess(run.operations);
  return log;
}

/** The request with the named token in its Authorization header replaced by a fresh one (the log knows its name). */
async function withFreshToken(
  request: FuzzRequest,
  tokens: Record<string, string>,
  consumes: NonNullable<FuzzRun['consumesToken']>,
  log: ViolationLog,
): Promise<FuzzRequest> {
  const used = tokens[consumes.name];
  const header = request.headers.authorization;
  if (!used || header === undefined || !header.includes(used)) return request;
  const fresh = await consumes.mint();
  log.alias(consumes.name, fresh);
  return { ...request, headers: { ...request.headers, authorization: header.replaceAll(used, fresh) } };
}

/** Per status, the sets of input names that have been enough for it: tried first, before a full cut-down. */
type Culprits = Map<number, string[][]>;

/** The request with only the named inputs ('query page', 'body when'), or undefined when it lacks one of them. */
function keeping(request: FuzzRequest, names: string[]): FuzzRequest | undefined {
  const { query, body } = inputsOf(request);
  const keptQuery = query.filter(([k]) => names.includes(`query ${decodeURIComponent(k)}`));
  const keptBody = body ? Object.fromEntries(Object.entries(body).filter(([k]) => names.includes(`body ${k}`))) : undefined;
  const present = new Set([...keptQuery.map(([k]) => `query ${decodeURIComponent(k)}`), ...Object.keys(keptBody ?? {}).map((k) => `body ${k}`)]);
  if (names.some((name) => !present.has(name))) return undefined;
  return withInputs(request, keptQuery, keptBody);
}

function anonymous(request: FuzzRequest): FuzzRequest {
  const { authorization: _, ...headers } = request.headers;
  return { ...request, headers, auth: 'none' };
}

async function exchange(log: ViolationLog, operation: Operation, sent: FuzzRequest, culprits: Culprits): Promise<void> {
  let answer: Answer;
  try {
    answer = await send(sent);
  } catch (error) {
    log.add(operation.label, undefined, `no HTTP answer: ${(error as Error).message}`, sent);
    return;
  }
  const problems = checkAnswer(operation, sent, answer);
  if (answer.status < 500) {
    log.record(operation, sent, answer, problems);
    return;
  }
  const stillFails = async (candidate: FuzzRequest) => (await send(candidate).catch(() => undefined))?.status === answer.status;
  let minimal: { request: FuzzRequest; inputs: string[] } | undefined;
  // A cause already found explains most repeats at the cost of one request, not a dozen.
  search: for (const names of culprits.get(answer.status) ?? []) {
    const candidate = keeping(sent, names);
    if (!candidate) continue;
    for (const tried of candidate.headers.authorization === undefined ? [candidate] : [anonymous(candidate), candidate]) {
      if (await stillFails(tried)) {
        minimal = { request: tried, inputs: names };
        break search;
      }
    }
  }
  if (!minimal) {
    minimal = await minimise(sent, stillFails);
    const known = culprits.get(answer.status) ?? [];
    if (!known.some((names) => names.join() === minimal!.inputs.join())) culprits.set(answer.status, [...known, minimal.inputs]);
  }
  const again = await send(minimal.request);
  const labelled = problems.map((problem) =>
    problem.startsWith('a server error') ? `${problem}, with ${minimal.inputs.join(', ') || 'no query or body input'}` : problem,
  );
  const cutFrom = `${sent.broken ? `broken on purpose (${sent.broken})` : 'valid by the document'}${sent.note ? `, ${sent.note}` : ''}`;
  log.record(operation, { ...minimal.request, broken: undefined, note: undefined, cutFrom }, again.status === answer.status ? again : answer, labelled);
}

// ---- the log of violations ----

export interface Violation {
  operation: string;
  status: number | undefined;
  reason: string;
  count: number;
  request: FuzzRequest | undefined;
  answer: Answer | undefined;
}

/** Which example of a violation to show: one the document calls valid, then the shortest. */
function better(candidate: FuzzRequest, current: FuzzRequest | undefined): boolean {
  if (!current) return true;
  if ((candidate.broken === undefined) !== (current.broken === undefined)) return candidate.broken === undefined;
  const size = (r: FuzzRequest) => r.url.length + (r.body?.length ?? 0) + Object.keys(r.headers).length * 20;
  return size(candidate) < size(current);
}

/** Bash quoting: printable ASCII in single quotes, anything else byte by byte in $'...'. */
function shellQuote(data: string | Buffer): string {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  if (bytes.every((b) => b >= 0x20 && b < 0x7f)) return `'${bytes.toString('latin1').replaceAll("'", `'\\''`)}'`;
  return `$'${[...bytes].map((b) => (b >= 0x20 && b < 0x7f && b !== 0x27 && b !== 0x5c ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`)).join('')}'`;
}

export class ViolationLog {
  private readonly found = new Map<string, Violation>();
  private readonly statuses = new Map<string, Map<number, number>>();
  private requests = 0;

  /**
   * @param tokens names for the token values, so that a reproduction reads
   *   `Bearer $USER_TOKEN` and never prints a secret.
   * @param bodyDir where bodies too long for a command line are written, for `curl --data-binary @file`.
   */
  constructor(
    private readonly tokens: Record<string, string>,
    private readonly bodyDir = join(tmpdir(), 'miniapp-openapi-fuzz'),
  ) {}

  /** Tokens made during the run, each shown in reproductions by the name of the one it stands in for. */
  private readonly aliases: [string, string][] = [];

  alias(name: string, value: string): void {
    this.aliases.push([name, value]);
  }

  private named(): [string, string][] {
    return [...Object.entries(this.tokens), ...this.aliases];
  }

  record(operation: Operation, request: FuzzRequest, answer: Answer, problems: string[]): void {
    this.requests++;
    const seen = this.statuses.get(operation.label) ?? new Map<number, number>();
    seen.set(answer.status, (seen.get(answer.status) ?? 0) + 1);
    this.statuses.set(operation.label, seen);
    for (const reason of problems) this.add(operation.label, answer.status, reason, request, answer);
  }

  add(operation: string, status: number | undefined, reason: string, request?: FuzzRequest, answer?: Answer): void {
    const key = `${operation}\u0000${status}\u0000${reason}`;
    const existing = this.found.get(key);
    if (!existing) this.found.set(key, { operation, status, reason, count: 1, request, answer });
    else {
      existing.count++;
      if (request && better(request, existing.request)) Object.assign(existing, { request, answer });
    }
  }

  /** Operations that never answered 2xx: the document did not say how to reach their success path, or it is broken. */
  checkReachedSuccess(operations: Operation[]): void {
    for (const operation of operations) {
      const seen = this.statuses.get(operation.label) ?? new Map<number, number>();
      if (![...seen.keys()].some((status) => status >= 200 && status < 300)) {
        const counts = [...seen.entries()]
          .sort(([a], [b]) => a - b)
          .map(([status, n]) => `${status}x${n}`)
          .join(', ');
        this.add(operation.label, undefined, `never answered 2xx to requests built from the document (answers: ${counts || 'none'})`);
      }
    }
  }

  get violations(): Violation[] {
    return [...this.found.values()];
  }

  /** One line per distinct violation, for the assertion's diff. */
  summary(): string[] {
    return this.violations.map((v) => `${v.operation} | ${v.status ?? '-'} | ${v.reason}`);
  }

  private redact(text: string): string {
    let out = text;
    for (const [name, value] of this.named()) out = out.replaceAll(value, `\${${name}}`);
    return out;
  }

  /** A header value for bash with each token as a variable: double quotes, everything else escaped. */
  private shellHeader(name: string, value: string): string {
    const names = this.named().filter(([, token]) => value.includes(token));
    if (names.length === 0) return shellQuote(`${name}: ${value}`);
    let pieces = [`${name}: ${value}`.replace(/(["`\\$])/g, '\\$1')];
    for (const [variable, token] of names) pieces = pieces.flatMap((piece) => piece.split(token).join(`\u0000${variable}\u0000`).split('\u0000'));
    return `"${pieces.map((piece) => (names.some(([variable]) => variable === piece) ? `\${${piece}}` : piece)).join('')}"`;
  }

  /** The request as a curl command; tokens appear as shell variables, so that a reproduction prints no secret. */
  curl(request: FuzzRequest): string {
    const parts = [`curl -sS -i -X ${request.method} ${shellQuote(request.url)}`];
    for (const [name, value] of Object.entries(request.headers)) parts.push(`-H ${this.shellHeader(name, value)}`);
    if (request.body !== undefined) {
      // curl would add its own form content type to a body sent without one.
      if (request.headers['content-type'] === undefined) parts.push(`-H 'content-type:'`);
      if (request.body.length > 2048) {
        mkdirSync(this.bodyDir, { recursive: true });
        const file = join(this.bodyDir, `${createHash('sha256').update(request.body).digest('hex').slice(0, 16)}.body`);
        writeFileSync(file, request.body);
        parts.push(`--data-binary @${file}`);
      } else {
        parts.push(`--data-binary ${shellQuote(request.body)}`);
      }
    }
    return parts.join(' ');
  }

  report(): string {
    const lines = [`${this.found.size} distinct violation(s) in ${this.requests} requests:`];
    this.violations.forEach((v, i) => {
      lines.push('', `${i + 1}. ${v.operation} -> ${v.status ?? '-'}: ${v.reason} (seen ${v.count}x)`);
      if (v.request) {
        const how = v.request.cutFrom
          ? `the least of a request that still fails, cut from one ${v.request.cutFrom}`
          : `${v.request.broken ? `broken on purpose: ${v.request.broken}` : 'valid by the document'}${v.request.note ? ` (${v.request.note})` : ''}`;
        lines.push(`   sent: ${how}; authorization: ${v.request.auth}`);
        const body = v.request.body === undefined ? '' : v.request.body.toString('utf8');
        lines.push(`   ${v.request.method} ${v.request.url}`);
        for (const [name, value] of Object.entries(v.request.headers)) lines.push(`   ${name}: ${this.redact(value)}`);
        if (v.request.body !== undefined)
          lines.push(`   body (${v.request.body.length} bytes): ${JSON.stringify(body.length > 300 ? `${body.slice(0, 300)}...` : body)}`);
        lines.push(`   $ ${this.curl(v.request)}`);
      }
      if (v.answer) lines.push(`   answer: ${v.answer.status} ${v.answer.contentType ?? '(no content-type)'} ${this.redact(v.answer.text.slice(0, 400))}`);
    });
    return lines.join('\n');
  }
}
