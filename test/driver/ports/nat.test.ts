/** The iptables rules ovsnet wants (pure builders), and how Nat applies and removes them. */
import t from 'tap';
import type { ExecResult } from '../../../src/lib/exec.js';
import { Nat } from '../../../src/driver/ports/nat.js';
import {
  CHAINS,
  DOCKER_ISOLATION,
  JUMPS,
  networkRules,
  newChainArgs,
  OWN_CHAINS,
  portRules,
  ruleArgs,
} from '../../../src/driver/ports/nat-rules.js';
import { detectFlavour, flavour } from '../../../src/driver/ports/iptables-flavour.js';
import type { PortBinding } from '../../../src/driver/model/records.js';

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

t.test(
  "a network: masquerade out, isolation from other gateways and Docker's bridges before its accepts, hairpin first, in only replies and DNAT",
  async (t) => {
    t.same(networkRules(NET, '10.1.0.0/24', GW), [
      { table: 'nat', chain: 'OVSNET-POSTROUTING', spec: ['-s', '10.1.0.0/24', '!', '-o', GW, ...NET_COMMENT, '-j', 'MASQUERADE'] },
      {
        table: 'filter',
        chain: 'OVSNET-FORWARD',
        spec: ['-i', GW, '-m', 'conntrack', '!', '--ctstate', 'RELATED,ESTABLISHED,DNAT', ...NET_COMMENT, '-j', 'DOCKER-ISOLATION-STAGE-2'],
        insert: true,
      },
      { table: 'filter', chain: 'OVSNET-FORWARD', spec: ['-i', GW, '-o', 'ovg+', ...NET_COMMENT, '-j', 'DROP'], insert: true },
      { table: 'filter', chain: 'OVSNET-FORWARD', spec: ['-i', GW, '-o', GW, ...NET_COMMENT, '-j', 'ACCEPT'], insert: true },
      { table: 'filter', chain: 'OVSNET-FORWARD', spec: ['-i', GW, ...NET_COMMENT, '-j', 'ACCEPT'] },
      {
        table: 'filter',
        chain: 'OVSNET-FORWARD',
        spec: ['-o', GW, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', ...NET_COMMENT, '-j', 'ACCEPT'],
      },
      {
        table: 'filter',
        chain: 'OVSNET-FORWARD',
        spec: ['-o', GW, '-m', 'conntrack', '--ctstate', 'DNAT', ...NET_COMMENT, '-j', 'ACCEPT'],
      },
      { table: 'filter', chain: 'OVSNET-FORWARD', spec: ['-o', GW, ...NET_COMMENT, '-j', 'DROP'] },
    ]);
    t.same(
      networkRules(NET, 'fd00:1::/64', GW).map((r) => r.table),
      ['filter', 'filter', 'filter', 'filter', 'filter', 'filter', 'filter'],
      'IPv6: the same forwarding rules, no masquerade',
    );
    // Inserted at the top in this order, the hairpin accept ends up above the drop, both above
    // the jump into Docker's isolation chain (new connections only: replies and published ports pass).
    const inserted = networkRules(NET, '10.1.0.0/24', GW)
      .filter((r) => r.insert === true)
      .map((r) => r.spec.at(-1));
    t.same(inserted, [DOCKER_ISOLATION, 'DROP', 'ACCEPT']);
    t.not(
      networkRules('b'.repeat(64), '10.1.0.0/24', GW)[0]?.spec.join(' '),
      networkRules(NET, '10.1.0.0/24', GW)[0]?.spec.join(' '),
      'the comment names the network',
    );
  },
);

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

/**
 * iptables of one flavour as the real ones answer: -N, -C, -A, -I, -D, -S per family; -save
 * prints a table; -restore --noflush applies a batch from stdin all or nothing. `docker` lists
 * the chains Docker made (flavour detection).
 */
function fakeIptables(docker: string[] = []) {
  const tables = { 4: new Map<string, string[]>(), 6: new Map<string, string[]>() };
  const calls: string[][] = [];
  let failOn: string | undefined;
  const ok = (stdout = ''): ExecResult => ({ code: 0, stdout, stderr: '' });
  const fail = (stderr: string): ExecResult => ({ code: 1, stdout: '', stderr });
  const one = (rules: Map<string, string[]>, table: string, op: string, chain: string, rest: string[]): ExecResult => {
    const key = `${table}/${chain}`;
    const list = rules.get(key);
    const rule = (op === '-I' ? rest.slice(1) : rest).join(' ');
    if (op === '-N') {
      if (list !== undefined) return fail('iptables: Chain already exists.\n');
      rules.set(key, []);
      return ok();
    }
    if (op === '-S') return list === undefined && !docker.includes(chain) ? fail('iptables: No chain/target/match by that name.\n') : ok();
    const here = list ?? [];
    if (op === '-C') return here.includes(rule) ? ok() : fail('iptables: Bad rule.\n');
    if (failOn !== undefined && rule.includes(failOn)) return fail(`iptables: cannot ${failOn}\n`);
    if (op === '-A') here.push(rule);
    else if (op === '-I') here.unshift(rule);
    else if (op === '-D') {
      if (!here.includes(rule)) return fail('iptables: Bad rule (does a matching rule exist in that chain?).\n');
      here.splice(here.indexOf(rule), 1);
    }
    rules.set(key, here);
    return ok();
  };
  const run = async (cmd: string, args: readonly string[], input?: string): Promise<ExecResult> => {
    calls.push([cmd, ...args]);
    const rules = tables[cmd.startsWith('ip6') ? 6 : 4];
    if (cmd.endsWith('-save')) {
      const table = args[1] ?? '';
      const lines = [...rules]
        .filter(([k]) => k.startsWith(`${table}/`))
        .flatMap(([k, l]) => l.map((r) => `-A ${k.split('/')[1] ?? ''} ${r}`));
      return ok(`*${table}\n${lines.join('\n')}\nCOMMIT\n`);
    }
    if (cmd.endsWith('-restore')) {
      const copy = new Map([...rules].map(([k, l]) => [k, [...l]]));
      let table = '';
      for (const line of (input ?? '').split('\n')) {
        if (line.startsWith('*')) table = line.slice(1);
        if (!line.startsWith('-')) continue;
        const [op = '', chain = '', ...rest] = line.split(' ');
        const r = one(
          copy,
          table,
          op,
          chain,
          rest.map((w) => w.replace(/^"(.*)"$/, '$1')),
        );
        if (r.code !== 0) return fail(`iptables-restore: line failed: ${line}\n`);
      }
      for (const [k, l] of copy) rules.set(k, l);
      return ok();
    }
    const [, , table = '', op = '', chain = '', ...rest] = args;
    return one(rules, table, op, chain, rest);
  };
  return { tables, rules: tables[4], calls, run, failOn: (s: string | undefined) => (failOn = s) };
}

t.test('Nat: chains once, every add checked first, removal mirrors the add and leaves nothing', async (t) => {
  const ipt = fakeIptables();
  const nat = new Nat(ipt.run, flavour('nft'));
  await nat.addNetwork(NET, '10.1.0.0/24', GW);
  t.same(
    ipt.calls.slice(0, 3),
    OWN_CHAINS.map(([table, chain]) => ['iptables-nft', ...newChainArgs(table, chain)]),
    'the chains first, with the flavour given',
  );
  t.same(
    ipt.rules.get('filter/OVSNET-FORWARD'),
    [
      `-i ${GW} -o ${GW} ${NET_COMMENT.join(' ')} -j ACCEPT`,
      `-i ${GW} -o ovg+ ${NET_COMMENT.join(' ')} -j DROP`,
      `-i ${GW} -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT ${NET_COMMENT.join(' ')} -j DOCKER-ISOLATION-STAGE-2`,
      `-i ${GW} ${NET_COMMENT.join(' ')} -j ACCEPT`,
      `-o ${GW} -m conntrack --ctstate RELATED,ESTABLISHED ${NET_COMMENT.join(' ')} -j ACCEPT`,
      `-o ${GW} -m conntrack --ctstate DNAT ${NET_COMMENT.join(' ')} -j ACCEPT`,
      `-o ${GW} ${NET_COMMENT.join(' ')} -j DROP`,
    ],
    "the hairpin above the isolation drop, both above Docker's isolation chain and the accepts; in: replies and DNAT, then drop",
  );
  t.same(ipt.rules.get(`filter/${DOCKER_ISOLATION}`), [], "Docker's isolation chain made (empty) where Docker has not made it");
  t.same(ipt.rules.get('filter/FORWARD'), ['-j OVSNET-FORWARD']);
  t.same(ipt.rules.get('nat/OUTPUT'), ['! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j OVSNET-DNAT'], 'loopback never DNATed');
  const before = ipt.calls.length;
  await nat.addNetwork(NET, '10.1.0.0/24', GW);
  t.same(
    ipt.calls.slice(before).map((c) => c[4]),
    ['-C', '-C', '-C', '-C', '-C', '-C', '-C', '-C', '-C'],
    'again: checks only (the old accept-all, then the eight rules), no chain creation, no duplicate',
  );
  await nat.addPorts(EP, '10.1.0.5', [bind({}), bind({ proto: 'udp', hostPort: 53, hostPortEnd: 53, containerPort: 53 })]);
  t.equal(ipt.rules.get('nat/OVSNET-DNAT')?.length, 2);
  await nat.removePorts(EP);
  await nat.removeNetwork(NET, '10.1.0.0/24', GW);
  for (const chain of ['nat/OVSNET-POSTROUTING', 'nat/OVSNET-DNAT', 'filter/OVSNET-FORWARD'])
    t.same(ipt.rules.get(chain), [], `${chain} empty again`);
  const after = ipt.calls.length;
  await nat.removeNetwork(NET, '10.1.0.0/24', GW);
  t.ok(
    ipt.calls.slice(after).every((c) => c[4] === '-C'),
    'removing again: a missing rule is done',
  );
});

t.test("Nat: Docker's isolation chain, where Docker made it, is used as it is", async (t) => {
  const ipt = fakeIptables();
  ipt.rules.set(`filter/${DOCKER_ISOLATION}`, ['-o docker0 -j DROP', '-j RETURN']);
  await new Nat(ipt.run, flavour('nft')).addNetwork(NET, '10.1.0.0/24', GW);
  t.same(ipt.rules.get(`filter/${DOCKER_ISOLATION}`), ['-o docker0 -j DROP', '-j RETURN'], "Docker's rules untouched");
  await new Nat(ipt.run, flavour('nft')).removeNetwork(NET, '10.1.0.0/24', GW);
  t.same(ipt.rules.get(`filter/${DOCKER_ISOLATION}`), ['-o docker0 -j DROP', '-j RETURN'], 'and kept when the network goes');
});

t.test('Nat: an IPv6 network gets the forwarding rules through ip6tables, no masquerade', async (t) => {
  const ipt = fakeIptables();
  const nat = new Nat(ipt.run, flavour('legacy'));
  await nat.addNetwork(NET, 'fd00:1::/64', GW);
  t.equal(ipt.tables[6].get('filter/OVSNET-FORWARD')?.length, 7);
  t.same(ipt.tables[6].get(`filter/${DOCKER_ISOLATION}`), [], "ip6tables: Docker's isolation chain made too");
  t.same(ipt.tables[6].get('filter/FORWARD'), ['-j OVSNET-FORWARD']);
  t.equal(ipt.tables[4].size, 0, 'nothing in the IPv4 tables');
  t.ok(
    ipt.calls.every((c) => c[0] === 'ip6tables-legacy'),
    'ip6tables of the flavour',
  );
});

t.test("Nat: an older version's accept-everything rule and loopback-capturing jump are replaced", async (t) => {
  const ipt = fakeIptables();
  ipt.rules.set('filter/OVSNET-FORWARD', [`-o ${GW} ${NET_COMMENT.join(' ')} -j ACCEPT`]);
  ipt.rules.set('nat/OUTPUT', ['-m addrtype --dst-type LOCAL -j OVSNET-DNAT']);
  const nat = new Nat(ipt.run, flavour(''));
  await nat.addNetwork(NET, '10.1.0.0/24', GW);
  t.notOk(ipt.rules.get('filter/OVSNET-FORWARD')?.includes(`-o ${GW} ${NET_COMMENT.join(' ')} -j ACCEPT`), 'old accept gone');
  t.same(ipt.rules.get('nat/OUTPUT'), ['! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j OVSNET-DNAT']);
});

t.test("Nat: an endpoint's port rules in one save and one restore, replaced as a whole, atomically", async (t) => {
  const ipt = fakeIptables();
  const nat = new Nat(ipt.run, flavour('nft'));
  await nat.addNetwork(NET, '10.1.0.0/24', GW);
  const before = ipt.calls.length;
  const three = [
    bind({}),
    bind({ hostPort: 8081, hostPortEnd: 8081, containerPort: 81 }),
    bind({ proto: 'udp', hostPort: 53, hostPortEnd: 53 }),
  ];
  await nat.addPorts(EP, '10.1.0.5', three);
  t.same(
    ipt.calls.slice(before).map((c) => c[0]),
    ['iptables-nft-save', 'iptables-nft-restore'],
    'three ports: two processes (one per rule, twice, before)',
  );
  await nat.addPorts('f'.repeat(64), '10.1.0.6', [bind({ hostPort: 9000, hostPortEnd: 9000 })]);
  await nat.addPorts(EP, '10.1.0.5', [bind({ hostPort: 8090, hostPortEnd: 8090 })]);
  t.same(
    ipt.rules.get('nat/OVSNET-DNAT'),
    [
      `-p tcp --dport 9000 -m comment --comment ovsnet:ffffffffffff -j DNAT --to-destination 10.1.0.6:80`,
      `-p tcp --dport 8090 ${EP_COMMENT.join(' ')} -j DNAT --to-destination 10.1.0.5:80`,
    ],
    "publishing again replaces the endpoint's rules, another endpoint's stay",
  );
  ipt.failOn('--dport 7000');
  await t.rejects(
    nat.addPorts(EP, '10.1.0.5', [bind({ hostPort: 6000, hostPortEnd: 6000 }), bind({ hostPort: 7000, hostPortEnd: 7000 })]),
    {
      code: 'NAT_FAILED',
      message:
        /^cannot apply the port rules of endpoint eeeeeeeeeeee \(iptables-nft-restore\): iptables-restore: line failed: -A OVSNET-DNAT -p tcp --dport 7000/,
    },
  );
  t.match(ipt.rules.get('nat/OVSNET-DNAT'), [/--dport 9000/, /--dport 8090/], 'a failed batch changes nothing');
  ipt.failOn(undefined);
  await nat.removePorts(EP);
  await nat.removePorts(EP);
  t.match(ipt.rules.get('nat/OVSNET-DNAT'), [/--dport 9000/], 'removed (twice is fine), the other endpoint untouched');
  await nat.addPorts(EP, '10.1.0.5', [bind({})]);
  t.same(await nat.prunePorts(new Set(['eeeeeeeeeeee'])), ['ffffffffffff'], 'prune: the rules of endpoints not kept');
  t.match(ipt.rules.get('nat/OVSNET-DNAT'), [/--dport 8080/]);
  t.same(await nat.prunePorts(new Set(['eeeeeeeeeeee'])), [], 'again: nothing');
});

t.test('the flavour Docker uses: the one holding its chains, else the selected iptables', async (t) => {
  const nft = fakeIptables();
  const legacyRun: typeof nft.run = async (cmd, args, input) =>
    cmd.includes('legacy') && args.includes('DOCKER-USER') ? { code: 0, stdout: '', stderr: '' } : nft.run(cmd, args, input);
  t.equal((await detectFlavour(legacyRun)).iptables, 'iptables-legacy', 'Docker on legacy');
  t.equal((await detectFlavour(fakeIptables(['DOCKER-USER']).run)).iptables, 'iptables-nft', 'Docker on nft');
  t.equal((await detectFlavour(fakeIptables().run)).iptables, 'iptables', 'no Docker chains: the selected alternative');
  t.same(flavour('legacy').restore, { 4: 'iptables-legacy-restore', 6: 'ip6tables-legacy-restore' });
  const nat = new Nat(fakeIptables(['DOCKER']).run);
  t.equal((await nat.flavour()).name, 'nft', 'Nat finds it on first use');
});
