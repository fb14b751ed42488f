/**
 * The iptables rules ovsnet wants, as data (nat.ts applies them): masquerading on the way out,
 * forwarding through a network's gateway port and isolation from other ovsnet networks, DNAT
 * for -p port publishing, all in ovsnet's own chains, and the argument lists that check, add
 * and delete one rule. Pure: tested without iptables (test/driver/ports/nat.test.ts).
 */
import { GATEWAY_PREFIX, type PortBinding } from '../model/records.js';
import { familyOfRule, type NetRule } from '../model/policy-options.js';

export type Table = 'nat' | 'filter' | 'mangle';

export interface Rule {
  readonly table: Table;
  readonly chain: string;
  readonly spec: readonly string[];
  /** Inserted at the top of its chain rather than appended. */
  readonly insert?: boolean;
}

export const CHAINS = {
  masquerade: 'OVSNET-POSTROUTING',
  dnat: 'OVSNET-DNAT',
  forward: 'OVSNET-FORWARD',
  /** Drops only, jumped to from the top of DOCKER-USER: what must be seen before Docker's accepts. */
  isolation: 'OVSNET-ISOLATION',
  /**
   * Drops only, in the mangle table, jumped to from the top of its FORWARD chain: what may enter
   * an ovsnet network. mangle's FORWARD is evaluated before filter's and Docker never writes it,
   * so no accept of Docker's comes first, whatever Docker does with filter's FORWARD (Docker
   * 20.10 inserts its bridges' accepts at the top of ip6tables' FORWARD, above DOCKER-USER).
   */
  inbound: 'OVSNET-INBOUND',
} as const;

/**
 * Docker's second isolation chain (its bridge driver, Docker 20.10 to 28): one `-o BRIDGE -j DROP`
 * per bridge network, kept current by Docker. Traffic a container of an ovsnet network starts
 * goes through it, so it never reaches a Docker bridge network, as Docker's bridge networks
 * never reach each other. Created empty if Docker has not made it (yet, or `--iptables=false`):
 * Docker then uses it as it finds it. ovsnet never removes it.
 */
export const DOCKER_ISOLATION = 'DOCKER-ISOLATION-STAGE-2';

/**
 * Docker's chain for its users' rules: FORWARD jumps to it first (Docker puts that jump at the
 * top on every start and network creation) and Docker never flushes it. ovsnet's isolation chain
 * is jumped to from its top, so ovsnet's drops are seen before Docker's accepts for its bridges
 * (`-i BR ! -o BR -j ACCEPT`) whichever of the two starts first and after either restarts; what
 * they let through returns to the operator's rules there. Created (with FORWARD's jump to it)
 * where Docker has not made it yet: Docker then uses it as it finds it. ovsnet never removes it.
 */
export const DOCKER_USER = 'DOCKER-USER';

/** ovsnet's chains, in the order they are created. */
export const OWN_CHAINS: readonly (readonly [Table, string])[] = [
  ['nat', CHAINS.masquerade],
  ['nat', CHAINS.dnat],
  ['filter', CHAINS.forward],
  ['filter', CHAINS.isolation],
  ['mangle', CHAINS.inbound],
];

/**
 * Jumps into ovsnet's chains from the built-in ones. The host's own connections are DNATed
 * except to 127.0.0.0/8 (Docker's OUTPUT rule): those reach the socket ovsnet holds on the port
 * (host-ports.ts), so a published port never captures a service the host reaches on loopback.
 */
export const JUMPS: readonly Rule[] = [
  { table: 'nat', chain: 'POSTROUTING', spec: ['-j', CHAINS.masquerade], insert: false },
  { table: 'nat', chain: 'PREROUTING', spec: ['-m', 'addrtype', '--dst-type', 'LOCAL', '-j', CHAINS.dnat], insert: false },
  {
    table: 'nat',
    chain: 'OUTPUT',
    spec: ['!', '-d', '127.0.0.0/8', '-m', 'addrtype', '--dst-type', 'LOCAL', '-j', CHAINS.dnat],
    insert: false,
  },
  // The accepts: before FORWARD's policy, DROP with Docker (the drops are seen first, FIRST_JUMPS).
  { table: 'filter', chain: 'FORWARD', spec: ['-j', CHAINS.forward], insert: true },
];

/**
 * Kept first in their chain (re-asserted whenever a network's rules are applied: creation,
 * reconcile, start): FORWARD into DOCKER-USER (as Docker keeps it), and DOCKER-USER into
 * ovsnet's isolation chain, above Docker's own FORWARD rules and anything else; mangle's FORWARD
 * into ovsnet's inbound chain.
 */
export const FIRST_JUMPS: readonly Rule[] = [
  { table: 'filter', chain: 'FORWARD', spec: ['-j', DOCKER_USER], insert: true },
  { table: 'filter', chain: DOCKER_USER, spec: ['-j', CHAINS.isolation], insert: true },
  { table: 'mangle', chain: 'FORWARD', spec: ['-j', CHAINS.inbound], insert: true },
];

/** JUMPS in ip6tables (NAT66 and published ports on IPv6 host addresses): the host's own connections DNATed except to ::1. */
export const JUMPS_V6: readonly Rule[] = JUMPS.map((j) =>
  j.chain === 'OUTPUT' ? { ...j, spec: j.spec.map((w) => (w === '127.0.0.0/8' ? '::1/128' : w)) } : j,
);

/** Jumps of earlier versions, removed where found: the OUTPUT jump that captured loopback. */
export const OLD_JUMPS: readonly Rule[] = [
  { table: 'nat', chain: 'OUTPUT', spec: ['-m', 'addrtype', '--dst-type', 'LOCAL', '-j', CHAINS.dnat] },
];

const comment = (id: string) => ['-m', 'comment', '--comment', `ovsnet:${id.slice(0, 12)}`];

/**
 * Per network: masquerade on the way out (IPv4, and IPv6 as NAT66, as Docker's bridge driver
 * does with ip6tables). Isolation, in ovsnet's isolation chain (seen
 * before Docker's accepts): new connections out (except to a published port) through Docker's
 * isolation chain, so none reaches a Docker bridge network; in ovsnet's inbound chain (mangle,
 * before any filter rule), only replies, published ports (DNATed) and the network's own traffic
 * enter, as with Docker's bridge driver: nothing else routed to the host (a container of another
 * Docker network, a machine routing through the host) opens a connection; what passes returns. Then the accepts, in ovsnet's forwarding chain: isolation from
 * every other ovsnet network (a drop towards any other gateway port, inserted so that it precedes
 * every network's accepts; the hairpin back into the same network inserted before it); out
 * accepted; in, replies and published ports. With `icc` false (enable_icc=false) the network's
 * own traffic does not enter it again: a container routed to another of its network through the
 * gateway is dropped in the inbound chain, as Docker's bridge driver drops `-i BRIDGE -o BRIDGE`
 * (network/icc-flows.ts keeps them apart at layer 2); a published port reached through the host
 * (DNAT) and replies still pass. `ingress` (-o ovsnet.ingress, model/policy-options.ts): the
 * sources (of the subnet's family) whose connections enter too, in both chains; the network's
 * OpenFlow rules (network/egress-flows.ts) then hold them to the same sources.
 */
export function networkRules(
  networkId: string,
  subnet: string,
  gatewayPort: string,
  masquerade = true,
  icc = true,
  ingress: readonly NetRule[] = [],
): Rule[] {
  const c = comment(networkId);
  const fresh = ['-m', 'conntrack', '!', '--ctstate', 'RELATED,ESTABLISHED,DNAT'];
  const replies = ['-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED'];
  const published = ['-m', 'conntrack', '--ctstate', 'DNAT'];
  const { isolation: iso, forward: fwd, inbound: inb } = CHAINS;
  const allowed = ingressSpecs(subnet, ingress);
  const to = (chain: string, spec: string[], target: string, insert = false): Rule => ({
    table: 'filter',
    chain,
    spec: [...spec, ...c, '-j', target],
    ...(insert ? { insert } : {}),
  });
  return [
    ...(!masquerade
      ? []
      : [{ table: 'nat' as const, chain: CHAINS.masquerade, spec: ['-s', subnet, '!', '-o', gatewayPort, ...c, '-j', 'MASQUERADE'] }]),
    to(iso, ['-i', gatewayPort, ...fresh], DOCKER_ISOLATION),
    ...inbound(c, gatewayPort, inb, 'mangle', icc, allowed),
    to(fwd, ['-i', gatewayPort, '-o', `${GATEWAY_PREFIX}+`], 'DROP', true),
    to(fwd, ['-i', gatewayPort, '-o', gatewayPort], 'ACCEPT', true),
    to(fwd, ['-i', gatewayPort], 'ACCEPT'),
    to(fwd, ['-o', gatewayPort, ...replies], 'ACCEPT'),
    to(fwd, ['-o', gatewayPort, ...published], 'ACCEPT'),
    ...allowed.map((a) => to(fwd, ['-o', gatewayPort, ...a], 'ACCEPT')),
    to(fwd, ['-o', gatewayPort], 'DROP'),
  ];
}

/** The match of each ingress rule of the subnet's family: its source (none for /0), and its port. */
function ingressSpecs(subnet: string, ingress: readonly NetRule[]): string[][] {
  const family = subnet.includes(':') ? 6 : 4;
  return ingress
    .filter((r) => familyOfRule(r) === family)
    .map((r) => [
      ...(r.cidr.endsWith('/0') ? [] : ['-s', r.cidr]),
      ...(r.port === undefined ? [] : ['-p', r.port.proto, '--dport', String(r.port.number)]),
    ]);
}

/**
 * What enters a network: replies, published ports, (unless `icc` is false) its own traffic and
 * `allowed` sources return; the rest is dropped.
 */
function inbound(
  c: readonly string[],
  gatewayPort: string,
  chain: string,
  table: Table,
  icc = true,
  allowed: readonly string[][] = [],
): Rule[] {
  const rule = (spec: string[], target: string): Rule => ({ table, chain, spec: [...spec, ...c, '-j', target] });
  return [
    rule(['-o', gatewayPort, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED'], 'RETURN'),
    rule(['-o', gatewayPort, '-m', 'conntrack', '--ctstate', 'DNAT'], 'RETURN'),
    ...(icc ? [rule(['-i', gatewayPort, '-o', gatewayPort], 'RETURN')] : []),
    ...allowed.map((a) => rule(['-o', gatewayPort, ...a], 'RETURN')),
    rule(['-o', gatewayPort], 'DROP'),
  ];
}

/**
 * A network's rules of earlier versions, removed where found: accepting every packet in, the
 * jump into Docker's isolation chain from the forwarding chain (now in the isolation chain), and
 * the inbound drops in the isolation chain (now in the mangle table's inbound chain).
 */
export function oldNetworkRules(networkId: string, gatewayPort: string): Rule[] {
  const c = comment(networkId);
  return [
    ...inbound(c, gatewayPort, CHAINS.isolation, 'filter'),
    { table: 'filter', chain: CHAINS.forward, spec: ['-o', gatewayPort, ...c, '-j', 'ACCEPT'] },
    {
      table: 'filter',
      chain: CHAINS.forward,
      spec: ['-i', gatewayPort, '-m', 'conntrack', '!', '--ctstate', 'RELATED,ESTABLISHED,DNAT', ...c, '-j', DOCKER_ISOLATION],
    },
  ];
}

/** A host address that stands for every address of its family ('' is IPv4's, as Docker's bridge driver has it). */
export function isWildcard(hostIp: string): boolean {
  return hostIp === '' || hostIp === '0.0.0.0' || hostIp === '::';
}

/**
 * Per published port: DNAT from the host's port, on one host address or all of the address's
 * family (single ports: host-ports.ts chose them), to `address` (an IPv6 one in brackets).
 */
export function portRules(endpointId: string, address: string, ports: readonly PortBinding[]): Rule[] {
  const to = address.includes(':') ? `[${address}]` : address;
  return ports.map((p) => ({
    table: 'nat' as const,
    chain: CHAINS.dnat,
    spec: [
      ...(isWildcard(p.hostIp) ? [] : ['-d', p.hostIp]),
      '-p',
      p.proto,
      '--dport',
      p.hostPortEnd > p.hostPort ? `${p.hostPort}:${p.hostPortEnd}` : String(p.hostPort),
      ...comment(endpointId),
      '-j',
      'DNAT',
      '--to-destination',
      `${to}:${p.containerPort}`,
    ],
  }));
}

/**
 * iptables-restore input (used with --noflush) for one table: first deletes the lines of
 * `iptables-save` output that carry `tag`'s comment in `chain`, then appends `add`. One batch,
 * applied atomically: the endpoint's old rules never linger next to its new ones.
 */
export function restoreInput(table: Table, saved: string, chain: string, tag: string, add: readonly Rule[]): string {
  const mark = `ovsnet:${tag.slice(0, 12)}`;
  const drop = saved
    .split('\n')
    .filter((l) => l.startsWith(`-A ${chain} `) && l.includes(mark))
    .map((l) => l.replace(/^-A /, '-D '));
  const lines = [...drop, ...add.map((r) => ['-A', r.chain, ...r.spec].join(' '))];
  return lines.length === 0 ? '' : `*${table}\n${lines.join('\n')}\nCOMMIT\n`;
}

/** iptables arguments: -C checks for the rule, -A/-I 1 adds it, -D deletes it (-w: wait for the lock). */
export function ruleArgs(op: 'check' | 'add' | 'delete', rule: Rule): string[] {
  const base = ['-w', '-t', rule.table];
  if (op === 'check') return [...base, '-C', rule.chain, ...rule.spec];
  if (op === 'delete') return [...base, '-D', rule.chain, ...rule.spec];
  return rule.insert === true ? [...base, '-I', rule.chain, '1', ...rule.spec] : [...base, '-A', rule.chain, ...rule.spec];
}

/** iptables arguments creating one of ovsnet's chains. */
export function newChainArgs(table: Table, chain: string): string[] {
  return ['-w', '-t', table, '-N', chain];
}
