/**
 * The iptables rules ovsnet wants, as data (nat.ts applies them): masquerading on the way out,
 * forwarding through a network's gateway port and isolation from other ovsnet networks, DNAT
 * for -p port publishing, all in ovsnet's own chains, and the argument lists that check, add
 * and delete one rule. Pure: tested without iptables (test/driver/nat.test.ts).
 */
import { GATEWAY_PREFIX, type PortBinding } from './records/records.js';

export type Table = 'nat' | 'filter';

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
} as const;

/** ovsnet's chains, in the order they are created. */
export const OWN_CHAINS: readonly (readonly [Table, string])[] = [
  ['nat', CHAINS.masquerade],
  ['nat', CHAINS.dnat],
  ['filter', CHAINS.forward],
];

/** Jumps into ovsnet's chains from the built-in ones. */
export const JUMPS: readonly Rule[] = [
  { table: 'nat', chain: 'POSTROUTING', spec: ['-j', CHAINS.masquerade], insert: false },
  { table: 'nat', chain: 'PREROUTING', spec: ['-m', 'addrtype', '--dst-type', 'LOCAL', '-j', CHAINS.dnat], insert: false },
  { table: 'nat', chain: 'OUTPUT', spec: ['-m', 'addrtype', '--dst-type', 'LOCAL', '-j', CHAINS.dnat], insert: false },
  // Before Docker's own FORWARD rules, whose policy is DROP.
  { table: 'filter', chain: 'FORWARD', spec: ['-j', CHAINS.forward], insert: true },
];

const comment = (id: string) => ['-m', 'comment', '--comment', `ovsnet:${id.slice(0, 12)}`];

/**
 * Per network: masquerade on the way out; isolation from every other ovsnet network (a drop
 * towards any other gateway port, inserted so that it precedes every network's accepts; the
 * hairpin back into the same network inserted before it); then accept in and out.
 */
export function networkRules(networkId: string, subnet: string, gatewayPort: string): Rule[] {
  const c = comment(networkId);
  return [
    { table: 'nat', chain: CHAINS.masquerade, spec: ['-s', subnet, '!', '-o', gatewayPort, ...c, '-j', 'MASQUERADE'] },
    { table: 'filter', chain: CHAINS.forward, spec: ['-i', gatewayPort, '-o', `${GATEWAY_PREFIX}+`, ...c, '-j', 'DROP'], insert: true },
    { table: 'filter', chain: CHAINS.forward, spec: ['-i', gatewayPort, '-o', gatewayPort, ...c, '-j', 'ACCEPT'], insert: true },
    { table: 'filter', chain: CHAINS.forward, spec: ['-i', gatewayPort, ...c, '-j', 'ACCEPT'] },
    { table: 'filter', chain: CHAINS.forward, spec: ['-o', gatewayPort, ...c, '-j', 'ACCEPT'] },
  ];
}

/** Per published port (or range): DNAT from the host's port, on one host address or all. */
export function portRules(endpointId: string, address: string, ports: readonly PortBinding[]): Rule[] {
  return ports.map((p) => {
    const range = p.hostPortEnd > p.hostPort ? `${p.hostPort}:${p.hostPortEnd}` : String(p.hostPort);
    return {
      table: 'nat' as const,
      chain: CHAINS.dnat,
      spec: [
        ...(p.hostIp === '' || p.hostIp === '0.0.0.0' ? [] : ['-d', p.hostIp]),
        '-p',
        p.proto,
        '--dport',
        range,
        ...comment(endpointId),
        '-j',
        'DNAT',
        '--to-destination',
        `${address}:${p.containerPort}`,
      ],
    };
  });
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
