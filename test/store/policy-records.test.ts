/**
 * A network record's egress and ingress rules, as a peer sharing the store (or an operator's
 * etcdctl) could write them: their CIDRs and ports become OpenFlow matches and iptables
 * arguments, so a record whose rules are anything but a bare CIDR and a port of tcp or udp is
 * refused where it is read (src/store/shapes.ts), never programmed.
 */
import t from 'tap';
import { recordProblem } from '../../src/store/decode.js';
import { keys } from '../../src/store/keys.js';

const key = keys.network('a'.repeat(64));
const record = (rules: unknown) =>
  JSON.stringify({
    networkId: 'a'.repeat(64),
    bridge: 'ovsnet0',
    tag: 3,
    mtu: 1500,
    internal: false,
    ipv4: [{ pool: '10.1.0.0/24', gateway: '10.1.0.1/24' }],
    ipv6: [],
    egress: rules,
    ingress: rules,
    createdAt: '2026-01-01T00:00:00Z',
  });

t.test('rules as ovsnet writes them pass', async (t) => {
  t.equal(recordProblem(key, record([{ cidr: '0.0.0.0/0' }, { cidr: 'fd00::/8', port: { number: 443, proto: 'tcp' } }])), undefined);
  t.equal(recordProblem(key, record([])), undefined, 'none');
});

t.test('anything else is refused, naming the field', async (t) => {
  for (const bad of [
    [{ cidr: '10.0.0.0/8,actions=output:1' }],
    [{ cidr: '10.0.0.0/8\nadd' }],
    [{ cidr: ' 10.0.0.0/8' }],
    [{ cidr: '10.0.0.0/8', port: { number: 0, proto: 'tcp' } }],
    [{ cidr: '10.0.0.0/8', port: { number: 80, proto: 'tcp --dport 1' } }],
    [{ cidr: '10.0.0.0/8', port: { number: 80.5, proto: 'udp' } }],
    [{ cidr: 7 }],
    '10.0.0.0/8',
    [null],
  ]) {
    t.match(
      recordProblem(key, record(bad)),
      /^its egress is .*, not absent or a list of a rule: a CIDR and an optional ports$/,
      JSON.stringify(bad),
    );
  }
});
