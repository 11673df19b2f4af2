/** A real partner sandbox listening on 127.0.0.1:0, with a known key and AAD. */
import { buildSandbox, type Sandbox, type SandboxOptions } from '../../src/sandbox/server.js';
import { AAD, AAD_HEX, KEY, KEY_HEX } from './vectors.js';

export interface RunningSandbox extends Sandbox {
  url: string;
  /** Environment that points the CLI at this sandbox with the right key and AAD. */
  env: Record<string, string>;
  close(): Promise<void>;
}

export async function startSandbox(options: Partial<SandboxOptions> = {}): Promise<RunningSandbox> {
  const sandbox = await buildSandbox({ key: KEY, aad: AAD, ...options });
  await sandbox.app.listen({ host: '127.0.0.1', port: 0 });
  const address = sandbox.app.server.address();
  if (typeof address !== 'object' || !address) throw new Error('sandbox has no address');
  const url = `${options.tls ? 'https' : 'http'}://127.0.0.1:${address.port}`;
  return {
    ...sandbox,
    url,
    env: { MINIAPP_BASE_URL: url, MINIAPP_DECRYPT_KEY: KEY_HEX, MINIAPP_DECRYPT_AAD: AAD_HEX },
    close: () => sandbox.app.close(),
  };
}
