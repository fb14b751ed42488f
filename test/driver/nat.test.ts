/** The iptables rules ovsnet wants (pure builders), and how Nat applies and removes them. */
import t from 'tap';
import type { ExecResult } from '../../src/driver/exec.js';
import { Nat } from '../../src/driver/nat.js';
import { CHAINS, JUMPS, networkRules, newChainArgs, OWN_CHAINS, portRules, ruleArgs } from '../../src/driver/nat-rules.js';
import type { PortBinding } from '../../src/driver/records/records.js';

const NET = 'a'.repeat(64);
const EP = 'e'.repeat(64);
const GW = 'ovgaaaaaaaaaaaa';
const NET_COMMENT = ['-m', 'comment', '--comment', 'ovsnet:aaaaaaaaaaaa'];
const EP_COMMENT = ['-m', 'comment', '--comment', 'ovsnet:eeeeeeeeeeee'];
const bind = (b: Partial<PortBinding>): PortBinding => ({
  proto: 'tcp',
  containerPort: 80,
  hostIp: '',
  hostPort: 8080,
  hostPortEnd: 8080,
  ...b,
});

t.test('a network: masquerade out, isolation from other gateways before its accepts, hairpin first', async (t) => {
  t.same(networkRules(NET, '10.1.0.0/24', GW), [
    { table: 'nat', chain: 'OVSNET-POSTROUTING', spec: ['-s', '10.1.0.0/24', '!', '-o', GW, ...NET_COMMENT, '-j', 'MASQUERADE'] },
    { table: 'filter', chain: 'OVSNET-FORWARD', spec: ['-i', GW, '-o', 'ovg+', ...NET_COMMENT, '-j', 'DROP'], insert: true },
    { table: 'filter', chain: 'OVSNET-FORWARD', spec: ['-i', GW, '-o', GW, ...NET_COMMENT, '-j', 'ACCEPT'], insert: true },
    { table: 'filter', chain: 'OVSNET-FORWARD', spec: ['-i', GW, ...NET_COMMENT, '-j', 'ACCEPT'] },
    { table: 'filter', chain: 'OVSNET-FORWARD', spec: ['-o', GW, ...NET_COMMENT, '-j', 'ACCEPT'] },
  ]);
  // Inserted at the top in this order, the hairpin accept ends up above the drop.
  const inserted = networkRules(NET, '10.1.0.0/24', GW)
    .filter((r) => r.insert === true)
    .map((r) => r.spec.at(-1));
  t.same(inserted, ['DROP', 'ACCEPT']);
  t.not(
    networkRules('b'.repeat(64), '10.1.0.0/24', GW)[0]?.spec.join(' '),
    networkRules(NET, '10.1.0.0/24', GW)[0]?.spec.join(' '),
    'the comment names the network',
  );
});

t.test('DNAT per port binding: protocol, range, host address or all', async (t) => {
  const dnat = (hostSpec: string[], proto: string, range: string, to: string) => ({
    table: 'nat',
    chain: 'OVSNET-DNAT',
    spec: [...hostSpec, '-p', proto, '--dport', range, ...EP_COMMENT, '-j', 'DNAT', '--to-destination', to],
  });
  t.same(portRules(EP, '10.1.0.5', []), [], 'no binding, no rule');
  t.same(portRules(EP, '10.1.0.5', [bind({})]), [dnat([], 'tcp', '8080', '10.1.0.5:80')], 'tcp, every host address (hostIp empty)');
  t.same(
    portRules(EP, '10.1.0.5', [bind({ hostIp: '0.0.0.0' })]),
    [dnat([], 'tcp', '8080', '10.1.0.5:80')],
    '0.0.0.0 is every host address too',
  );
  t.same(
    portRules(EP, '10.1.0.5', [bind({ hostIp: '192.0.2.7' })]),
    [dnat(['-d', '192.0.2.7'], 'tcp', '8080', '10.1.0.5:80')],
    'one host address',
  );
  t.same(
    portRules(EP, '10.1.0.5', [bind({ proto: 'udp', containerPort: 53, hostPort: 5353, hostPortEnd: 5353 })]),
    [dnat([], 'udp', '5353', '10.1.0.5:53')],
    'udp',
  );
  t.same(
    portRules(EP, '10.1.0.5', [bind({ proto: 'sctp', containerPort: 9, hostPort: 9000, hostPortEnd: 9000 })]),
    [dnat([], 'sctp', '9000', '10.1.0.5:9')],
    'sctp',
  );
  t.same(
    portRules(EP, '10.1.0.5', [bind({ hostPort: 8080, hostPortEnd: 8082 })]),
    [dnat([], 'tcp', '8080:8082', '10.1.0.5:80')],
    'a host port range',
  );
  t.same(
    portRules(EP, '10.1.0.5', [bind({ hostPort: 8080, hostPortEnd: 0 })]),
    [dnat([], 'tcp', '8080', '10.1.0.5:80')],
    'an end below the start is one port',
  );
  t.same(
    portRules(EP, '10.1.0.5', [bind({}), bind({ proto: 'udp', hostIp: '192.0.2.7', hostPort: 53, hostPortEnd: 53, containerPort: 53 })]),
    [dnat([], 'tcp', '8080', '10.1.0.5:80'), dnat(['-d', '192.0.2.7'], 'udp', '53', '10.1.0.5:53')],
    'one rule per binding, in order',
  );
});

t.test('iptables arguments: check, append or insert at the top, delete; chains and jumps', async (t) => {
  const [masq, drop] = networkRules(NET, '10.1.0.0/24', GW);
  if (masq === undefined || drop === undefined) throw new Error('rules expected');
  t.same(ruleArgs('check', masq), ['-w', '-t', 'nat', '-C', 'OVSNET-POSTROUTING', ...masq.spec]);
  t.same(ruleArgs('add', masq), ['-w', '-t', 'nat', '-A', 'OVSNET-POSTROUTING', ...masq.spec]);
  t.same(ruleArgs('add', drop), ['-w', '-t', 'filter', '-I', 'OVSNET-FORWARD', '1', ...drop.spec]);
  t.same(ruleArgs('delete', drop), ['-w', '-t', 'filter', '-D', 'OVSNET-FORWARD', ...drop.spec], 'delete names the rule, not its position');
  t.same(newChainArgs('nat', CHAINS.dnat), ['-w', '-t', 'nat', '-N', 'OVSNET-DNAT']);
  t.same(OWN_CHAINS, [
    ['nat', 'OVSNET-POSTROUTING'],
    ['nat', 'OVSNET-DNAT'],
    ['filter', 'OVSNET-FORWARD'],
  ]);
  t.same(
    JUMPS.map((j) => [j.table, j.chain, j.spec.at(-1), j.insert]),
    [
      ['nat', 'POSTROUTING', 'OVSNET-POSTROUTING', false],
      ['nat', 'PREROUTING', 'OVSNET-DNAT', false],
      ['nat', 'OUTPUT', 'OVSNET-DNAT', false],
      ['filter', 'FORWARD', 'OVSNET-FORWARD', true],
    ],
  );
});

/** An iptables that keeps rules per table and chain, answering -N, -C, -A, -I, -D as the real one. */
function fakeIptables() {
  const rules = new Map<string, string[]>();
  const calls: string[][] = [];
  let failOn: string | undefined;
  const run = async (cmd: string, args: readonly string[]): Promise<ExecResult> => {
    calls.push([cmd, ...args]);
    const [, , table, op, chain, ...rest] = args;
    const key = `${table ?? ''}/${chain ?? ''}`;
    const list = rules.get(key);
    const rule = (op === '-I' ? rest.slice(1) : rest).join(' ');
    if (op === '-N') {
      if (list !== undefined) return { code: 1, stdout: '', stderr: 'iptables: Chain already exists.\n' };
      rules.set(key, []);
      return { code: 0, stdout: '', stderr: '' };
    }
    const here = list ?? [];
    if (op === '-C') return { code: here.includes(rule) ? 0 : 1, stdout: '', stderr: '' };
    if (failOn !== undefined && rule.includes(failOn)) return { code: 1, stdout: '', stderr: `iptables: cannot ${failOn}\n` };
    if (op === '-A') here.push(rule);
    else if (op === '-I') here.unshift(rule);
    else if (op === '-D') here.splice(here.indexOf(rule), 1);
    rules.set(key, here);
    return { code: 0, stdout: '', stderr: '' };
  };
  return { rules, calls, run, failOn: (s: string | undefined) => (failOn = s) };
}

t.test('Nat: chains once, every add checked first, removal mirrors the add and leaves nothing', async (t) => {
  const ipt = fakeIptables();
  const nat = new Nat('iptables-test', ipt.run);
  await nat.addNetwork(NET, '10.1.0.0/24', GW);
  t.same(
    ipt.calls.slice(0, 3),
    OWN_CHAINS.map(([table, chain]) => ['iptables-test', ...newChainArgs(table, chain)]),
    'the chains first',
  );
  t.same(
    ipt.rules.get('filter/OVSNET-FORWARD'),
    [
      `-i ${GW} -o ${GW} ${NET_COMMENT.join(' ')} -j ACCEPT`,
      `-i ${GW} -o ovg+ ${NET_COMMENT.join(' ')} -j DROP`,
      `-i ${GW} ${NET_COMMENT.join(' ')} -j ACCEPT`,
      `-o ${GW} ${NET_COMMENT.join(' ')} -j ACCEPT`,
    ],
    'the hairpin above the isolation drop, both above the accepts',
  );
  t.same(ipt.rules.get('filter/FORWARD'), ['-j OVSNET-FORWARD']);
  const before = ipt.calls.length;
  await nat.addNetwork(NET, '10.1.0.0/24', GW);
  t.same(
    ipt.calls.slice(before).map((c) => c[4]),
    ['-C', '-C', '-C', '-C', '-C'],
    'again: checks only, no chain creation, no duplicate',
  );
  await nat.addPorts(EP, '10.1.0.5', [bind({}), bind({ proto: 'udp', hostPort: 53, hostPortEnd: 53, containerPort: 53 })]);
  t.equal(ipt.rules.get('nat/OVSNET-DNAT')?.length, 2);
  await nat.removePorts(EP, '10.1.0.5', [bind({}), bind({ proto: 'udp', hostPort: 53, hostPortEnd: 53, containerPort: 53 })]);
  await nat.removeNetwork(NET, '10.1.0.0/24', GW);
  for (const chain of ['nat/OVSNET-POSTROUTING', 'nat/OVSNET-DNAT', 'filter/OVSNET-FORWARD'])
    t.same(ipt.rules.get(chain), [], `${chain} empty again`);
  const after = ipt.calls.length;
  await nat.removeNetwork(NET, '10.1.0.0/24', GW);
  t.same(
    ipt.calls.slice(after).map((c) => c[4]),
    ['-C', '-C', '-C', '-C', '-C'],
    'removing again: a missing rule is done',
  );
});

t.test('Nat: a port rule that cannot be added takes back the ones added before it', async (t) => {
  const ipt = fakeIptables();
  const nat = new Nat('iptables', ipt.run);
  ipt.failOn('--dport 9090');
  await t.rejects(nat.addPorts(EP, '10.1.0.5', [bind({}), bind({ hostPort: 9090, hostPortEnd: 9090 })]), {
    code: 'NAT_FAILED',
    message: /^cannot add nat rule -p tcp --dport 9090 .*: iptables: cannot --dport 9090$/,
  });
  t.same(ipt.rules.get('nat/OVSNET-DNAT'), [], 'the 8080 rule was removed again');
});
