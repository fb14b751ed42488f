/** The iptables rules ovsnet wants (pure builders), and how Nat applies and removes them. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createLogger } from '../../../src/lib/log.js';
import t, { type Test } from 'tap';
import { stdinText as text, type ExecResult, type Stdin } from '../../../src/lib/exec.js';
import { Nat } from '../../../src/driver/ports/nat.js';
import {
  CHAINS,
  DOCKER_ISOLATION,
  FIRST_JUMPS,
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

t.test('a network: masquerade out; isolation (drops only) apart from the accepts; hairpin first, in only replies and DNAT', async (t) => {
  const iso = (spec: string[], target: string) => ({
    table: 'filter',
    chain: 'OVSNET-ISOLATION',
    spec: [...spec, ...NET_COMMENT, '-j', target],
  });
  const inb = (spec: string[], target: string) => ({
    table: 'mangle',
    chain: 'OVSNET-INBOUND',
    spec: [...spec, ...NET_COMMENT, '-j', target],
  });
  const fwd = (spec: string[], target: string, insert?: true) => ({
    table: 'filter',
    chain: 'OVSNET-FORWARD',
    spec: [...spec, ...NET_COMMENT, '-j', target],
    ...(insert === undefined ? {} : { insert }),
  });
  t.same(networkRules(NET, '10.1.0.0/24', GW), [
    { table: 'nat', chain: 'OVSNET-POSTROUTING', spec: ['-s', '10.1.0.0/24', '!', '-o', GW, ...NET_COMMENT, '-j', 'MASQUERADE'] },
    iso(['-i', GW, '-m', 'conntrack', '!', '--ctstate', 'RELATED,ESTABLISHED,DNAT'], 'DOCKER-ISOLATION-STAGE-2'),
    inb(['-o', GW, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED'], 'RETURN'),
    inb(['-o', GW, '-m', 'conntrack', '--ctstate', 'DNAT'], 'RETURN'),
    inb(['-i', GW, '-o', GW], 'RETURN'),
    inb(['-o', GW], 'DROP'),
    fwd(['-i', GW, '-o', 'ovg+'], 'DROP', true),
    fwd(['-i', GW, '-o', GW], 'ACCEPT', true),
    fwd(['-i', GW], 'ACCEPT'),
    fwd(['-o', GW, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED'], 'ACCEPT'),
    fwd(['-o', GW, '-m', 'conntrack', '--ctstate', 'DNAT'], 'ACCEPT'),
    fwd(['-o', GW], 'DROP'),
  ]);
  t.same(
    networkRules(NET, 'fd00:1::/64', GW).map((r) => r.table),
    ['nat', 'filter', 'mangle', 'mangle', 'mangle', 'mangle', ...Array.from({ length: 6 }, () => 'filter')],
    'IPv6: the same rules, masquerade (NAT66) included',
  );
  t.same(networkRules(NET, 'fd00:1::/64', GW)[0]?.spec, ['-s', 'fd00:1::/64', '!', '-o', GW, ...NET_COMMENT, '-j', 'MASQUERADE']);
  t.notOk(
    networkRules(NET, 'fd00:1::/64', GW, false).some((r) => r.table === 'nat'),
    'enable_ip_masquerade=false: no masquerade for IPv6 either',
  );
  t.ok(
    networkRules(NET, '10.1.0.0/24', GW)
      .filter((r) => r.chain === CHAINS.isolation || r.chain === CHAINS.inbound)
      .every((r) => ['DROP', 'RETURN', DOCKER_ISOLATION].includes(r.spec.at(-1) ?? '')),
    "the isolation and inbound chains only drop (or return): the operator's DOCKER-USER rules still see what passes",
  );
  // Inserted at the top in this order, the hairpin accept ends up above the drop towards other gateways.
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
    portRules(EP, '10.1.0.5', [bind({}), bind({ proto: 'udp', hostIp: '192.0.2.7', hostPort: 53, hostPortEnd: 53, containerPort: 53 })]),
    [dnat([], 'tcp', '8080', '10.1.0.5:80'), dnat(['-d', '192.0.2.7'], 'udp', '53', '10.1.0.5:53')],
    'one rule per binding, in order',
  );
});

t.test('iptables arguments: check, append or insert at the top, delete; chains and jumps', async (t) => {
  const [masq] = networkRules(NET, '10.1.0.0/24', GW);
  const drop = networkRules(NET, '10.1.0.0/24', GW).find((r) => r.insert === true);
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
    ['filter', 'OVSNET-ISOLATION'],
    ['mangle', 'OVSNET-INBOUND'],
  ]);
  t.same(
    FIRST_JUMPS.map((j) => [j.table, j.chain, j.spec.join(' ')]),
    [
      ['filter', 'FORWARD', '-j DOCKER-USER'],
      ['filter', 'DOCKER-USER', '-j OVSNET-ISOLATION'],
      ['mangle', 'FORWARD', '-j OVSNET-INBOUND'],
    ],
    "kept first: FORWARD into Docker's DOCKER-USER, from its top into ovsnet's isolation; mangle's FORWARD into ovsnet's inbound chain",
  );
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
const BUILT_IN = ['INPUT', 'FORWARD', 'OUTPUT', 'PREROUTING', 'POSTROUTING'];

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
    if (op === '-S') {
      if (list === undefined && !docker.includes(chain) && !BUILT_IN.includes(chain))
        return fail('iptables: No chain/target/match by that name.\n');
      return ok([`-N ${chain}`, ...(list ?? []).map((r) => `-A ${chain} ${r}`)].join('\n') + '\n');
    }
    const here = list ?? [];
    if (op === '-C') return here.includes(rule) ? ok() : fail('iptables: Bad rule.\n');
    if (failOn !== undefined && rule.includes(failOn)) return fail(`iptables: cannot ${failOn}\n`);
    if (op === '-A') here.push(rule);
    else if (op === '-I') here.unshift(rule);
    else if (op === '-D' && /^\d+$/.test(rule)) {
      if (Number(rule) > here.length) return fail('iptables: Index of deletion too big.\n');
      here.splice(Number(rule) - 1, 1);
    } else if (op === '-D') {
      if (!here.includes(rule)) return fail('iptables: Bad rule (does a matching rule exist in that chain?).\n');
      here.splice(here.indexOf(rule), 1);
    }
    rules.set(key, here);
    return ok();
  };
  const run = async (cmd: string, args: readonly string[], input?: Stdin): Promise<ExecResult> => {
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
      for (const line of text(input).split('\n')) {
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
    ipt.calls.slice(0, OWN_CHAINS.length),
    OWN_CHAINS.map(([table, chain]) => ['iptables-nft', ...newChainArgs(table, chain)]),
    'the chains first, with the flavour given',
  );
  const C = NET_COMMENT.join(' ');
  t.same(
    ipt.rules.get('filter/OVSNET-ISOLATION'),
    [`-i ${GW} -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT ${C} -j DOCKER-ISOLATION-STAGE-2`],
    "isolation: out through Docker's isolation chain",
  );
  t.same(
    ipt.rules.get('mangle/OVSNET-INBOUND'),
    [
      `-o ${GW} -m conntrack --ctstate RELATED,ESTABLISHED ${C} -j RETURN`,
      `-o ${GW} -m conntrack --ctstate DNAT ${C} -j RETURN`,
      `-i ${GW} -o ${GW} ${C} -j RETURN`,
      `-o ${GW} ${C} -j DROP`,
    ],
    "inbound (mangle): replies, DNAT and the network's own pass, the rest dropped",
  );
  t.same(ipt.rules.get('mangle/FORWARD'), ['-j OVSNET-INBOUND'], "mangle's FORWARD jumps to it");
  t.same(
    ipt.rules.get('filter/OVSNET-FORWARD'),
    [
      `-i ${GW} -o ${GW} ${C} -j ACCEPT`,
      `-i ${GW} -o ovg+ ${C} -j DROP`,
      `-i ${GW} ${C} -j ACCEPT`,
      `-o ${GW} -m conntrack --ctstate RELATED,ESTABLISHED ${C} -j ACCEPT`,
      `-o ${GW} -m conntrack --ctstate DNAT ${C} -j ACCEPT`,
      `-o ${GW} ${C} -j DROP`,
    ],
    'the hairpin above the drop towards other gateways, both above the accepts; in: replies and DNAT, then drop',
  );
  t.same(ipt.rules.get(`filter/${DOCKER_ISOLATION}`), [], "Docker's isolation chain made (empty) where Docker has not made it");
  t.same(ipt.rules.get('filter/DOCKER-USER'), ['-j OVSNET-ISOLATION'], 'DOCKER-USER made where Docker has not, ovsnet first in it');
  t.same(ipt.rules.get('filter/FORWARD'), ['-j DOCKER-USER', '-j OVSNET-FORWARD']);
  t.same(ipt.rules.get('nat/OUTPUT'), ['! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j OVSNET-DNAT'], 'loopback never DNATed');
  const before = ipt.calls.length;
  await nat.addNetwork(NET, '10.1.0.0/24', GW);
  t.same(
    ipt.calls.slice(before).map((c) => c[4]),
    ['-S', '-S', '-S', ...Array.from({ length: 18 }, () => '-C')],
    'again: the three jumps found first, then checks only (the twelve rules, then the six old ones), no duplicate',
  );
  await nat.addPorts(EP, '10.1.0.5', [bind({}), bind({ proto: 'udp', hostPort: 53, hostPortEnd: 53, containerPort: 53 })]);
  t.equal(ipt.rules.get('nat/OVSNET-DNAT')?.length, 2);
  await nat.removePorts(EP);
  await nat.removeNetwork(NET, '10.1.0.0/24', GW);
  for (const chain of [
    'nat/OVSNET-POSTROUTING',
    'nat/OVSNET-DNAT',
    'filter/OVSNET-FORWARD',
    'filter/OVSNET-ISOLATION',
    'mangle/OVSNET-INBOUND',
  ])
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

/**
 * The verdict of FORWARD for one packet, as the kernel walks it: mangle's FORWARD (policy
 * ACCEPT), then filter's, rules in order, jumps followed, RETURN back to the caller, filter's
 * FORWARD policy DROP (Docker sets it). Matches on -i, -o (with + wildcards) and conntrack state,
 * the only ones these chains use.
 */
function verdict(rules: Map<string, string[]>, inIf: string, outIf: string, state: 'NEW' | 'ESTABLISHED' | 'DNAT'): string {
  if (walk(rules, 'mangle', inIf, outIf, state, 'FORWARD') === 'DROP') return 'DROP';
  const filter = walk(rules, 'filter', inIf, outIf, state, 'FORWARD');
  return filter === 'RETURN' ? 'DROP' : filter;
}

function walk(
  rules: Map<string, string[]>,
  table: string,
  inIf: string,
  outIf: string,
  state: 'NEW' | 'ESTABLISHED' | 'DNAT',
  chain: string,
): string {
  const iface = (pattern: string, name: string) => (pattern.endsWith('+') ? name.startsWith(pattern.slice(0, -1)) : pattern === name);
  for (const rule of rules.get(`${table}/${chain}`) ?? []) {
    const w = rule.split(' ');
    let matches = true;
    let target = '';
    for (let i = 0; i < w.length; i++) {
      const negated = w[i] === '!';
      if (negated) i++;
      const [key, value = ''] = [w[i], w[i + 1]];
      i++;
      if (key === '-i') matches &&= iface(value, inIf) !== negated;
      else if (key === '-o') matches &&= iface(value, outIf) !== negated;
      else if (key === '--ctstate') matches &&= value.split(',').includes(state) !== negated;
      else if (key === '-j') target = value;
      else if (key !== '-m' && key !== '--comment') throw new Error(`verdict: no match ${key} in ${rule}`);
    }
    if (!matches) continue;
    if (target === 'ACCEPT' || target === 'DROP' || target === 'RETURN') return target;
    const sub = walk(rules, table, inIf, outIf, state, target);
    if (sub !== 'RETURN') return sub;
  }
  return 'RETURN';
}

/**
 * Docker 20.10's bridge driver starting (or restarting) with one user-defined bridge: its
 * isolation chains made anew, its accepts inserted at the top of FORWARD, then its jump into
 * DOCKER-USER put back first; DOCKER-USER kept as it is (a RETURN appended if missing).
 */
function dockerStarts(rules: Map<string, string[]>, bridge = 'br-u'): void {
  const accepts = [
    '-j DOCKER-ISOLATION-STAGE-1',
    `-o ${bridge} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
    `-o ${bridge} -j DOCKER`,
    `-i ${bridge} ! -o ${bridge} -j ACCEPT`,
    `-i ${bridge} -o ${bridge} -j ACCEPT`,
  ];
  const others = (rules.get('filter/FORWARD') ?? []).filter((r) => !accepts.includes(r) && r !== '-j DOCKER-USER');
  rules.set('filter/FORWARD', ['-j DOCKER-USER', ...accepts, ...others]);
  rules.set('filter/DOCKER-ISOLATION-STAGE-1', [`-i ${bridge} ! -o ${bridge} -j DOCKER-ISOLATION-STAGE-2`, '-j RETURN']);
  rules.set(`filter/${DOCKER_ISOLATION}`, [`-o ${bridge} -j DROP`, '-j RETURN']);
  rules.set('filter/DOCKER', []);
  const user = rules.get('filter/DOCKER-USER') ?? [];
  if (!user.includes('-j RETURN')) user.push('-j RETURN');
  rules.set('filter/DOCKER-USER', user);
}

/**
 * Docker 20.10's bridge driver in ip6tables (--ip6tables): its isolation chains and its accepts
 * at the top of FORWARD, and DOCKER-USER's jump NOT put back first (it does that for iptables
 * only): the jump stays below the bridge's accepts, as seen on a real host.
 */
function dockerStartsV6(rules: Map<string, string[]>, bridge = 'br-u'): void {
  dockerStarts(rules, bridge);
  const [user, ...rest] = rules.get('filter/FORWARD') ?? [];
  rules.set('filter/FORWARD', [...rest.slice(0, 5), user ?? '', ...rest.slice(5)]);
}

/** What crosses the host, by its effect: each case and the verdict it must get. */
function isolationHolds(t: Test, rules: Map<string, string[]>, when: string): void {
  const cases: [string, string, 'NEW' | 'ESTABLISHED' | 'DNAT', string, string][] = [
    ['br-u', GW, 'NEW', 'DROP', 'a container on a Docker bridge network opens no connection into the ovsnet network'],
    ['br-u', GW, 'ESTABLISHED', 'ACCEPT', 'replies to it pass'],
    ['br-u', GW, 'DNAT', 'ACCEPT', 'a published port is reached'],
    ['eth0', GW, 'NEW', 'DROP', 'nor does a machine routing through the host'],
    [GW, 'eth0', 'NEW', 'ACCEPT', 'the ovsnet container reaches outside'],
    [GW, 'br-u', 'NEW', 'DROP', 'and opens no connection to a Docker bridge network'],
    [GW, 'ovgbbbbbbbbbbbb', 'NEW', 'DROP', 'nor to another ovsnet network'],
    [GW, GW, 'NEW', 'ACCEPT', 'the hairpin back into its own network passes'],
    ['br-u', 'eth0', 'NEW', 'ACCEPT', "Docker's own traffic out is Docker's as before"],
  ];
  for (const [from, to, state, expected, what] of cases) t.equal(verdict(rules, from, to, state), expected, `${when}: ${what}`);
}

t.test(
  "Nat: isolation from Docker's bridge networks holds whichever starts first, after either restarts, and after a rule is put above it",
  async (t) => {
    const dockerFirst = fakeIptables(['DOCKER-USER']);
    dockerStarts(dockerFirst.rules);
    await new Nat(dockerFirst.run, flavour('nft')).addNetwork(NET, '10.1.0.0/24', GW);
    isolationHolds(t, dockerFirst.rules, 'Docker first');
    t.same(
      dockerFirst.rules.get('filter/DOCKER-USER'),
      ['-j OVSNET-ISOLATION', '-j RETURN'],
      "ovsnet first in DOCKER-USER, Docker's RETURN kept",
    );

    const ovsnetFirst = fakeIptables();
    const nat = new Nat(ovsnetFirst.run, flavour('nft'));
    await nat.addNetwork(NET, '10.1.0.0/24', GW);
    dockerStarts(ovsnetFirst.rules);
    isolationHolds(t, ovsnetFirst.rules, 'ovsnet first, then Docker (its accepts above every FORWARD rule ovsnet made)');
    dockerStarts(ovsnetFirst.rules);
    isolationHolds(t, ovsnetFirst.rules, 'dockerd restarted');
    await new Nat(ovsnetFirst.run, flavour('nft')).addNetwork(NET, '10.1.0.0/24', GW);
    isolationHolds(t, ovsnetFirst.rules, 'ovsnet restarted');
    t.same(ovsnetFirst.rules.get('filter/DOCKER-USER'), ['-j OVSNET-ISOLATION', '-j RETURN'], 'one jump, however often applied');

    // An operator's rule inserted above ovsnet's: the next reconcile puts ovsnet's back on top; the
    // operator's rule still applies to what ovsnet's drops let through.
    ovsnetFirst.rules.get('filter/DOCKER-USER')?.unshift(`-i ${GW} -o eth0 -j DROP`);
    await nat.addNetwork(NET, '10.1.0.0/24', GW);
    t.same(ovsnetFirst.rules.get('filter/DOCKER-USER'), ['-j OVSNET-ISOLATION', `-i ${GW} -o eth0 -j DROP`, '-j RETURN']);
    t.equal(verdict(ovsnetFirst.rules, GW, 'eth0', 'NEW'), 'DROP', "the operator's DOCKER-USER rule is still seen");
    t.equal(verdict(ovsnetFirst.rules, 'br-u', GW, 'NEW'), 'DROP');

    // A second copy of the jump further down (another tool, a race with Docker): one left, on top.
    ovsnetFirst.rules.set('filter/DOCKER-USER', ['-j RETURN', '-j OVSNET-ISOLATION', '-j OVSNET-ISOLATION']);
    await nat.addNetwork(NET, '10.1.0.0/24', GW);
    t.same(ovsnetFirst.rules.get('filter/DOCKER-USER'), ['-j OVSNET-ISOLATION', '-j RETURN']);
  },
);

t.test("Nat: IPv6 isolation holds under Docker 20.10's ip6tables, which puts its accepts above DOCKER-USER", async (t) => {
  const ipt = fakeIptables();
  const nat = new Nat(ipt.run, flavour('nft'));
  await nat.addNetwork(NET, 'fd00:1::/64', GW);
  dockerStartsV6(ipt.tables[6]);
  t.equal(ipt.tables[6].get('filter/FORWARD')?.[5], '-j DOCKER-USER', "control: Docker's accepts above DOCKER-USER");
  isolationHolds(t, ipt.tables[6], 'ovsnet first, then Docker');
  dockerStartsV6(ipt.tables[6]);
  await new Nat(ipt.run, flavour('nft')).addNetwork(NET, 'fd00:1::/64', GW);
  isolationHolds(t, ipt.tables[6], 'both restarted');
  const docker = fakeIptables(['DOCKER-USER']);
  dockerStartsV6(docker.tables[6]);
  await new Nat(docker.run, flavour('nft')).addNetwork(NET, 'fd00:1::/64', GW);
  isolationHolds(t, docker.tables[6], 'Docker first');
});

t.test('Nat: an IPv6 network gets the forwarding rules and its masquerade (NAT66) through ip6tables', async (t) => {
  const ipt = fakeIptables();
  const nat = new Nat(ipt.run, flavour('legacy'));
  await nat.addNetwork(NET, 'fd00:1::/64', GW);
  t.equal(ipt.tables[6].get('filter/OVSNET-FORWARD')?.length, 6);
  t.equal(ipt.tables[6].get('filter/OVSNET-ISOLATION')?.length, 1);
  t.equal(ipt.tables[6].get('mangle/OVSNET-INBOUND')?.length, 4);
  t.same(ipt.tables[6].get('mangle/FORWARD'), ['-j OVSNET-INBOUND']);
  t.same(ipt.tables[6].get(`filter/${DOCKER_ISOLATION}`), [], "ip6tables: Docker's isolation chain made too");
  t.same(ipt.tables[6].get('filter/FORWARD'), ['-j DOCKER-USER', '-j OVSNET-FORWARD']);
  t.same(ipt.tables[6].get('filter/DOCKER-USER'), ['-j OVSNET-ISOLATION']);
  t.same(ipt.tables[6].get('nat/OVSNET-POSTROUTING'), [`-s fd00:1::/64 ! -o ${GW} ${NET_COMMENT.join(' ')} -j MASQUERADE`]);
  t.same(ipt.tables[6].get('nat/POSTROUTING'), ['-j OVSNET-POSTROUTING']);
  t.equal(ipt.tables[4].size, 0, 'nothing in the IPv4 tables');
  await nat.removeNetwork(NET, 'fd00:1::/64', GW);
  t.same(ipt.tables[6].get('nat/OVSNET-POSTROUTING'), [], 'removed with the network');
  t.ok(
    ipt.calls.every((c) => c[0] === 'ip6tables-legacy'),
    'ip6tables of the flavour',
  );
});

t.test("Nat: an older version's accept-everything rule and loopback-capturing jump are replaced", async (t) => {
  const ipt = fakeIptables();
  const oldIsolation = `-i ${GW} -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT ${NET_COMMENT.join(' ')} -j DOCKER-ISOLATION-STAGE-2`;
  ipt.rules.set('filter/OVSNET-FORWARD', [oldIsolation, `-o ${GW} ${NET_COMMENT.join(' ')} -j ACCEPT`]);
  ipt.rules.set('nat/OUTPUT', ['-m addrtype --dst-type LOCAL -j OVSNET-DNAT']);
  const nat = new Nat(ipt.run, flavour(''));
  await nat.addNetwork(NET, '10.1.0.0/24', GW);
  t.notOk(ipt.rules.get('filter/OVSNET-FORWARD')?.includes(`-o ${GW} ${NET_COMMENT.join(' ')} -j ACCEPT`), 'old accept gone');
  t.notOk(
    ipt.rules.get('filter/OVSNET-FORWARD')?.includes(oldIsolation),
    'the old jump into Docker isolation moved to the isolation chain',
  );
  t.ok(ipt.rules.get('filter/OVSNET-ISOLATION')?.includes(oldIsolation));
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

t.test('Nat: ports on IPv6 host addresses DNATed by ip6tables to the IPv6 address; loopback left to the relay', async (t) => {
  const ipt = fakeIptables();
  const nat = new Nat(ipt.run, flavour('nft'));
  t.same(
    portRules(EP, 'fd00:1::5', [bind({ hostIp: '::' }), bind({ hostIp: '::1', hostPort: 8081, hostPortEnd: 8081 })]).map((r) =>
      r.spec.join(' '),
    ),
    [
      `-p tcp --dport 8080 ${EP_COMMENT.join(' ')} -j DNAT --to-destination [fd00:1::5]:80`,
      `-d ::1 -p tcp --dport 8081 ${EP_COMMENT.join(' ')} -j DNAT --to-destination [fd00:1::5]:80`,
    ],
    '[::]: every IPv6 address of the host; the container address in brackets',
  );
  await nat.addPorts(EP, '10.1.0.5', [bind({})]);
  await nat.addPorts(EP, 'fd00:1::5', [bind({ hostIp: '::' })]);
  t.match(ipt.tables[4].get('nat/OVSNET-DNAT'), [/--to-destination 10\.1\.0\.5:80/], 'IPv4 rule kept beside the IPv6 one');
  t.match(ipt.tables[6].get('nat/OVSNET-DNAT'), [/--to-destination \[fd00:1::5\]:80/]);
  t.same(
    ipt.tables[6].get('nat/OUTPUT'),
    ['! -d ::1/128 -m addrtype --dst-type LOCAL -j OVSNET-DNAT'],
    "the host's own connections to ::1 reach ovsnet's socket, never DNATed",
  );
  t.same(ipt.tables[6].get('nat/PREROUTING'), ['-m addrtype --dst-type LOCAL -j OVSNET-DNAT']);
  t.same(await nat.prunePorts(new Set()), ['eeeeeeeeeeee'], 'prune reads both families');
  t.same(ipt.tables[4].get('nat/OVSNET-DNAT'), []);
  t.same(ipt.tables[6].get('nat/OVSNET-DNAT'), [], 'both removed');
});

t.test('Nat: a host whose ip6tables cannot read its nat table (ipv6.disable=1) still removes and prunes IPv4 port rules', async (t) => {
  const ipt = fakeIptables();
  const run: typeof ipt.run = async (cmd, args, input) =>
    cmd.startsWith('ip6tables')
      ? { code: 3, stdout: '', stderr: "ip6tables-save: can't initialize ip6tables table `nat'\n" }
      : ipt.run(cmd, args, input);
  const nat = new Nat(run, flavour('nft'));
  await nat.addPorts(EP, '10.1.0.5', [bind({})]);
  await nat.removePorts(EP);
  t.same(ipt.tables[4].get('nat/OVSNET-DNAT'), [], 'removed');
  await nat.addPorts(EP, '10.1.0.5', [bind({})]);
  t.same(await nat.prunePorts(new Set()), ['eeeeeeeeeeee']);
  await t.rejects(nat.addPorts(EP, 'fd00:1::5', [bind({ hostIp: '::' })]), { code: 'NAT_FAILED' }, 'adding IPv6 rules still fails loudly');
});

t.test("Nat: the first IPv6 network turns the host's IPv6 forwarding on, once, and says so; IPv4 ones leave it", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-fwd-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'forwarding');
  fs.writeFileSync(file, '0\n');
  const said: string[] = [];
  const log = createLogger('warn', { write: (line: string) => void said.push(line) });
  const nat = new Nat(fakeIptables().run, flavour('nft'), { file, log });
  await nat.addNetwork(NET, '10.1.0.0/24', GW);
  t.equal(fs.readFileSync(file, 'utf8'), '0\n', 'an IPv4 network: left off');
  await nat.addNetwork(NET, 'fd00:1::/64', GW);
  t.equal(fs.readFileSync(file, 'utf8'), '1\n', 'an IPv6 network: on');
  t.equal(said.length, 1);
  t.match(said[0], /IPv6 forwarding was off: turned on .*accept_ra=2/);
  await nat.addNetwork(NET, 'fd00:2::/64', GW);
  t.equal(said.length, 1, 'on already: nothing written, nothing said');
  await new Nat(fakeIptables().run, flavour('nft')).addNetwork(NET, 'fd00:3::/64', GW);
  t.pass('without a forwarding switch given (tests, tools) nothing is touched');
});

t.test("Nat: enable_icc=false: the gateway routes nothing new between the network's containers; DNAT and replies pass", async (t) => {
  for (const subnet of ['10.1.0.0/24', 'fd00:1::/64']) {
    const ipt = fakeIptables();
    const nat = new Nat(ipt.run, flavour('nft'));
    await nat.addNetwork(NET, subnet, GW, true, false);
    const rules = ipt.tables[subnet.includes(':') ? 6 : 4];
    t.notOk(
      rules.get('mangle/OVSNET-INBOUND')?.some((r) => r.startsWith(`-i ${GW} -o ${GW} `)),
      `${subnet}: its own traffic is not let back in`,
    );
    t.equal(verdict(rules, GW, GW, 'NEW'), 'DROP', `${subnet}: a container routed to another through the gateway is dropped`);
    t.equal(verdict(rules, GW, GW, 'DNAT'), 'ACCEPT', `${subnet}: a published port reached through the host passes`);
    t.equal(verdict(rules, GW, GW, 'ESTABLISHED'), 'ACCEPT', `${subnet}: and its replies`);
    t.equal(verdict(rules, GW, 'eth0', 'NEW'), 'ACCEPT', `${subnet}: the outside is reached`);
    t.equal(verdict(rules, 'eth0', GW, 'DNAT'), 'ACCEPT', `${subnet}: published ports from outside`);
    await nat.removeNetwork(NET, subnet, GW);
    for (const chain of ['filter/OVSNET-FORWARD', 'filter/OVSNET-ISOLATION', 'mangle/OVSNET-INBOUND'])
      t.same(rules.get(chain), [], `${subnet}: ${chain} empty again`);
  }
});

t.test('-o ovsnet.ingress: its sources of the subnet family enter, in both chains, before the drops; removal takes them', async (t) => {
  const ingress = [
    { cidr: '198.18.0.2/32', port: { number: 8080, proto: 'tcp' as const } },
    { cidr: '0.0.0.0/0', port: { number: 53, proto: 'udp' as const } },
    { cidr: 'fd00:9::/64' },
  ];
  const specs = (subnet: string, chain: string) =>
    networkRules(NET, subnet, GW, true, true, ingress)
      .filter((r) => r.chain === chain)
      .map((r) => r.spec.filter((w) => !NET_COMMENT.includes(w)).join(' '));
  t.same(specs('10.1.0.0/24', CHAINS.inbound).slice(3), [
    `-o ${GW} -s 198.18.0.2/32 -p tcp --dport 8080 -j RETURN`,
    `-o ${GW} -p udp --dport 53 -j RETURN`,
    `-o ${GW} -j DROP`,
  ]);
  t.same(specs('10.1.0.0/24', CHAINS.forward).slice(-3), [
    `-o ${GW} -s 198.18.0.2/32 -p tcp --dport 8080 -j ACCEPT`,
    `-o ${GW} -p udp --dport 53 -j ACCEPT`,
    `-o ${GW} -j DROP`,
  ]);
  t.same(
    specs('fd00:1::/64', CHAINS.inbound).slice(3),
    [`-o ${GW} -s fd00:9::/64 -j RETURN`, `-o ${GW} -j DROP`],
    'IPv6 rules in ip6tables only',
  );
  t.same(networkRules(NET, '10.1.0.0/24', GW, true, true, []), networkRules(NET, '10.1.0.0/24', GW), 'none: as without the option');

  const ipt = fakeIptables();
  const nat = new Nat(ipt.run, flavour('nft'));
  await nat.addNetwork(NET, '10.1.0.0/24', GW, true, true, ingress);
  t.equal(ipt.rules.get('mangle/OVSNET-INBOUND')?.at(-1), `-o ${GW} ${NET_COMMENT.join(' ')} -j DROP`, 'the drop stays last');
  t.equal(ipt.rules.get('mangle/OVSNET-INBOUND')?.length, 6);
  await nat.removeNetwork(NET, '10.1.0.0/24', GW, ingress);
  t.same(ipt.rules.get('mangle/OVSNET-INBOUND'), []);
  t.same(ipt.rules.get('filter/OVSNET-FORWARD'), []);
});
