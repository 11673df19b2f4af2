import type { Command } from 'commander';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import { MiniappError } from '../../errors.js';
import { partnerClient, timeoutOption, tokenStore } from '../connect/profile.js';

export function registerDoctor(program: Command, bind: Bind): void {
  program
    .command('doctor')
    .description(
      'Run a checklist of the profile: the key and AAD decode, the client certificate and key parse and match and ' +
        'are not expiring, the partner API answers over (mutual) TLS, the stored tokens, and whether graph-version is ' +
        "past Meta's retirement of it. A table on a terminal, " +
        'JSON otherwise; exits 1 when a check fails.',
    )
    .addOption(timeoutOption())
    .action(bind(runDoctor));
}

/** The graph-version in effect against Meta's retirement schedule (insights/versions.ts). */
async function graphVersionCheck(cc: CommandContext): Promise<{ check: string; status: 'ok' | 'warn' | 'fail'; detail: string }> {
  try {
    const { adviseVersion } = await import('../../insights/versions.js');
    return { check: 'graph version', ...adviseVersion((await cc.settings.get('graph-version')).value ?? '', cc.now().getTime()) };
  } catch (error) {
    return { check: 'graph version', status: 'fail', detail: (error as Error).message };
  }
}

async function runDoctor(cc: CommandContext, command: Command): Promise<void> {
  const { timeout } = command.opts<{ timeout: string }>();
  const { runChecks } = await import('../../login/doctor.js');
  const { readPem } = await import('../../login/pem.js');
  const setting = async (key: string) => {
    try {
      return { value: (await cc.settings.get(key)).value };
    } catch (error) {
      return { error: (error as Error).message };
    }
  };
  const [key, aad, cert, privateKey, ca, baseUrl, prefix] = await Promise.all(
    ['decrypt-key', 'decrypt-aad', 'mtls-cert', 'mtls-key', 'mtls-ca', 'base-url', 'path-prefix'].map(setting),
  );
  const pem = (value: { value?: string | undefined; error?: string }, name: string) => {
    if (value.error || !value.value) return value;
    try {
      return { value: readPem(value.value, name) };
    } catch (error) {
      return { error: (error as Error).message };
    }
  };
  const store = await tokenStore(cc);
  const checks = await runChecks({
    now: cc.now(),
    key: key!,
    aad: aad!,
    cert: pem(cert!, 'mtls-cert'),
    privateKey: pem(privateKey!, 'mtls-key'),
    ca: pem(ca!, 'mtls-ca'),
    baseUrl: baseUrl!,
    pathPrefix: prefix!.value,
    tokens: store.load(),
    probe: async (pathPrefix) => {
      const client = await partnerClient(cc, { timeout, pathPrefix });
      try {
        return await client.probe();
      } finally {
        await client.close();
      }
    },
  });
  checks.push(await graphVersionCheck(cc));
  const color = cc.out.color;
  const mark = { ok: 'ok', warn: 'warn', fail: 'FAIL', skip: 'skip' };
  const hue = { ok: color.green, warn: color.yellow, fail: color.red, skip: color.dim };
  if (cc.out.human) {
    cc.out.table(checks, [
      { header: 'check', value: (c) => c.check },
      // The status in the tool's own colour: applied after the cell is made printable (render/output.ts).
      { header: 'status', value: (c) => mark[c.status], style: (c) => hue[c.status] },
      // A detail often ends in its point (a path, "expires in 3 days") or holds a command to copy: wrapped, never cut.
      { header: 'detail', value: (c) => c.detail, shrink: 1, drop: -1, cut: 'wrap' },
    ]);
  } else {
    cc.out.printJson({ ok: !checks.some((c) => c.status === 'fail'), checks });
  }
  const failed = checks.filter((c) => c.status === 'fail');
  if (failed.length > 0) {
    throw new MiniappError(`${failed.length} check${failed.length === 1 ? '' : 's'} failed: ${failed.map((c) => c.check).join(', ')}`);
  }
}
