/**
 * The CNI front end's commands against the daemon's real driver and IPAM (in-memory OVS and
 * links, a real embedded store), the namespace side faked: ADD attaches through the same calls
 * Docker's requests make, a repeated ADD gives the same answer, DEL and GC undo exactly what ADD
 * did and DEL succeeds for a container never seen, a failed ADD leaves nothing, and an ADD cut
 * short is undone by recover().
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { endpointIdOf } from '../../src/cni/attachments.js';
import type { CniCall, CniConfig } from '../../src/cni/request.js';
import type { NetworkDriver } from '../../src/driver/network-driver.js';
import { OvsnetError } from '../../src/lib/errors.js';
import { keys } from '../../src/store/keys.js';
import { CID, NETNS, cniSetup as setup } from '../helpers/cni.js';
import { NET, NET2 } from '../helpers/driver-setup.js';

const config = (extra: Partial<CniConfig> = {}): CniConfig => ({ cniVersion: '1.0.0', name: 'podnet', network: 'net1', ...extra });
const call = (command: CniCall['command'], extra: Partial<CniCall> = {}): CniCall => ({
  command,
  containerId: CID,
  netns: NETNS,
  ifname: 'eth0',
  config: config(),
  ...extra,
});

t.test('ADD attaches through the driver and IPAM; a repeated ADD gives the same answer', async (t) => {
  const { service, attached, fx, used } = await setup(t);
  const result = await service.handle(call('ADD'));
  t.match(result, {
    cniVersion: '1.0.0',
    interfaces: [{ name: 'eth0', sandbox: NETNS, mac: /^02:42:0a:01:00:/ }],
    ips: [{ address: /^10\.1\.0\.\d+\/24$/, gateway: '10.1.0.1', interface: 0 }],
    routes: [{ dst: '0.0.0.0/0', gw: '10.1.0.1' }],
  });
  t.equal(attached.length, 1);
  t.equal(attached[0]?.ifname, 'eth0');
  t.ok(fx.links.names.has(attached[0]?.device ?? ''), 'the device moved is the container end the driver made');
  const port = [...fx.ovs.ports.values()].find((p) => p.externalIds['ovsnet-endpoint'] === endpointIdOf('h1', CID, 'eth0'));
  t.equal(port?.bridge, 'br0', 'an OVS port for the attachment, on the bridge');
  t.equal(port?.tag, 1, "with the network's tag");
  t.equal(used(), 1, 'one address reserved');
  const again = await service.handle(call('ADD'));
  t.same(again, result, 'the same result');
  t.equal(used(), 1, 'still one address');
  t.equal(attached.length, 1, 'nothing done twice');
  t.match(await service.handle(call('ADD', { config: config({ cniVersion: '0.4.0' }) })), { cniVersion: '0.4.0', ips: [{ version: '4' }] });
  await t.rejects(service.handle(call('ADD', { config: config({ network: NET.slice(0, 12) }) })), { code: 'CNI_ATTACHMENT_CONFLICT' });
});

t.test('DEL undoes everything ADD did, and succeeds for a container never seen', async (t) => {
  const { service, fx, used } = await setup(t);
  const portsBefore = fx.ovs.ports.size;
  await service.handle(call('ADD'));
  t.equal(fx.ovs.ports.size, portsBefore + 1);
  await service.handle(call('DEL'));
  await (service as unknown as { deps: { driver: NetworkDriver } }).deps.driver.settled();
  t.equal(fx.ovs.ports.size, portsBefore, 'the port is gone');
  t.equal(used(), 0, 'the address is free');
  t.same(await service.attachments.list(), [], 'no record');
  await service.handle(call('DEL'));
  await service.handle(call('DEL', { containerId: 'never-seen', netns: '' }));
  t.pass('DEL again and DEL of an unknown container succeed');
});

t.test('the network by Docker name, ID prefix or logical name; unknown and Docker-IPAM networks refused', async (t) => {
  const { service } = await setup(t);
  t.ok(await service.handle(call('ADD', { config: config({ network: NET.slice(0, 12) }) })));
  await t.rejects(service.handle(call('ADD', { containerId: 'c2', config: config({ network: 'nonet' }) })), {
    code: 'NETWORK_NOT_FOUND',
    message: /"nonet" is no ovsnet network of this host \(Docker has no network of that name\).*this host has aaaaaaaaaaaa, bbbbbbbbbbbb/,
  });
  await t.rejects(service.handle(call('ADD', { containerId: 'c3', config: config({ network: NET2 }) })), {
    code: 'CNI_NETWORK_UNSUPPORTED',
    message: /Docker's own IPAM.*--ipam-driver ovsnet/,
  });
  t.equal((await service.attachments.list()).length, 1, 'refused ADDs leave no record');
});

t.test('an ADD that fails in the namespace leaves nothing behind', async (t) => {
  const { service, netns, fx, used } = await setup(t);
  const portsBefore = fx.ovs.ports.size;
  const linksBefore = [...fx.links.names].sort();
  netns.fail = new OvsnetError('CNI_INTERFACE_FAILED', 'cannot configure eth0: injected');
  await t.rejects(service.handle(call('ADD')), { code: 'CNI_INTERFACE_FAILED' });
  await (service as unknown as { deps: { driver: NetworkDriver } }).deps.driver.settled();
  t.equal(fx.ovs.ports.size, portsBefore, 'no port');
  t.equal(used(), 0, 'no address');
  t.same(await service.attachments.list(), [], 'no record');
  t.same([...fx.links.names].sort(), linksBefore, 'no veth');
});

t.test('recover() undoes an ADD cut short; GC removes what the runtime no longer lists', async (t) => {
  const { service, used } = await setup(t);
  await service.handle(call('ADD'));
  await service.handle(call('ADD', { containerId: 'c2' }));
  await service.handle(call('ADD', { containerId: 'c3' }));
  // c3's ADD as a killed daemon leaves it: reserved and attached, not completed.
  const c3 = await service.attachments.get('c3', 'eth0');
  if (c3 === undefined) throw new Error('no record');
  await service.attachments.put({ ...c3, state: 'adding' });
  t.equal(used(), 3);
  t.equal(await service.recover(), 1, 'one ADD undone');
  t.equal(used(), 2);
  await service.handle(
    call('GC', { containerId: '', ifname: '', config: config({ validAttachments: [{ containerId: CID, ifname: 'eth0' }] }) }),
  );
  t.equal(used(), 1, 'c2 collected');
  t.same(
    (await service.attachments.list()).map((a) => a.containerId),
    [CID],
  );
});

t.test('collect(): an attachment whose namespace vanished without a DEL is undone whole, as DEL would; a live one is kept', async (t) => {
  const { service, fx, used } = await setup(t);
  const dir = t.testdir({ gone: '', live: '' });
  const portsBefore = fx.ovs.ports.size;
  await service.handle(call('ADD', { netns: path.join(dir, 'gone') }));
  await service.handle(call('ADD', { containerId: 'c2', netns: path.join(dir, 'live') }));
  t.equal(used(), 2);
  t.equal(await service.collect(CID, 'eth0'), 'alive', 'its namespace is there: kept');
  fs.rmSync(path.join(dir, 'gone'));
  t.equal(await service.collect(CID, 'eth0'), 'removed');
  await (service as unknown as { deps: { driver: NetworkDriver } }).deps.driver.settled();
  t.equal(fx.ovs.ports.size, portsBefore + 1, "its port is gone, c2's stays");
  t.equal(used(), 1, 'its address is free');
  t.same(
    (await service.attachments.list()).map((a) => a.containerId),
    ['c2'],
  );
  t.equal(await service.collect(CID, 'eth0'), 'none', 'nothing recorded any more');
});

t.test('CHECK: an unknown container, and a namespace not as ADD left it', async (t) => {
  const { service, netns } = await setup(t);
  await t.rejects(service.handle(call('CHECK')), { code: 'CNI_CONTAINER_UNKNOWN' });
  await service.handle(call('ADD'));
  await service.handle(call('CHECK'));
  netns.problemText = 'eth0 lacks 10.1.0.2/24';
  await t.rejects(service.handle(call('CHECK')), { code: 'CNI_CHECK_FAILED', message: /lacks/ });
});

t.test('the address is held by the attachment (cni/<container>/<ifname>): same key, same address; no one else frees it', async (t) => {
  const { service, ipam, used, poolId, store } = await setup(t);
  const first = (await service.handle(call('ADD'))) as { ips: { address: string }[] };
  const address = first.ips[0]?.address ?? '';
  const plain = address.split('/')[0] ?? '';
  const record = JSON.parse((await store.get(keys.address(poolId, plain)))?.value ?? '{}') as Record<string, unknown>;
  t.match(record, { holder: `cni/${CID}/eth0` }, 'the reservation names the attachment');
  await ipam.releaseAddress(poolId, plain);
  t.equal(used(), 1, "a Docker ReleaseAddress of the attachment's address changes nothing");
  // The attachment's record lost (a store restored from backup): the ADD asks IPAM again, by key.
  await service.attachments.delete({ containerId: CID, ifname: 'eth0' });
  const again = (await service.handle(call('ADD'))) as { ips: { address: string }[] };
  t.equal(again.ips[0]?.address, address, 'the same address');
  t.equal(used(), 1, 'still one address');
  t.equal(await service.alive(CID, 'eth0'), true, 'the reaper is told the container is there while its namespace is');
  await service.handle(call('DEL'));
  t.equal(used(), 0, 'DEL frees it, by its key');
  t.equal(await service.alive(CID, 'eth0'), false, 'and then it is gone');
});
