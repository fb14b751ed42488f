/**
 * Run by test/driver/links/links.test.ts inside a network namespace of its own (unshare -n): drives
 * the real Links (netlink from the link worker) and prints what it saw as one JSON line.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { nameTaken } from '../../src/driver/links/link-error.js';
import { Links } from '../../src/driver/links/links.js';
import { NetworkDriver } from '../../src/driver/network-driver.js';
import { createLogger } from '../../src/lib/log.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { FakeFlows, FakeHostPorts, FakeNat, FakeOvs } from './driver-fakes.js';

const links = new Links();
const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8' });
const failure = async (f: () => Promise<unknown>) =>
  f().then(
    () => 'no error',
    (err: unknown) => (err instanceof Error ? err.message : String(err)),
  );
const out: Record<string, unknown> = {};

const ALIAS = `ovsnet:${'e'.repeat(64)}`;
await links.createVeth({ host: 'lth0', container: 'ltc0', mtu: 1400, mac: '02:00:00:00:00:42', txChecksumOff: true, alias: ALIAS });
out.created = [(await links.exists('lth0')) && 'lth0', (await links.exists('ltc0')) && 'ltc0'];
out.alias = await links.alias('lth0');
out.aliasIp = /alias (\S+)/.exec(sh('ip', 'link', 'show', 'lth0'))?.[1];
out.aliased = await links.aliased('ovsnet:');
out.hostUp =
  /state (UP|UNKNOWN|LOWERLAYERDOWN)/.test(sh('ip', '-o', 'link', 'show', 'lth0')) ||
  /<[^>]*UP/.test(sh('ip', '-o', 'link', 'show', 'lth0'));
out.containerEnd = sh('ip', '-o', 'link', 'show', 'ltc0');
out.txChecksum = /tx-checksumming: (on|off)/.exec(sh('ethtool', '-k', 'ltc0'))?.[1];
out.again = await failure(() => links.createVeth({ host: 'lth0', container: 'ltc0', mtu: 1400 }));
out.notMine = await failure(() => links.createVeth({ host: 'lth0', container: 'ltc0', mtu: 1300, replace: true, alias: 'ovsnet:other' }));
// What Join tells a name held by another link by (effects/naming.ts), and nothing else.
out.takenSaid = await links.createVeth({ host: 'lth0', container: 'ltc9', mtu: 1300 }).catch(nameTaken);
out.otherSaid = await links.configureAddress('nope9', 4, Buffer.from([10, 0, 0, 1]), 24, 1500).catch(nameTaken);
await links.createVeth({ host: 'lth0', container: 'ltc0', mtu: 1300, replace: true, alias: ALIAS });
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
// Reconcile with the real links: a host link named like ovsnet's (ovh...) that ovsnet did not
// make survives; a veth ovsnet made (its alias) for an endpoint the store does not have goes.
sh('ip', 'link', 'add', 'ovh123', 'type', 'veth', 'peer', 'name', 'ovh124');
await links.createVeth({ host: 'ovhorphan0001', container: 'ovcorphan0001', mtu: 1500, alias: `ovsnet:${'f'.repeat(64)}` });
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-links-'));
const store = new SqliteStore({ file: path.join(dir, 'state.db') });
const ovs = new FakeOvs();
const driver = new NetworkDriver({
  store,
  log: createLogger('silent'),
  ovs,
  links,
  hostPorts: new FakeHostPorts(),
  nat: new FakeNat(),
  flows: new FakeFlows(),
  host: 'h',
  bridge: 'br0',
  datapath: () => 'netdev',
});
out.reconciled = (await driver.reconcile()).removed;
out.afterReconcile = {
  foreign: await links.exists('ovh123'),
  foreignPeer: await links.exists('ovh124'),
  orphan: await links.exists('ovhorphan0001'),
};
await store.close();
fs.rmSync(dir, { recursive: true, force: true });
await links.close();
out.afterClose = await failure(() => links.exists('ltx1'));
console.log(JSON.stringify(out));
