/**
 * The status of a call over its request rate: RESOURCE_EXHAUSTED, with the
 * delay as a google.rpc.RetryInfo inside a google.rpc.Status in the
 * `grpc-status-details-bin` trailer (the richer error model of gRPC, which
 * grpcio's grpc_status.rpc_status.from_call and grpc-js clients decode).
 * The Status repeats the call's code and message, as from_call requires.
 * Built only for refused calls, from the compiled protos (proto/google/rpc/).
 */
import * as grpc from '@grpc/grpc-js';
import { create, toBinary, type DescMessage } from '@bufbuild/protobuf';
import { anyPack } from '@bufbuild/protobuf/wkt';
import { descriptorRegistry } from './descriptor-set.js';

const STATUS_DETAILS_KEY = 'grpc-status-details-bin';

let schemas: { status: DescMessage; retryInfo: DescMessage } | undefined;

function schemasOf(): { status: DescMessage; retryInfo: DescMessage } {
  if (!schemas) {
    const registry = descriptorRegistry();
    const status = registry.getMessage('google.rpc.Status');
    const retryInfo = registry.getMessage('google.rpc.RetryInfo');
    if (!status || !retryInfo) throw new Error('google.rpc.Status or RetryInfo is missing from the compiled protos: run `npm run build`');
    schemas = { status, retryInfo };
  }
  return schemas;
}

/** The google.rpc.Status bytes of a call refused for `retryDelayMs`. */
function retryStatusDetails(code: grpc.status, message: string, retryDelayMs: number): Buffer {
  const { status, retryInfo } = schemasOf();
  const delay = { seconds: BigInt(Math.floor(retryDelayMs / 1000)), nanos: (retryDelayMs % 1000) * 1_000_000 };
  const detail = anyPack(retryInfo, create(retryInfo, { retryDelay: delay } as never));
  return Buffer.from(toBinary(status, create(status, { code, message, details: [detail] } as never)));
}

/** RESOURCE_EXHAUSTED with its retry hint, as the interceptor sends it. */
export function resourceExhausted(message: string, retryDelayMs: number): { code: grpc.status; details: string; metadata: grpc.Metadata } {
  return withRetryInfo(grpc.status.RESOURCE_EXHAUSTED, message, retryDelayMs);
}

/** A status of `code` whose details carry a google.rpc.RetryInfo: refused now, worth trying again after `retryDelayMs`. */
export function withRetryInfo(code: grpc.status, message: string, retryDelayMs: number): { code: grpc.status; details: string; metadata: grpc.Metadata } {
  const metadata = new grpc.Metadata();
  metadata.set(STATUS_DETAILS_KEY, retryStatusDetails(code, message, retryDelayMs));
  return { code, details: message, metadata };
}
