/**
 * The attackers of the abuse benchmark in a process of their own, forked by
 * bench/abuse.bench.js and reniced by it (BENCH_ABUSE_ATTACKER_NICE, 19 by
 * default): an attacker is another host, so its own CPU must not be taken
 * from serve's share of this machine's two cores. What the attacks send to
 * serve is unchanged; what each got comes back with the 'done' message.
 *
 * Protocol (IPC): the parent sends { start: { root, url, grpcAddress,
 * tokens, records, attackers, only } }, later 'stop'; the child answers
 * 'started', then { counts } once the attacks have ended (at most 15 s after
 * 'stop'), and exits.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { endlessUploads, nestedJson, randomTokens, rapidReset, stalledWatchers, syncFlood } from './abuse-attacks.js';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

let stopped = false;
const isStopped = () => stopped;

process.on('message', async (message) => {
  if (message === 'stop') {
    stopped = true;
    return;
  }
  if (!message?.start) return;
  const { root, url, grpcAddress, tokens, records, attackers, only } = message.start;
  const { userServiceDefinition } = await import(pathToFileURL(join(root, 'dist', 'users', 'proto.js')).href);
  const { Client } = userServiceDefinition();
  const all = {
    rapidReset: () => rapidReset(grpcAddress, isStopped),
    stalledWatchers: () =>
      stalledWatchers(
        grpcAddress,
        attackers.map((name) => tokens[name]),
        isStopped,
      ),
    endlessUploads: () => endlessUploads(url, tokens.attacker2, isStopped),
    nestedJson: () => nestedJson(url, tokens.attacker3, isStopped),
    randomTokens: () => randomTokens(url, grpcAddress, Client, isStopped),
    syncFlood: () =>
      syncFlood(
        grpcAddress,
        Client,
        attackers.map((name) => ({ token: tokens[name], user: records[name] })),
        isStopped,
      ),
  };
  const attacks = Object.fromEntries(
    Object.entries(all)
      .filter(([name]) => only.length === 0 || only.includes(name))
      .map(([name, start]) => [name, start()]),
  );
  process.send('started');
  while (!stopped) await sleep(100);
  await Promise.race([Promise.all(Object.values(attacks).map((attack) => attack.done)), sleep(15_000)]);
  const counts = Object.fromEntries(Object.entries(attacks).map(([name, attack]) => [name, attack.counts]));
  process.send({ counts }, () => process.exit(0));
});
