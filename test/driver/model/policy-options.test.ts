/**
 * Egress and ingress options (pure): the valid forms, canonical rules, and every hostile or
 * malformed value refused naming the option and its valid form, before anything else is read;
 * with the network's other options, the combinations refused and why. Their effect on traffic:
 * test/e2e/driver-egress.test.ts.
 */
import fc from 'fast-check';
import t from 'tap';
import { parseNetworkOptions } from '../../../src/driver/model/options.js';
import { EGRESS, INGRESS, MAX_RULES, checkPolicy, parsePolicy, type PolicyKey } from '../../../src/driver/model/policy-options.js';

const FORM = /-o ovsnet\.(egress|ingress)=CIDR\[:PORT\/tcp\|udp\]\[,\.\.\.\]/;

t.test('valid values: canonical prefixes, ports of tcp or udp, duplicates once, none for nothing', async (t) => {
  t.equal(parsePolicy(EGRESS, undefined), undefined, 'not given');
  t.same(parsePolicy(EGRESS, 'none'), [], 'none allows nothing');
  t.same(parsePolicy(EGRESS, '198.19.0.10/32:8080/tcp'), [{ cidr: '198.19.0.10/32', port: { number: 8080, proto: 'tcp' } }]);
  t.same(parsePolicy(INGRESS, '0.0.0.0/0,10.0.0.0/8:53/udp,10.0.0.0/8:53/udp,10.0.0.0/8'), [
    { cidr: '0.0.0.0/0' },
    { cidr: '10.0.0.0/8', port: { number: 53, proto: 'udp' } },
    { cidr: '10.0.0.0/8' },
  ]);
  t.same(parsePolicy(EGRESS, '::/0,FD00:0:0::/8:443/tcp,2001:db8::1/128'), [
    { cidr: '::/0' },
    { cidr: 'fd00::/8', port: { number: 443, proto: 'tcp' } },
    { cidr: '2001:db8::1/128' },
  ]);
  t.equal(
    parsePolicy(EGRESS, Array.from({ length: MAX_RULES }, (_, i) => `10.${i}.0.0/16`).join(','))?.length,
    MAX_RULES,
    'at most 256 rules',
  );
  t.equal(parsePolicy(EGRESS, '1.1.1.1/32:1/udp,1.1.1.1/32:65535/tcp')?.length, 2, 'ports 1 and 65535');
});

t.test('malformed, huge and injected values: refused naming the option and the valid form', async (t) => {
  const refused = (key: PolicyKey, value: unknown, why: RegExp) => {
    t.throws(() => parsePolicy(key, value), { code: 'NETWORK_OPTION_INVALID', message: FORM }, JSON.stringify(value).slice(0, 60));
    t.throws(() => parsePolicy(key, value), { message: why });
    t.throws(() => parsePolicy(key, value), { message: new RegExp(`^-o ${key.replace('.', '\\.')}=`) });
  };
  for (const key of [EGRESS, INGRESS] as const) {
    refused(key, '10.0.0.0/8,actions=drop', /rule 2: actions=drop has no prefix length/);
    refused(key, '10.0.0.0/8\n0.0.0.0/0', /="10\.0\.0\.0\/8\\n0\.0\.0\.0\/0" is not valid: rule 1: "10\.0\.0\.0\/8\\n0\.0\.0\.0\/0"/);
    refused(key, '10.0.0.0/8;cookie=0', /rule 1/);
    refused(key, '10.0.0.0/8, 10.1.0.0/16', /rule 2: " 10\.1\.0\.0\/16" does not start with an IP address/);
    refused(key, ' 10.0.0.0/8', /rule 1/);
    refused(key, '10.0.0.0/8 ', /rule 1/);
    refused(key, '10.0.0.0/8:0/tcp', /the port is PORT\/tcp or PORT\/udp, PORT 1-65535/);
    refused(key, '10.0.0.0/8:70000/tcp', /PORT 1-65535/);
    refused(key, '10.0.0.0/8:080/tcp', /PORT 1-65535/);
    refused(key, '10.0.0.0/8:80/sctp', /PORT\/tcp or PORT\/udp/);
    refused(key, '10.0.0.0/8:80/TCP', /PORT\/tcp or PORT\/udp/);
    refused(key, '10.0.0.0/8:80', /PORT\/tcp or PORT\/udp/);
    refused(key, '10.0.0.1/8', /has host bits set: the network is 10\.0\.0\.0\/8 \(one address: 10\.0\.0\.1\/32\)/);
    refused(key, '10.0.0.1', /has no prefix length \(a single address is ADDRESS\/32/);
    refused(key, '10.0.0.0/33', /prefix length must be 0-32/);
    refused(key, '10.0.0.0/08', /a prefix length, then optionally/);
    refused(key, '010.0.0.0/8', /does not start with an IP address/);
    refused(key, '256.0.0.0/8', /does not start with an IP address/);
    refused(key, 'fe80::1%eth0/128', /does not start with an IP address/);
    refused(key, 'fd00::/129', /0-128 for IPv6/);
    refused(key, '', /it is empty \(to allow nothing, give none\)/);
    refused(key, '10.0.0.0/8,', /rule 2: an empty rule/);
    refused(key, ',10.0.0.0/8', /rule 1: an empty rule/);
    refused(key, 'NONE', /rule 1/);
    refused(key, 8080, /it must be a string/);
    refused(key, ['10.0.0.0/8'], /it must be a string/);
    refused(key, 'x'.repeat(10_000), /rule 1: "x{64}"\.\.\. \(10000 characters\) has no prefix length/);
    refused(key, Array.from({ length: 10_000 }, () => '1.2.3.4/32').join(','), /it is 109999 characters long \(at most 16384\)/);
    refused(key, Array.from({ length: 1000 }, () => '1.2.3.4/32').join(','), /it has 1000 rules \(at most 256\)/);
  }
  t.throws(() => parsePolicy(EGRESS, 'a'.repeat(100_000)), { message: /^.{0,400}$/s }, 'a huge value is not quoted whole');
});

t.test(
  'whatever the string, a rule parsed holds only a canonical CIDR and a port: nothing else reaches OpenFlow or iptables',
  async (t) => {
    const piece = fc.constantFrom(
      '10.0.0.0/8',
      '::/0',
      'fd00::/8',
      ':80/tcp',
      ':53/udp',
      ',',
      '/',
      ':',
      '\n',
      ' ',
      ';',
      '=',
      'actions',
      '0',
      '255',
      '.',
      'a',
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (parts) => {
        let rules;
        try {
          rules = parsePolicy(EGRESS, parts.join(''));
        } catch (err) {
          return (err as Error).message.startsWith('-o ovsnet.egress=');
        }
        return (rules ?? []).every(
          (r) =>
            /^[0-9a-f.:]+\/\d{1,3}$/.test(r.cidr) &&
            (r.port === undefined || (Number.isInteger(r.port.number) && r.port.number >= 1 && r.port.number <= 65535)),
        );
      }),
      { numRuns: 3000 },
    );
    t.pass('3000 generated values');
  },
);

t.test("with the network's other options: refusals that say why", async (t) => {
  const opts = (o: Record<string, string>, id?: string) => parseNetworkOptions({ 'com.docker.network.generic': o }, id);
  t.same(opts({ [EGRESS]: '10.0.0.0/8' }).egress, [{ cidr: '10.0.0.0/8' }]);
  t.equal(opts({ [EGRESS]: '10.0.0.0/8' }).ingress, undefined);
  t.same(opts({ 'ovsnet.network': 'shop', [EGRESS]: 'none' }).egress, [], 'egress on a parent of groups');
  t.same(opts({ 'ovsnet.network': 'shop', 'ovsnet.group': 'web', [EGRESS]: 'none' }).egress, [], 'and on a group');
  t.throws(() => opts({ 'ovsnet.network': 'shop', [INGRESS]: 'none' }), {
    message: /ingress is not supported on endpoint groups nor on their parent/,
  });
  t.throws(() => opts({ 'ovsnet.network': 'shop', 'ovsnet.group': 'web', [INGRESS]: 'none' }), {
    message: /ingress is not supported on endpoint groups/,
  });
  t.same(
    opts({ 'ovsnet.network': 'blue', 'ovsnet.encap': 'vxlan', [INGRESS]: '10.1.0.0/16' }).ingress,
    [{ cidr: '10.1.0.0/16' }],
    'a logical network',
  );
  const swarm = 'a'.repeat(25);
  t.throws(() => opts({ 'ovsnet.network': `swarm-${swarm}`, 'ovsnet.encap': 'vxlan', 'ovsnet.tag': '9', [EGRESS]: 'none' }, swarm), {
    message: /ovsnet\.egress is not supported on Docker swarm networks/,
  });
  t.throws(() => opts({ [EGRESS]: '10.0.0.0/8,actions=drop' }), { code: 'NETWORK_OPTION_INVALID', message: FORM });
  t.throws(() => opts({ 'ovsnet.egres': '10.0.0.0/8' }), { message: /not an ovsnet option; valid ones: .*ovsnet\.egress \(/ });
});

t.test('against the network: a rule of a family it has no subnet of, and --internal', async (t) => {
  const v4 = { v4: true, v6: false, internal: false };
  t.doesNotThrow(() => checkPolicy({ egress: [{ cidr: '0.0.0.0/0' }], ingress: undefined }, v4));
  t.throws(() => checkPolicy({ egress: [{ cidr: '::/0' }], ingress: undefined }, v4), {
    message:
      /-o ovsnet\.egress: ::\/0 is IPv6 and the network has no IPv6 subnet, so the rule could never match: create the network with --ipv6/,
  });
  t.doesNotThrow(() => checkPolicy({ egress: undefined, ingress: [{ cidr: '::/0' }, { cidr: '0.0.0.0/0' }] }, { ...v4, v6: true }));
  t.throws(() => checkPolicy({ egress: undefined, ingress: [{ cidr: '10.0.0.0/8' }] }, { v4: false, v6: true, internal: false }), {
    message: /ovsnet\.ingress: 10\.0\.0\.0\/8 is IPv4 and the network has no IPv4 subnet/,
  });
  t.throws(() => checkPolicy({ egress: [], ingress: undefined }, { ...v4, internal: true }), {
    message: /an --internal network has none: drop -o ovsnet\.egress or --internal/,
  });
});
