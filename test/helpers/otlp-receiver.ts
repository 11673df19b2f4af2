/**
 * An OpenTelemetry collector for tests: it takes OTLP trace exports on
 * 127.0.0.1, over HTTP (`POST /v1/traces`, protobuf or JSON, as the
 * exporters send them) and over gRPC (TraceService/Export), decodes them
 * with the published OTLP protos (test/fixtures/otlp, from
 * open-telemetry/opentelemetry-proto) and keeps every span, flattened: ids
 * as hex, attributes as a plain object.
 */
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: string;
  attributes: Record<string, unknown>;
  links: { traceId: string; spanId: string }[];
  status: { code: string; message: string };
  resource: Record<string, unknown>;
}

export interface OtlpReceiver {
  /** The base URL for OTEL_EXPORTER_OTLP_ENDPOINT / --otlp-endpoint (HTTP). */
  url: string;
  /** host:port of the gRPC TraceService. */
  grpcUrl: string;
  spans: ReceivedSpan[];
  /** Every exported request body's bytes as text (for searching secrets in what left the process). */
  raw: string[];
  /** Waits until `predicate` holds for the spans received (polls; fails after `timeoutMs`). */
  waitFor(predicate: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

const PROTOS = fileURLToPath(new URL('../fixtures/otlp/', import.meta.url));
const definition = loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto', {
  includeDirs: [PROTOS],
  longs: String,
  enums: String,
  bytes: Buffer,
  defaults: true,
  oneofs: true,
});
const SERVICE = definition['opentelemetry.proto.collector.trace.v1.TraceService'] as grpc.ServiceDefinition;
const EXPORT = (SERVICE as Record<string, grpc.MethodDefinition<any, any>>).Export!;

type AnyValue = {
  value?: string;
  stringValue?: string;
  intValue?: string;
  boolValue?: boolean;
  doubleValue?: number;
  arrayValue?: { values: AnyValue[] };
} & Record<string, any>;

function plainValue(value: AnyValue | undefined): unknown {
  if (!value) return undefined;
  switch (value.value) {
    case 'stringValue':
      return value.stringValue;
    case 'intValue':
      return Number(value.intValue);
    case 'boolValue':
      return value.boolValue;
    case 'doubleValue':
      return value.doubleValue;
    case 'arrayValue':
      return value.arrayValue!.values.map(plainValue);
    default:
      return undefined;
  }
}

function attributesOf(list: { key: string; value: AnyValue }[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, plainValue(value)]));
}

const hex = (bytes: Buffer | string | undefined) =>
  Buffer.isBuffer(bytes) ? bytes.toString('hex') : typeof bytes === 'string' ? Buffer.from(bytes, 'base64').toString('hex') : '';

function flatten(request: any): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of request.resourceSpans ?? []) {
    const resource = attributesOf(resourceSpans.resource?.attributes);
    for (const scope of resourceSpans.scopeSpans ?? []) {
      for (const span of scope.spans ?? []) {
        spans.push({
          traceId: hex(span.traceId),
          spanId: hex(span.spanId),
          parentSpanId: hex(span.parentSpanId),
          name: span.name,
          kind: String(span.kind),
          attributes: attributesOf(span.attributes),
          links: (span.links ?? []).map((link: any) => ({ traceId: hex(link.traceId), spanId: hex(link.spanId) })),
          status: { code: String(span.status?.code ?? 'STATUS_CODE_UNSET'), message: span.status?.message ?? '' },
          resource,
        });
      }
    }
  }
  return spans;
}

/** The OTLP/JSON encoding: the same messages, ids as hex, enums as numbers. */
function fromJson(body: any): any {
  const KINDS = ['SPAN_KIND_UNSPECIFIED', 'SPAN_KIND_INTERNAL', 'SPAN_KIND_SERVER', 'SPAN_KIND_CLIENT', 'SPAN_KIND_PRODUCER', 'SPAN_KIND_CONSUMER'];
  const STATUS = ['STATUS_CODE_UNSET', 'STATUS_CODE_OK', 'STATUS_CODE_ERROR'];
  const attrs = (list: any[] | undefined) =>
    (list ?? []).map(({ key, value }: any) => {
      const which = Object.keys(value)[0]!;
      return { key, value: { value: which, [which]: value[which] } };
    });
  const bytes = (text: string | undefined) => (text ? Buffer.from(text, 'hex') : Buffer.alloc(0));
  return {
    resourceSpans: (body.resourceSpans ?? []).map((rs: any) => ({
      resource: { attributes: attrs(rs.resource?.attributes) },
      scopeSpans: (rs.scopeSpans ?? []).map((ss: any) => ({
        spans: (ss.spans ?? []).map((s: any) => ({
          traceId: bytes(s.traceId),
          spanId: bytes(s.spanId),
          parentSpanId: bytes(s.parentSpanId),
          name: s.name,
          kind: KINDS[s.kind] ?? s.kind,
          attributes: attrs(s.attributes),
          links: (s.links ?? []).map((l: any) => ({ traceId: bytes(l.traceId), spanId: bytes(l.spanId) })),
          status: { code: STATUS[s.status?.code ?? 0], message: s.status?.message ?? '' },
        })),
      })),
    })),
  };
}

/** `port`: the HTTP port (default: a free one). */
export async function startOtlpReceiver(port = 0): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const raw: string[] = [];
  const http: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      let body = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
      raw.push(body.toString('latin1'));
      const json = String(req.headers['content-type']).startsWith('application/json');
      spans.push(...flatten(json ? fromJson(JSON.parse(body.toString('utf8'))) : EXPORT.requestDeserialize(body)));
      const answer = json ? Buffer.from('{}') : EXPORT.responseSerialize({});
      res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' }).end(answer);
    });
  });
  await new Promise<void>((resolve) => http.listen(port, '127.0.0.1', resolve));
  const server = new grpc.Server();
  server.addService(SERVICE, {
    Export: (call: grpc.ServerUnaryCall<any, any>, callback: grpc.sendUnaryData<any>) => {
      raw.push(EXPORT.requestSerialize(call.request).toString('latin1'));
      spans.push(...flatten(call.request));
      callback(null, {});
    },
  });
  const grpcPort = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, port) => (error ? reject(error) : resolve(port))),
  );
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
    grpcUrl: `http://127.0.0.1:${grpcPort}`,
    spans,
    raw,
    async waitFor(predicate, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (!predicate(spans)) {
        if (Date.now() > deadline) throw new Error(`the spans expected did not arrive in ${timeoutMs} ms; received: ${spans.map((s) => s.name).join(', ')}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return spans;
    },
    async close() {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
      server.forceShutdown();
    },
  };
}
