/**
 * Joins Docker has not finished (driver/endpoint/placements.ts): the reaper judges a joined
 * endpoint only once its container end was seen off the host; a failed Join and DeleteEndpoint
 * forget it; records gone without DeleteEndpoint are pruned, one listed after the read is not.
 */
import t from 'tap';
import { Placements } from '../../../src/driver/endpoint/placements.js';
import { NET, ep, net, setup } from '../../helpers/driver-setup.js';

t.test('a Join under way, then answered: judged only after its end was seen off the host', async (t) => {
  const p = new Placements();
  let release: () => void = () => undefined;
  const joining = p.join('e1', () => new Promise<void>((r) => (release = r)));
  t.notOk(p.judgeable('e1', false), 'under way, its veth not made yet: not judged, and not taken as placed');
  t.notOk(p.judgeable('e1', true), 'under way, its end on the host: not judged');
  release();
  await joining;
  for (let look = 0; look < 5; look++)
    t.notOk(p.judgeable('e1', true), `answered, its end still on the host (look ${look + 1}): Docker has not moved it`);
  t.notOk(p.judgeable('e1', false), 'seen in its container: not judged on this look (it is not on the host)');
  t.equal(p.size, 0, 'and no longer listed');
  t.ok(p.judgeable('e1', true), 'back on the host after that: judged (the container went)');
  t.ok(p.judgeable('other', true), 'an endpoint not joined by this daemon (before a restart): judged');
});

t.test('a failed Join and DeleteEndpoint forget the endpoint', async (t) => {
  const p = new Placements();
  await t.rejects(
    p.join('e1', () => Promise.reject(new Error('no veth'))),
    /no veth/,
    'the Join’s failure is its own',
  );
  t.equal(p.size, 0, 'a failed Join is not listed');
  await p.join('e2', async () => undefined);
  p.forget('e2');
  t.equal(p.size, 0);
});

t.test('prune: listed before the read and in no record: forgotten; listed after it: kept', async (t) => {
  let clock = 1000;
  const p = new Placements(() => clock);
  await p.join('gone', async () => undefined);
  await p.join('live', async () => undefined);
  clock = 2000;
  const readAt = clock;
  clock = 2001;
  await p.join('newer', async () => undefined); // created after the read began: not in it
  p.prune(new Set(['live']), readAt);
  t.notOk(p.judgeable('live', true), 'a live one stays listed');
  t.notOk(p.judgeable('newer', true), 'one listed after the read stays listed');
  t.ok(p.judgeable('gone', true), 'one whose record went is forgotten');
});

t.test('the driver lists each Join, forgets it at DeleteEndpoint and when the Join fails', async (t) => {
  const { driver, ovs } = setup(t);
  await driver.createNetwork(net(NET));
  const a = 'a'.repeat(64);
  const b = 'b'.repeat(64);
  await driver.createEndpoint({ ...ep(), endpointId: a, address: '10.1.0.10/24' });
  await driver.join(NET, a);
  t.notOk(driver.placements.judgeable(a, true), 'joined, its end on the host: the reaper leaves it');
  await driver.createEndpoint({ ...ep(), endpointId: b, address: '10.1.0.11/24' });
  ovs.failNext('addPort');
  await t.rejects(driver.join(NET, b), /injected failure of addPort/);
  t.equal(driver.placements.size, 1, 'the failed Join is not listed');
  await driver.leave(NET, a);
  await driver.deleteEndpoint(NET, a);
  t.equal(driver.placements.size, 0, 'DeleteEndpoint forgets it');
});
