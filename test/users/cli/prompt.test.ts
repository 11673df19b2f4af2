/**
 * `miniapp users create` without --password: at a terminal it asks, without
 * echo, as `gh auth login` and `stripe login` do; piped input keeps working;
 * without a terminal or under CI nothing is asked and it is a usage error.
 * Against a real `miniapp serve`.
 */
import { describe, expect, it } from 'vitest';
import { plain } from '../../helpers/cli.js';
import { runLive, waitFor, useUsersCli } from './harness.js';
import { BACKENDS } from '../../helpers/postgres.js';

describe.each(BACKENDS)('on %s', (backend) => {
  const cli = useUsersCli(backend);

  const create = (name: string, ...extra: string[]) => ['users', 'create', '--username', name, '--email', `${name}@example.com`, ...extra];

  describe('users create asks for the password at a terminal', () => {
    it('without --password: asks on stderr without echo, and creates the user with what was typed', async () => {
      const run = runLive(cli.sb, [...create('pam'), '--json'], cli.server.env, { terminal: true });
      await waitFor(() => plain(run.stderr.text).includes('Password:'), 'the prompt');
      run.stdin.write('correct-horse\r');
      expect(await run.done, run.stderr.text).toBe(0);
      expect(JSON.parse(run.stdout.text)).toMatchObject({ id: 1, username: 'pam' });
      expect(run.stderr.text).not.toContain('correct-horse');
      expect(run.stdout.text).not.toContain('correct-horse');
      // The password typed is the one stored: a short one is refused by the server.
      const short = runLive(cli.sb, create('pete'), cli.server.env, { terminal: true });
      await waitFor(() => plain(short.stderr.text).includes('Password:'), 'the prompt');
      short.stdin.write('short\r');
      expect(await short.done).toBe(1);
      expect(short.stderr.text).toContain('INVALID_ARGUMENT: password must be at least 8 characters');
    });

    it('with --password - and stdin a terminal: asks too', async () => {
      const run = runLive(cli.sb, create('paul', '--password', '-'), cli.server.env, { terminal: true });
      await waitFor(() => plain(run.stderr.text).includes('Password:'), 'the prompt');
      run.stdin.write('correct-horse\r');
      expect(await run.done, run.stderr.text).toBe(0);
      expect(plain(run.stdout.text)).toMatch(/│ username +│ paul +│/);
    });

    it('never asks without a terminal or under CI: a usage error that says how to pass it (exit 2)', async () => {
      const piped = await cli.sb.run([...create('quin'), '--json'], { env: cli.server.env, stdin: 'correct-horse\n' });
      expect(piped.code).toBe(2);
      expect(JSON.parse(piped.stderr)).toMatchObject({
        error: {
          code: 'USAGE',
          exitCode: 2,
          message: expect.stringContaining('no password: give --password, or --password - with the password piped on stdin'),
        },
      });
      const ci = await cli.sb.run(create('rita'), { env: { ...cli.server.env, CI: 'true' }, tty: true, stdinTTY: true });
      expect(ci.code).toBe(2);
      expect(ci.stderr).toContain('nothing is asked: CI is set');
      expect(ci.stderr).not.toContain('Password:');
      const dash = await cli.sb.run(create('rob', '--password', '-'), { env: { ...cli.server.env, CI: 'true' }, tty: true, stdinTTY: true });
      expect(dash.code).toBe(2);
      expect(dash.stderr).toContain('--password - reads the password from stdin, but stdin is a terminal, and nothing is asked (CI is set)');
      // Piped input keeps working.
      const fromPipe = await cli.sb.run([...create('ruth', '--password', '-'), '--json'], { env: cli.server.env, stdin: 'correct-horse\n' });
      expect(fromPipe.code, fromPipe.stderr).toBe(0);
    });
  });
});
