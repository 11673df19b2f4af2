/**
 * A webhook receiver on 127.0.0.1 for tests: it keeps every request's
 * headers and body (as UTF-8) and answers `status` (mutable: a test turns a
 * receiver down and up again). test/webhooks/dispatcher.test.ts has one of
 * its own that scripts hangs and dropped connections.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface WebhookReceiver {
  /** http://127.0.0.1:PORT/hook */
  url: string;
  received: { headers: IncomingHttpHeaders; body: string }[];
  /** What it answers (default 204). */
  status: number;
  close(): Promise<void>;
}

export async function startWebhookReceiver(status = 204): Promise<WebhookReceiver> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      receiver.received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(receiver.status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const receiver: WebhookReceiver = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    received: [],
    status,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
  return receiver;
}
