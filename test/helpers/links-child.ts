/**
 * Run by test/driver/links/links.test.ts inside a network namespace of its own (unshare -n): drives
 * the real Links (netlink from the link worker) and prints what it saw as one JSON line.
 */
import { execFileSync } from 'node:child_process';
import { Links } from '../../src/driver/links/links.js';

const links = new Links();
const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8' });
const failure = async (f: () => Promise<unknown>) =>
  f().then(
    () => 'no error',
    (err: unknown) => (err instanceof Error ? err.message : String(err)),
  );
const out: Record<string, unknown> = {};

await links.createVeth({ host: 'lth0', container: 'ltc0', mtu: 1400, mac: '02:00:00:00:00:42', txChecksumOff: true });
out.created = (await links.list('lt')).sort();
out.hostUp =
  /state (UP|UNKNOWN|LOWERLAYERDOWN)/.test(sh('ip', '-o', 'link', 'show', 'lth0')) ||
  /<[^>]*UP/.test(sh('ip', '-o', 'link', 'show', 'lth0'));
out.containerEnd = sh('ip', '-o', 'link', 'show', 'ltc0');
out.txChecksum = /tx-checksumming: (on|off)/.exec(sh('ethtool', '-k', 'ltc0'))?.[1];
out.again = await failure(() => links.createVeth({ host: 'lth0', container: 'ltc0', mtu: 1400 }));
await links.createVeth({ host: 'lth0', container: 'ltc0', mtu: 1300, replace: true });
out.replacedMtu = /mtu (\d+)/.exec(sh('ip', '-o', 'link', 'show', 'lth0'))?.[1];
// The container end's name is taken by another link: the create fails, and nothing of the
// pair may be left.
sh('ip', 'link', 'add', 'ltx1', 'type', 'veth', 'peer', 'name', 'lty1');
out.clash = await failure(() => links.createVeth({ host: 'lth1', container: 'ltx1', mtu: 1500 }));
out.afterClash = await links.exists('lth1');
await links.configureAddress('ltx1', 4, Buffer.from([10, 9, 8, 7]), 24, 1450);
await links.configureAddress('ltx1', 4, Buffer.from([10, 9, 8, 7]), 24, 1450); // idempotent
out.address = /inet (\S+)/.exec(sh('ip', '-o', '-4', 'addr', 'show', 'ltx1'))?.[1];
out.missingAddress = await failure(() => links.configureAddress('nope0', 4, Buffer.from([10, 0, 0, 1]), 24, 1500));
await links.deleteLink('lth0');
await links.deleteLink('lth0'); // a missing link is done
out.afterDelete = { host: await links.exists('lth0'), container: await links.exists('ltc0') };
await links.close();
out.afterClose = await failure(() => links.exists('ltx1'));
console.log(JSON.stringify(out));
