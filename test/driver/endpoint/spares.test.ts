/** Spare veth pairs (driver/endpoint/spares.ts) with the in-memory links: kept, reused, bounded, swept. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { NetworkDriver } from '../../../src/driver/network-driver.js';
import { SPARE_ALIAS } from '../../../src/driver/endpoint/spares.js';
import { createLogger } from '../../../src/lib/log.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { fakeSideEffects } from '../../helpers/driver-fakes.js';
import { NET, ep, net } from '../../helpers/driver-setup.js';

function setup(t: Test, spareVeths: number) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-spares-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = new SqliteStore({ file: path.join(dir, 'state.db') });
  t.teardown(() => store.close());
  const fx = fakeSideEffects();
  const driver = new NetworkDriver({
    store,
    log: createLogger('silent'),
    ...fx,
    host: 'h1',
    bridge: 'br0',
    datapath: () => 'netdev',
    spareVeths,
  });
  return { ...fx, driver };
}

const id = (c: string) => c.repeat(64);
const start = async (driver: NetworkDriver, e: string, octet: number) => {
  await driver.createEndpoint({ ...ep(), endpointId: e, address: `10.1.0.${octet}/24` });
  return driver.join(NET, e);
};
const stop = async (driver: NetworkDriver, e: string) => {
  await driver.leave(NET, e);
  await driver.deleteEndpoint(NET, e);
};
const spares = (aliases: Map<string, string>) => [...aliases].filter(([, a]) => a === SPARE_ALIAS).map(([n]) => n);

t.test('a released pair is kept and renamed for the next Join; past the bound pairs are deleted', async (t) => {
  const { links, ovs, driver } = setup(t, 2);
  await driver.createNetwork(net(NET));
  for (const [k, c] of ['1', '2', '3'].entries()) await start(driver, id(c), 10 + k);
  for (const c of ['1', '2', '3']) await stop(driver, id(c));
  await driver.settled();
  t.same(spares(links.aliases).sort(), ['ovsph0', 'ovsph1'], 'two pairs kept, carrying the spare alias, not an endpoint’s');
  t.same([links.peers.get('ovsph0'), links.peers.get('ovsph1')], ['ovspc0', 'ovspc1'], 'both ends renamed');
  t.notOk(links.names.has('ovh333333333333') || links.names.has('ovc333333333333'), 'the third pair, past the bound, deleted');

  const res = await start(driver, id('4'), 20);
  t.same(links.adopted, ['ovh444444444444'], 'the Join took a spare instead of creating a pair');
  t.equal(res.srcName, 'ovc444444444444', "Docker gets the container end under the endpoint's name");
  t.equal(links.peers.get('ovh444444444444'), 'ovc444444444444');
  t.equal(links.aliases.get('ovh444444444444'), `ovsnet:${id('4')}`, "the host end carries the endpoint's alias again");
  t.ok(links.txOff.has('ovc444444444444'), 'tx checksum off on the container end (userspace datapath)');
  t.match(ovs.ports.get('ovh444444444444'), { tag: 1, externalIds: { 'ovsnet-endpoint': id('4') } }, 'an OVS access port as always');
  t.same(spares(links.aliases), ['ovsph1'], 'one spare left');
  await start(driver, id('5'), 21);
  await start(driver, id('6'), 22);
  t.same(links.adopted, ['ovh444444444444', 'ovh555555555555'], 'spares used up, the next Join creates a pair');
  t.ok(links.names.has('ovh666666666666'));
});

t.test('a pair whose container end is gone is deleted; a spare that cannot be adopted is deleted and Join creates anew', async (t) => {
  const { links, driver } = setup(t, 4);
  await driver.createNetwork(net(NET));
  await start(driver, id('1'), 10);
  links.names.delete('ovc111111111111'); // the container end went with its namespace
  await stop(driver, id('1'));
  await driver.settled();
  t.same(spares(links.aliases), [], 'no spare of a broken pair');
  t.notOk(links.names.has('ovh111111111111'), 'its host end deleted');

  await start(driver, id('2'), 11);
  await stop(driver, id('2'));
  await driver.settled();
  t.same(spares(links.aliases), ['ovsph0']);
  links.failNext('adoptVeth');
  const res = await start(driver, id('3'), 12);
  t.equal(res.srcName, 'ovc333333333333', 'the Join succeeded all the same');
  t.same(links.adopted, [], 'from a new pair');
  t.notOk(links.names.has('ovsph0') || links.names.has('ovspc0'), 'the spare that failed is gone');
  t.equal(links.peers.get('ovh333333333333'), 'ovc333333333333');
});

t.test("reconcile deletes spares that are not this ovsnet's; stopping deletes its own; 0 keeps none", async (t) => {
  const { links, driver } = setup(t, 4);
  await driver.createNetwork(net(NET));
  await start(driver, id('1'), 10);
  await stop(driver, id('1'));
  await driver.settled();
  // A crash's leftover: a spare another run of ovsnet parked.
  links.names.add('ovsph9').add('ovspc9');
  links.peers.set('ovsph9', 'ovspc9');
  links.aliases.set('ovsph9', SPARE_ALIAS);
  const { removed } = await driver.reconcile();
  t.same(removed, ['ovsph9'], 'the leftover goes');
  t.same(spares(links.aliases), ['ovsph0'], 'the live spare stays');
  await driver.dropSpares();
  t.same(spares(links.aliases), [], 'stopping deletes it');
  t.notOk(links.names.has('ovspc0'), 'both ends');

  const off = setup(t, 0);
  await off.driver.createNetwork(net(NET));
  await start(off.driver, id('1'), 10);
  await stop(off.driver, id('1'));
  await off.driver.settled();
  t.same(
    [...off.links.names].filter((n) => n.startsWith('ovh') || n.startsWith('ovsp')),
    [],
    'OVSNET_SPARE_VETHS=0: deleted as before',
  );
});
