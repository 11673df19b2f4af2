/**
 * The numbers of `monitor dashboard` from serve's snapshots: rates between
 * snapshots, p99 from the buckets filled between them, errors by status,
 * and a restart of serve (counters from zero) read as a new baseline.
 */
import { describe, expect, it } from 'vitest';
import { DashboardModel, parseSeries, quantileBetween } from '../../src/cli/views/dashboard-model.js';

function snapshot(requests: number, notFound: number, fast: number, slow: number): Record<string, number> {
  return {
    'miniapp_http_requests_total{method="GET",route="/api/v2/blog/posts",status="200"}': requests,
    'miniapp_http_requests_total{method="GET",route="/*",status="404"}': notFound,
    'miniapp_http_request_duration_seconds_bucket{le="0.01",method="GET",route="/x",status="200"}': fast,
    'miniapp_http_request_duration_seconds_bucket{le="0.1",method="GET",route="/x",status="200"}': fast + slow,
    'miniapp_http_request_duration_seconds_bucket{le="+Inf",method="GET",route="/x",status="200"}': fast + slow,
    'miniapp_grpc_server_started_total{grpc_method="StreamMetrics",grpc_service="monitoring.v1.MonitoringService",grpc_type="server_stream"}': 1,
    'miniapp_grpc_server_started_total{grpc_method="GetUser",grpc_service="user.v1.UserService",grpc_type="unary"}': 5,
    'miniapp_grpc_server_handled_total{grpc_code="NotFound",grpc_method="GetUser",grpc_service="user.v1.UserService",grpc_type="unary"}': 4,
    miniapp_http_requests_in_flight: 2,
    miniapp_webhook_deliveries_pending: 3,
    miniapp_ready: 1,
  };
}

describe('the dashboard model', () => {
  it('parses series keys with escaped labels', () => {
    expect(parseSeries('a_total{x="1",y="say \\"hi\\""}', 2)).toEqual({ name: 'a_total', labels: { x: '1', y: 'say "hi"' }, value: 2 });
    expect(parseSeries('plain', 1)).toEqual({ name: 'plain', labels: {}, value: 1 });
  });

  it('finds the p99 inside the bucket the 99th observation fell in', () => {
    const before = new Map([
      [0.01, 0],
      [0.1, 0],
      [Infinity, 0],
    ]);
    expect(
      quantileBetween(
        before,
        new Map([
          [0.01, 100],
          [0.1, 100],
          [Infinity, 100],
        ]),
        0.99,
      ),
    ).toBeCloseTo(0.0099);
    expect(
      quantileBetween(
        before,
        new Map([
          [0.01, 90],
          [0.1, 100],
          [Infinity, 100],
        ]),
        0.99,
      ),
    ).toBeCloseTo(0.091);
    expect(quantileBetween(before, before, 0.99)).toBeUndefined();
  });

  it('gives rates per second between snapshots, errors within the window, gauges as they are', () => {
    const model = new DashboardModel(300_000);
    model.add(0, snapshot(100, 10, 50, 0));
    expect(model.state().history).toEqual([]);
    model.add(2_000, snapshot(120, 14, 60, 10));
    const state = model.state();
    expect(state.history).toHaveLength(1);
    expect(state.history[0]!.httpRate).toBe(12);
    expect(state.history[0]!.httpP99).toBeGreaterThan(0.01);
    expect(state.httpErrors).toEqual(new Map([['404', 4]]));
    expect(state.httpInFlight).toBe(2);
    // Five unary calls started, four handled; the monitoring stream is not counted.
    expect(state.grpcInFlight).toBe(1);
    expect(state.webhooksPending).toBe(3);
    expect(state.ready).toBe(true);
  });

  it('takes a restart of serve as a new baseline, never a negative rate', () => {
    const model = new DashboardModel(300_000);
    model.add(0, snapshot(100, 0, 0, 0));
    model.add(1_000, snapshot(110, 0, 0, 0));
    model.restart();
    model.add(5_000, snapshot(3, 0, 0, 0));
    model.add(6_000, snapshot(8, 0, 0, 0));
    expect(model.state().history.map((p) => p.httpRate)).toEqual([10, 5]);
  });
});
