/** QoS options, what applies to an endpoint, and the OpenFlow meter and flows built from them (pure). */
import t from 'tap';
import { defaultBurst, effectiveQos, endpointQos, parseQos } from '../../../src/driver/model/qos-options.js';
import { parseNetworkOptions } from '../../../src/driver/model/options.js';
import { meterSpec, qosCookie, qosFlows } from '../../../src/driver/ovs/qos-flows.js';

const net = (generic: Record<string, string>) => parseNetworkOptions({ 'com.docker.network.generic': generic });

t.test("rates in tc's bit units, bursts in bytes or bits, DSCP 0-63", async (t) => {
  t.same(net({ 'ovsnet.bandwidth': '50mbit' }).qos, { rateKbps: 50_000 });
  t.same(net({ 'ovsnet.bandwidth': '1.5gbit', 'ovsnet.burst': '256kb' }).qos, { rateKbps: 1_500_000, burstKbit: 2098 });
  t.same(net({ 'ovsnet.bandwidth': '8kbit', 'ovsnet.burst': '64kbit' }).qos, { rateKbps: 8, burstKbit: 64 });
  t.same(net({ 'ovsnet.dscp': '46' }).qos, { dscp: 46 });
  t.same(net({ 'ovsnet.dscp': '0' }).qos, { dscp: 0 });
  t.same(net({}).qos, {});
});

t.test('every refusal names the value and the valid form', async (t) => {
  const refused = (generic: Record<string, string>, message: RegExp) =>
    t.throws(() => net(generic), { code: 'NETWORK_OPTION_INVALID', message }, JSON.stringify(generic));
  refused(
    { 'ovsnet.bandwidth': '50mbps' },
    /^-o ovsnet\.bandwidth=50mbps is not valid: expected the rate out of each container, from 8kbit to 100gbit, e\.g\. 50mbit \(units bit, kbit, mbit, gbit\)$/,
  );
  refused({ 'ovsnet.bandwidth': '7kbit' }, /ovsnet\.bandwidth=7kbit is not valid/);
  refused({ 'ovsnet.bandwidth': '101gbit' }, /ovsnet\.bandwidth=101gbit is not valid/);
  refused({ 'ovsnet.bandwidth': '-5mbit' }, /ovsnet\.bandwidth=-5mbit is not valid/);
  refused(
    { 'ovsnet.bandwidth': '20mbit', 'ovsnet.burst': 'lots' },
    /^-o ovsnet\.burst=lots is not valid: expected the burst allowed above the rate, from 1kb to 1gb/,
  );
  refused({ 'ovsnet.bandwidth': '20mbit', 'ovsnet.burst': '2gb' }, /ovsnet\.burst=2gb is not valid/);
  refused(
    { 'ovsnet.burst': '64kb' },
    /^-o ovsnet\.burst=64kb needs -o ovsnet\.bandwidth=RATE beside it: a burst is what is allowed above a rate$/,
  );
  refused({ 'ovsnet.dscp': '64' }, /^-o ovsnet\.dscp=64 is not valid: expected the DSCP value \(0-63\)/);
  refused({ 'ovsnet.dscp': 'ef' }, /-o ovsnet\.dscp=ef is not valid/);
  refused(
    { 'ovsnet.qos': '1' },
    /-o ovsnet\.qos is not an ovsnet option; valid ones: .*ovsnet\.bandwidth \(.*ovsnet\.burst \(.*ovsnet\.dscp \(/,
  );
});

t.test("endpoint options: ovsnet's keys among Docker's, strings only, unknown ovsnet keys refused", async (t) => {
  t.same(endpointQos({ 'com.docker.network.portmap': [], 'ovsnet.bandwidth': '20mbit', 'ovsnet.dscp': '46' }), {
    rateKbps: 20_000,
    dscp: 46,
  });
  t.same(endpointQos({ 'com.docker.network.endpoint.exposedports': [] }), {});
  t.throws(() => endpointQos({ 'ovsnet.tag': '5' }), {
    code: 'NETWORK_OPTION_INVALID',
    message: /^--driver-opt ovsnet\.tag is not an ovsnet endpoint option; valid ones: ovsnet\.bandwidth/,
  });
  t.throws(() => endpointQos({ 'ovsnet.dscp': 46 }), { message: '--driver-opt ovsnet.dscp must be a string, got 46' });
  t.throws(() => endpointQos({ 'ovsnet.bandwidth': 'fast' }), { message: /^--driver-opt ovsnet\.bandwidth=fast is not valid/ });
});

t.test("the endpoint's values win; a burst goes with its rate; the default burst is half a second", async (t) => {
  const network = { rateKbps: 50_000, burstKbit: 4000, dscp: 10 };
  t.same(effectiveQos(network, undefined), network);
  t.same(effectiveQos(network, { dscp: 46 }), { rateKbps: 50_000, burstKbit: 4000, dscp: 46 });
  t.same(effectiveQos(network, { rateKbps: 20_000 }), { rateKbps: 20_000, burstKbit: 10_000, dscp: 10 }, "not the network's burst");
  t.same(effectiveQos(undefined, { rateKbps: 20_000, burstKbit: 500 }), { rateKbps: 20_000, burstKbit: 500 });
  t.same(effectiveQos({ dscp: 0 }, undefined), { dscp: 0 }, 'DSCP 0 is a value');
  t.equal(effectiveQos(undefined, undefined), undefined);
  t.equal(effectiveQos({}, {}), undefined);
  t.equal(defaultBurst(20_000), 10_000);
  t.equal(defaultBurst(8), 16);
});

t.test(
  'an OpenFlow 1.3 meter per port (METER_BASE + the port: 0x0f5d0007 = 257753095), and flows that meter, then mark IP packets',
  async (t) => {
    t.equal(
      meterSpec(7, { rateKbps: 20_000, burstKbit: 10_000 }),
      'meter=257753095,kbps,burst,stats,bands=type=drop,rate=20000,burst_size=10000',
    );
    t.equal(meterSpec(7, { dscp: 46 }), undefined);
    const c = qosCookie(7);
    t.equal(c, '0xf5d000000000007');
    t.same(qosFlows(7, { rateKbps: 20_000, burstKbit: 10_000 }), [`cookie=${c},priority=300,in_port=7,actions=meter:257753095,NORMAL`]);
    t.same(qosFlows(7, { dscp: 46 }), [
      `cookie=${c},priority=300,in_port=7,ip,actions=set_field:46->ip_dscp,NORMAL`,
      `cookie=${c},priority=300,in_port=7,ipv6,actions=set_field:46->ip_dscp,NORMAL`,
    ]);
    t.same(qosFlows(7, { rateKbps: 100, burstKbit: 50, dscp: 0 }), [
      `cookie=${c},priority=300,in_port=7,ip,actions=meter:257753095,set_field:0->ip_dscp,NORMAL`,
      `cookie=${c},priority=300,in_port=7,ipv6,actions=meter:257753095,set_field:0->ip_dscp,NORMAL`,
      `cookie=${c},priority=299,in_port=7,actions=meter:257753095,NORMAL`,
    ]);
    t.not(qosCookie(7), qosCookie(8), 'a cookie per port');
  },
);

t.test('parseQos reads through the getter it is given', async (t) => {
  const seen: string[] = [];
  parseQos((k) => (seen.push(k), undefined), '-o');
  t.same(seen.sort(), ['ovsnet.bandwidth', 'ovsnet.burst', 'ovsnet.dscp']);
});
