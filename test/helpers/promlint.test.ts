/**
 * The promtool stand-in catches what promtool catches: each promlint rule
 * on a scrape that breaks it (cases after promlint_test.go), a clean scrape
 * passes, and what expfmt cannot parse throws.
 */
import { describe, expect, it } from 'vitest';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { checkMetrics, lint, parseText } from './promlint.js';

const scrape = (...lines: string[]) => `${lines.join('\n')}\n`;

describe('promlint stand-in', () => {
  it('is silent on a clean scrape of every type', () => {
    const text = scrape(
      '# HELP app_requests_total Requests answered, a count.',
      '# TYPE app_requests_total counter',
      'app_requests_total{method="GET",status="200"} 3',
      'app_requests_total{method="GET",status="404"} 1',
      '# HELP app_in_flight Requests in flight.',
      '# TYPE app_in_flight gauge',
      'app_in_flight 0',
      '# HELP app_latency_seconds Latency in seconds.',
      '# TYPE app_latency_seconds histogram',
      'app_latency_seconds_bucket{route="/a",le="0.1"} 1',
      'app_latency_seconds_bucket{route="/a",le="+Inf"} 2',
      'app_latency_seconds_sum{route="/a"} 0.3',
      'app_latency_seconds_count{route="/a"} 2',
      '# HELP app_size_bytes Sizes in bytes.',
      '# TYPE app_size_bytes summary',
      'app_size_bytes{quantile="0.5"} 10',
      'app_size_bytes_sum 30',
      'app_size_bytes_count 3',
    );
    expect(checkMetrics(text)).toEqual([]);
    expect(parseText(text).map((f) => [f.name, f.type, f.samples.length])).toEqual([
      ['app_requests_total', 'counter', 2],
      ['app_in_flight', 'gauge', 1],
      ['app_latency_seconds', 'histogram', 4],
      ['app_size_bytes', 'summary', 3],
    ]);
  });

  it('LintHelp: no HELP line, or one without text', () => {
    expect(checkMetrics(scrape('# TYPE go_goroutines gauge', 'go_goroutines 24'))).toEqual(['go_goroutines no help text']);
    expect(checkMetrics(scrape('# HELP go_goroutines', '# TYPE go_goroutines gauge', 'go_goroutines 24'))).toEqual(['go_goroutines no help text']);
    expect(checkMetrics(scrape('# HELP go_goroutines Goroutines that exist.', '# TYPE go_goroutines gauge', 'go_goroutines 24'))).toEqual([]);
  });

  it('LintMetricUnits: a unit that is not the base unit', () => {
    const one = (name: string) => checkMetrics(scrape(`# HELP ${name} Test metric.`, `# TYPE ${name} untyped`, `${name} 10`));
    expect(one('x_milliseconds')).toEqual(['x_milliseconds use base unit "seconds" instead of "milliseconds"']);
    expect(one('x_gigabytes')).toEqual(['x_gigabytes use base unit "bytes" instead of "gigabytes"']);
    expect(one('x_minutes')).toEqual(['x_minutes use base unit "seconds" instead of "minutes"']);
    expect(one('thermometers_fahrenheit')).toEqual(['thermometers_fahrenheit use base unit "celsius" instead of "fahrenheit"']);
    expect(one('x_seconds')).toEqual([]);
    expect(one('x_bytes')).toEqual([]);
  });

  it('LintCounter: _total on counters only', () => {
    const one = (name: string, type: string) => checkMetrics(scrape(`# HELP ${name} Test metric.`, `# TYPE ${name} ${type}`, `${name} 10`));
    expect(one('x_bytes', 'counter')).toEqual(['x_bytes counter metrics should have "_total" suffix']);
    expect(one('x_bytes_total', 'gauge')).toEqual(['x_bytes_total non-counter metrics should not have "_total" suffix']);
    expect(one('x_bytes_total', 'counter')).toEqual([]);
    expect(one('x_bytes_total', 'untyped')).toEqual([]);
  });

  it("flags prom-client's three default gauges named _total, as promtool does", async () => {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry, prefix: 'miniapp_' });
    const totals = checkMetrics(await registry.metrics());
    expect(totals).toContain('miniapp_nodejs_active_handles_total non-counter metrics should not have "_total" suffix');
    expect(totals.every((line) => / non-counter metrics should not have "_total" suffix$/.test(line))).toBe(true);
  });

  it('LintHistogramSummaryReserved: suffixes and labels that belong to histograms and summaries', () => {
    const gauge = (name: string, labels = '') => checkMetrics(scrape(`# HELP ${name} Test metric.`, `# TYPE ${name} gauge`, `${name}${labels} 10`));
    expect(gauge('x_bytes_bucket')).toEqual(['x_bytes_bucket non-histogram metrics should not have "_bucket" suffix']);
    expect(gauge('x_bytes_count')).toEqual(['x_bytes_count non-histogram and non-summary metrics should not have "_count" suffix']);
    expect(gauge('x_bytes_sum')).toEqual(['x_bytes_sum non-histogram and non-summary metrics should not have "_sum" suffix']);
    expect(gauge('x_bytes', '{le="1"}')).toEqual(['x_bytes non-histogram metrics should not have "le" label']);
    expect(gauge('x_bytes', '{quantile="1"}')).toEqual(['x_bytes non-summary metrics should not have "quantile" label']);
    const histogram = scrape(
      '# HELP x_seconds Test metric.',
      '# TYPE x_seconds histogram',
      'x_seconds_bucket{le="0.005",quantile="0.01"} 0',
      'x_seconds_bucket{le="+Inf",quantile="0.01"} 1',
      'x_seconds_sum{quantile="0.01"} 1',
      'x_seconds_count{quantile="0.01"} 1',
    );
    expect(checkMetrics(histogram)).toEqual(['x_seconds non-summary metrics should not have "quantile" label']);
  });

  it('LintMetricTypeInName: the type in the name', () => {
    expect(checkMetrics(scrape('# HELP x_gauge Test metric.', '# TYPE x_gauge gauge', 'x_gauge 1'))).toEqual([
      "x_gauge metric name should not include type 'gauge'",
    ]);
    expect(checkMetrics(scrape('# HELP x_counter_total Test metric.', '# TYPE x_counter_total counter', 'x_counter_total 1'))).toEqual([
      "x_counter_total metric name should not include type 'counter'",
    ]);
  });

  it('LintReservedChars: a colon, which recording rules own', () => {
    expect(checkMetrics(scrape('# HELP job:x_total Test metric.', '# TYPE job:x_total counter', 'job:x_total 1'))).toEqual([
      "job:x_total metric names should not contain ':'",
    ]);
  });

  it('LintCamelCase: metric and label names', () => {
    expect(checkMetrics(scrape('# HELP requestCount_total Test metric.', '# TYPE requestCount_total counter', 'requestCount_total 1'))).toEqual([
      "requestCount_total metric names should be written in 'snake_case' not 'camelCase'",
    ]);
    expect(checkMetrics(scrape('# HELP x_total Test metric.', '# TYPE x_total counter', 'x_total{statusCode="200"} 1'))).toEqual([
      "x_total label names should be written in 'snake_case' not 'camelCase'",
    ]);
  });

  it('LintUnitAbbreviations: ms, sec and the like', () => {
    expect(checkMetrics(scrape('# HELP x_ms Test metric.', '# TYPE x_ms gauge', 'x_ms 1'))).toEqual(['x_ms metric names should not contain abbreviated units']);
    expect(checkMetrics(scrape('# HELP x_sec_total Test metric.', '# TYPE x_sec_total counter', 'x_sec_total 1'))).toEqual([
      'x_sec_total metric names should not contain abbreviated units',
    ]);
  });

  it('LintDuplicateMetric: the same label set twice', () => {
    const text = scrape('# HELP x_total Test metric.', '# TYPE x_total counter', 'x_total{a="1",b="2"} 1', 'x_total{b="2",a="1"} 2', 'x_total{a="2",b="2"} 3');
    expect(checkMetrics(text)).toEqual(['x_total metric not unique']);
  });

  it('sorts the problems by metric, then text, as promlint does', () => {
    const text = scrape('# TYPE b_ms counter', 'b_ms 1', '# TYPE a_bytes counter', 'a_bytes 1');
    expect(lint(text)).toEqual([
      { metric: 'a_bytes', text: 'counter metrics should have "_total" suffix' },
      { metric: 'a_bytes', text: 'no help text' },
      { metric: 'b_ms', text: 'counter metrics should have "_total" suffix' },
      { metric: 'b_ms', text: 'metric names should not contain abbreviated units' },
      { metric: 'b_ms', text: 'no help text' },
    ]);
  });

  it('lints only families with samples, as expfmt keeps only those', () => {
    expect(checkMetrics(scrape('# TYPE x_bytes counter'))).toEqual([]);
  });

  it('throws on what the text format does not allow', () => {
    expect(() => parseText(scrape('x_total{a="1"} one'))).toThrow(/line 1: expected float as value/);
    expect(() => parseText(scrape('x_total{a-b="1"} 1'))).toThrow(/invalid label name/);
    expect(() => parseText(scrape('x_total{a="1",a="2"} 1'))).toThrow(/duplicate label name/);
    expect(() => parseText(scrape('x_total{a="\\q"} 1'))).toThrow(/invalid escape sequence/);
    expect(() => parseText(scrape('x_total 1', '# TYPE x_total counter'))).toThrow(/line 2: second TYPE line .* or TYPE reported after samples/);
    expect(() => parseText(scrape('# HELP x a', '# HELP x b'))).toThrow(/second HELP line/);
    expect(() => parseText(scrape('# TYPE x histogram', 'x_bucket 1'))).toThrow(/missing "le" label/);
    expect(() => parseText(scrape('1x 1'))).toThrow(/invalid metric name/);
  });
});
