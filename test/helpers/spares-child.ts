/**
 * Run by test/driver/links/spares.test.ts inside a network namespace of its own (unshare -n):
 * parks a real veth pair as a spare and adopts it again through the link worker
 * (links/spare-ops.ts), printing what `ip` saw as one JSON line.
 */
import { execFileSync } from 'node:child_process';
import { Links } from '../../src/driver/links/links.js';
import { messageOf } from '../../src/lib/errors.js';
import { SPARE_ALIAS, spareNames } from '../../src/driver/endpoint/spares.js';

const links = new Links();
const sh = (...args: string[]) => execFileSync('ip', args, { encoding: 'utf8' });
const ifindex = (name: string) => /^(\d+):/.exec(sh('-o', 'link', 'show', name))?.[1];
const out: Record<string, unknown> = {};
const ALIAS = `ovsnet:${'e'.repeat(64)}`;

await links.createVeth({ host: 'lsh0', container: 'lsc0', mtu: 1400, mac: '02:00:00:00:00:42', alias: ALIAS });
sh('link', 'set', 'lsc0', 'up'); // as a container leaves it is down; an up end is set down too
const index = { host: ifindex('lsh0'), container: ifindex('lsc0') };
const spare = spareNames(0);
out.parked = await links.parkVeth('lsh0', 'lsc0', spare, SPARE_ALIAS);
out.afterPark = {
  old: (await links.exists('lsh0')) || (await links.exists('lsc0')),
  alias: await links.alias(spare.host),
  host: sh('-o', 'link', 'show', spare.host),
  container: sh('-o', 'link', 'show', spare.container),
};
await links.adoptVeth(spare, {
  host: 'lsh1',
  container: 'lsc1',
  mtu: 1300,
  mac: '02:00:00:00:00:43',
  alias: `ovsnet:${'f'.repeat(64)}`,
  txChecksumOff: true,
  replace: true,
});
out.afterAdopt = {
  spareLeft: (await links.exists(spare.host)) || (await links.exists(spare.container)),
  sameLinks: ifindex('lsh1') === index.host && ifindex('lsc1') === index.container,
  alias: await links.alias('lsh1'),
  host: sh('-d', '-o', 'link', 'show', 'lsh1'),
  container: sh('-o', 'link', 'show', 'lsc1'),
  txChecksum: /tx-checksumming: (on|off)/.exec(execFileSync('ethtool', ['-k', 'lsc1'], { encoding: 'utf8' }))?.[1],
};
// Not a pair: a host end whose peer is not the named container end.
sh('link', 'add', 'lsx0', 'type', 'veth', 'peer', 'name', 'lsx1');
out.notPair = await links.parkVeth('lsh1', 'lsx0', spareNames(1), SPARE_ALIAS);
out.notPairLeft = (await links.alias('lsh1')) === `ovsnet:${'f'.repeat(64)}`;
out.missingSpare = await links.adoptVeth(spareNames(2), { host: 'lsh2', container: 'lsc2', mtu: 1500 }).then(() => 'no error', messageOf);
out.afterMissing = await links.exists('lsh2');
await links.deleteLink('lsh1');
await links.deleteLink('lsx0');
await links.close();
console.log(JSON.stringify(out));
