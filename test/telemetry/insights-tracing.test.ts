/**
 * Graph API calls of a traced `miniapp insights` command: client spans
 * below the command's span, whose URLs keep the query's keys but never
 * its values (the graph API takes the access token in the query).
 */
import { describe, expect, it } from 'vitest';
import { SANDBOX_GRAPH_TOKENS } from '../../src/sandbox/graph/data.js';
import { NOW, useGraphCli } from '../insights/graph-sandbox.js';

const TOKEN = SANDBOX_GRAPH_TOKENS.page;
const cli = useGraphCli();

describe('a traced insights command', () => {
  it('has a client span per graph API call, with the token nowhere', async () => {
    await cli.start({ media: 3 });
    const result = await cli.sb.run(['insights', 'media', '--metrics', 'reach', '--format', 'json'], {
      env: { MINIAPP_GRAPH_URL: cli.graph.url, MINIAPP_GRAPH_TOKEN: TOKEN, OTEL_TRACES_EXPORTER: 'console' },
      now: new Date(NOW),
    });
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toHaveLength(3);
    const spans = result.stderr
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line));
    const command = spans.find((span) => span.name === 'miniapp insights media')!;
    const calls = spans.filter((span) => span.kind === 'client');
    expect(calls.length).toBeGreaterThan(0);
    for (const call of calls) {
      expect(call).toMatchObject({ name: 'GET', traceId: command.traceId, parentSpanId: command.spanId });
      expect(call.attributes['url.full']).toMatch(new RegExp(`^${cli.graph.url}/.*\\?(.*&)?access_token=REDACTED`));
      expect(call.attributes['http.response.status_code']).toBe(200);
    }
    expect(result.stderr).not.toContain(TOKEN);
  });
});
