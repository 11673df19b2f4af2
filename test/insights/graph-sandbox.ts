/**
 * A real graph sandbox listening on 127.0.0.1:0 for client and CLI tests,
 * with its request counter and the data it serves.
 */
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { buildSandbox, type GraphSandboxOptions, type Sandbox as SandboxServer } from '../../src/sandbox/server.js';
import { SandboxClock } from '../../src/sandbox/clock.js';
import { createGraphData, type GraphData } from '../../src/sandbox/graph/data.js';
import { afterEach, beforeEach } from 'vitest';
import { Sandbox } from '../helpers/cli.js';

/** The instant the fixed sandbox clock and the CLI's fixed clock share. */
export const NOW = Date.parse('2026-11-21T12:00:00Z');

export interface GraphSandbox {
  server: SandboxServer;
  /** graph-url: http://127.0.0.1:PORT/graph */
  url: string;
  /** The data the sandbox serves (built from its clock at start). */
  data: GraphData;
  graphCalls(): Promise<number>;
  close(): Promise<void>;
}

export async function startGraphSandbox(graph: GraphSandboxOptions = {}, clock = new SandboxClock(() => NOW)): Promise<GraphSandbox> {
  const server = await buildSandbox({ key: randomBytes(32), aad: randomBytes(8), clock, graph });
  await server.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = server.app.server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    server,
    url: `${origin}/graph`,
    // The clock is fixed in most tests; with a running clock only the timestamps could differ, never the IDs or values.
    data: createGraphData({ now: clock.now(), ...(graph.media === undefined ? {} : { media: graph.media }) }),
    graphCalls: async () => ((await (await fetch(`${origin}/__sandbox/stats`)).json()) as { graphCalls: number }).graphCalls,
    close: () => server.app.close(),
  };
}

/** RFC 4180 reader for checking CSV output: quoted fields, doubled quotes, CRLF or LF inside quotes. */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const char = text[i]!;
    if (quoted) {
      if (char === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (char === '"') quoted = false;
      else field += char;
    } else if (char === '"') quoted = true;
    else if (char === ',') {
      row.push(field);
      field = '';
    } else if (char === '\r' && text[i + 1] === '\n') {
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
      i++;
    } else if (char === '\n') {
      throw new Error(`bare LF outside quotes at ${i}: records must end with CRLF`);
    } else field += char;
  }
  if (field !== '' || row.length > 0) {
    row.push(field);
    rows.push(row);
  }
  return rows;
}

export interface GraphCli {
  /** The CLI's temp home of the running test. */
  readonly sb: Sandbox;
  /** The graph sandbox the running test started. */
  readonly graph: GraphSandbox;
  /** Starts the test's graph sandbox (closed after the test). */
  start(...args: Parameters<typeof startGraphSandbox>): Promise<GraphSandbox>;
}

/** What the insights CLI suites share: a CLI sandbox for each test, and the graph sandbox it starts, closed after it. */
export function useGraphCli(): GraphCli {
  let sb: Sandbox | undefined;
  let graph: GraphSandbox | undefined;
  beforeEach(() => {
    sb = new Sandbox();
  });
  afterEach(async () => {
    await graph?.close();
    graph = undefined;
    sb?.dispose();
  });
  return {
    get sb() {
      if (!sb) throw new Error('useGraphCli: used outside a test');
      return sb;
    },
    get graph() {
      if (!graph) throw new Error('useGraphCli: the test has not started its graph sandbox');
      return graph;
    },
    async start(...args) {
      graph = await startGraphSandbox(...args);
      return graph;
    },
  };
}
