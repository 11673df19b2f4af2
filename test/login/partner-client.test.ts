/**
 * PartnerClient's observer: one report per call with the endpoint and how
 * the call ended, against real servers on 127.0.0.1 (the sandbox, a slow
 * sandbox, a TLS sandbox, a closed port, and a stub where the sandbox has
 * no such fault: answers that are not what the spec describes).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { PartnerClient, type PartnerCall } from '../../src/login/partner-client.js';
import { startSandbox, type RunningSandbox } from '../helpers/partner-sandbox.js';
import { makePki, type Pki } from '../helpers/certs.js';

let sandboxes: RunningSandbox[] = [];
let stubs: Server[] = [];
let clients: PartnerClient[] = [];
let pki: Pki | undefined;

afterEach(async () => {
  for (const client of clients) await client.close();
  for (const sandbox of sandboxes) await sandbox.close();
  for (const stub of stubs) await close(stub);
  pki?.dispose();
  clients = [];
  sandboxes = [];
  stubs = [];
  pki = undefined;
});

const close = (server: Server) => new Promise<void>((resolve) => server.close(() => resolve()));

async function sandboxWith(options: Parameters<typeof startSandbox>[0] = {}): Promise<RunningSandbox> {
  const sandbox = await startSandbox(options);
  sandboxes.push(sandbox);
  return sandbox;
}

function observed(baseUrl: string, timeoutMs?: number): { client: PartnerClient; calls: PartnerCall[] } {
  const calls: PartnerCall[] = [];
  const client = new PartnerClient({ baseUrl, timeoutMs, observe: (call) => calls.push(call) });
  clients.push(client);
  return { client, calls };
}

const outcomes = (calls: PartnerCall[]) => calls.map(({ endpoint, outcome }) => `${endpoint} ${outcome}`);

/** A server on 127.0.0.1 that answers every request with this status and body. */
async function answering(status: number, body: string, type = 'application/json'): Promise<{ url: string; server: Server }> {
  const server = createServer((_request, response) => response.writeHead(status, { 'content-type': type }).end(body));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  stubs.push(server);
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server };
}

describe('PartnerClient observe', () => {
  it('reports ok for each endpoint, and api_error when the partner answers with a failure', async () => {
    const sandbox = await sandboxWith();
    const { client, calls } = observed(sandbox.url);
    const code = sandbox.state.login(1001).authorizationCode;
    const tokens = await client.generateToken(code, 'sandbox');
    await expect(client.generateToken(code, 'sandbox')).rejects.toMatchObject({ code: 'INVALID_GRANT' });
    await client.loginMe(tokens.accessToken);
    const fresh = await client.refreshToken(tokens.refreshToken);
    await client.removeByAccessToken(fresh.accessToken);
    await expect(client.loginMe(fresh.accessToken)).rejects.toMatchObject({ code: 'ACCESS_TOKEN_EXPIRED' });
    const again = await client.generateToken(sandbox.state.login(1001).authorizationCode, 'sandbox');
    await client.removeByUserKey(1001, again.accessToken);
    expect(outcomes(calls)).toEqual([
      'generate-token ok',
      'generate-token api_error',
      'login-me ok',
      'refresh-token ok',
      'remove-by-access-token ok',
      'login-me api_error',
      'generate-token ok',
      'remove-by-user-key ok',
    ]);
    expect(calls.every((call) => call.seconds >= 0 && Number.isFinite(call.seconds))).toBe(true);
  });

  it('reports timeout, unreachable and tls when no answer comes', async () => {
    const slowSandbox = await sandboxWith({ delayMs: 1000 });
    const slow = observed(slowSandbox.url, 100);
    await expect(slow.client.refreshToken('x')).rejects.toMatchObject({ code: 'UPSTREAM_TIMEOUT' });
    expect(outcomes(slow.calls)).toEqual(['refresh-token timeout']);

    const gone = await answering(200, '{}');
    stubs = stubs.filter((server) => server !== gone.server);
    await close(gone.server);
    const refused = observed(gone.url);
    await expect(refused.client.loginMe('x')).rejects.toMatchObject({ code: 'UPSTREAM_UNREACHABLE' });
    expect(outcomes(refused.calls)).toEqual(['login-me unreachable']);

    pki = makePki();
    const tlsSandbox = await sandboxWith({ tls: { cert: pki.read(pki.serverCert), key: pki.read(pki.serverKey), ca: pki.read(pki.caCert) } });
    const untrusted = observed(tlsSandbox.url);
    await expect(untrusted.client.removeByUserKey(1)).rejects.toMatchObject({ code: 'UPSTREAM_TLS' });
    expect(outcomes(untrusted.calls)).toEqual(['remove-by-user-key tls']);
  });

  it('reports bad_response for answers it cannot use, and api_error for an HTTP error page', async () => {
    const html = observed((await answering(200, '<html>maintenance</html>', 'text/html')).url);
    await expect(html.client.generateToken('code', 'sandbox')).rejects.toMatchObject({ code: 'BAD_RESPONSE' });
    const noTokens = observed((await answering(200, JSON.stringify({ resultType: 'SUCCESS', success: { tokenType: 'Bearer' } }))).url);
    await expect(noTokens.client.refreshToken('x')).rejects.toThrow();
    const list = observed((await answering(200, JSON.stringify({ resultType: 'SUCCESS', success: [1, 2] }))).url);
    await expect(list.client.loginMe('x')).rejects.toMatchObject({ code: 'BAD_RESPONSE' });
    const proxyError = observed((await answering(502, '<html>Bad Gateway</html>', 'text/html')).url);
    await expect(proxyError.client.loginMe('x')).rejects.toMatchObject({ code: 'HTTP_502' });

    expect([...outcomes(html.calls), ...outcomes(noTokens.calls), ...outcomes(list.calls), ...outcomes(proxyError.calls)]).toEqual([
      'generate-token bad_response',
      'refresh-token bad_response',
      'login-me bad_response',
      'login-me api_error',
    ]);
  });

  it('reports nothing for the doctor probe, which is no partner call', async () => {
    const sandbox = await sandboxWith();
    const { client, calls } = observed(sandbox.url);
    expect((await client.probe()).envelope).toBe(true);
    expect(calls).toEqual([]);
  });
});
