/**
 * graph-version through the CLI: empty for unversioned paths, checked by
 * `config set`, and judged by `doctor` against Meta's retirement schedule.
 */
import { describe, expect, it } from 'vitest';
import { MAIN_ACCOUNT_ID, SANDBOX_GRAPH_TOKENS } from '../../src/sandbox/graph/data.js';
import { CURRENT_GRAPH_VERSION, oldestUsable, retiresAt } from '../../src/insights/versions.js';
import { NOW, useGraphCli } from './graph-sandbox.js';

const cli = useGraphCli();

describe('graph-version', () => {
  it('may be empty: the CLI then calls unversioned paths, which the sandbox serves', async () => {
    await cli.start({ media: 30 });
    const set = await cli.sb.run(['config', 'set', 'graph-version', '']);
    expect(set.code, set.stderr).toBe(0);
    const get = await cli.sb.run(['config', 'get', 'graph-version', '--json']);
    expect(JSON.parse(get.stdout)).toMatchObject({ value: '', source: 'profile' });
    const env = { MINIAPP_GRAPH_URL: cli.graph.url, MINIAPP_GRAPH_TOKEN: SANDBOX_GRAPH_TOKENS.page };
    const media = await cli.sb.run(['--debug', 'insights', 'media', '--limit', '3', '--no-metrics', '--json', '--account', MAIN_ACCOUNT_ID], {
      env,
      now: new Date(NOW),
    });
    expect(media.code, media.stderr).toBe(0);
    expect(JSON.parse(media.stdout).map((m: { id: string }) => m.id)).toEqual(
      cli.graph.data
        .account(MAIN_ACCOUNT_ID)!
        .media.slice(0, 3)
        .map((m) => m.id),
    );
    expect(media.stderr).toContain(`GET ${cli.graph.url}/${MAIN_ACCOUNT_ID}/media?`);
    expect(media.stderr).not.toMatch(/\/v\d+\.\d+\//);
    // unset returns to the spec's default.
    expect((await cli.sb.run(['config', 'unset', 'graph-version'])).code).toBe(0);
    expect((await cli.sb.run(['config', 'get', 'graph-version'])).stdout.trim()).toBe('v18.0');
  });

  it('refuses a value that is no version, with exit 2', async () => {
    const bad = await cli.sb.run(['config', 'set', 'graph-version', '18']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('graph-version must look like v18.0, or be empty ("") for unversioned paths; got "18"');
  });

  it('is judged by doctor: a retired version is a warning that names the version to set', async () => {
    const check = async (env: Record<string, string>) => {
      const doctor = await cli.sb.run(['doctor', '--json'], { env, now: new Date(NOW) });
      return (JSON.parse(doctor.stdout).checks as { check: string; status: string; detail: string }[]).find((c) => c.check === 'graph version')!;
    };
    const retired = await check({});
    expect(retired.status).toBe('warn');
    expect(retired.detail).toBe(
      `v18.0 was retired on 2026-01-23: Meta serves its calls at ${oldestUsable(NOW)}, whose metrics differ; set the current one: \`miniapp config set graph-version ${CURRENT_GRAPH_VERSION}\``,
    );
    const live = await check({ MINIAPP_GRAPH_VERSION: 'v22.0' });
    expect(live).toMatchObject({ status: 'ok', detail: `v22.0, usable until ${new Date(retiresAt('v22.0')!).toISOString().slice(0, 10)}` });
    expect(await check({ MINIAPP_GRAPH_VERSION: CURRENT_GRAPH_VERSION })).toMatchObject({ status: 'ok' });
    expect(await check({ MINIAPP_GRAPH_VERSION: 'v99.0' })).toMatchObject({ status: 'warn' });
  });
});

describe('the version table', () => {
  it('retires a version two years after the next one is released (Meta, "Version Schedules")', () => {
    expect(new Date(retiresAt('v18.0')!).toISOString().slice(0, 10)).toBe('2026-01-23');
    expect(new Date(retiresAt('v21.0')!).toISOString().slice(0, 10)).toBe('2027-01-21');
    expect(retiresAt(CURRENT_GRAPH_VERSION)).toBeUndefined();
    expect(oldestUsable(Date.parse('2026-11-21T00:00:00Z'))).toBe('v21.0');
    expect(oldestUsable(Date.parse('2027-02-01T00:00:00Z'))).toBe('v22.0');
  });
});
