/**
 * iptables rules for the way out (masquerade), forwarding through the gateway port, and -p
 * port publishing (DNAT), in ovsnet's own chains so that they are found, listed and removed
 * without touching anyone else's. Every add checks first (-C) and every delete treats a
 * missing rule as done: both are idempotent.
 */
import { OvsnetError } from '../errors.js';
import { exec } from './exec.js';
import { GATEWAY_PREFIX, type PortBinding } from './records/records.js';

type Table = 'nat' | 'filter';
interface Rule {
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

/** Jumps into ovsnet's chains from the built-in ones. */
const JUMPS: readonly Rule[] = [
  { table: 'nat', chain: 'POSTROUTING', spec: ['-j', CHAINS.masquerade], insert: false },
  { table: 'nat', chain: 'PREROUTING', spec: ['-m', 'addrtype', '--dst-type', 'LOCAL', '-j', CHAINS.dnat], insert: false },
  { table: 'nat', chain: 'OUTPUT', spec: ['-m', 'addrtype', '--dst-type', 'LOCAL', '-j', CHAINS.dnat], insert: false },
  // Before Docker's own FORWARD rules, whose policy is DROP.
  { table: 'filter', chain: 'FORWARD', spec: ['-j', CHAINS.forward], insert: true },
];

export class Nat {
  private chainsReady: Promise<void> | undefined;

  constructor(private readonly iptables = 'iptables') {}

  /** Masquerading for the subnet and forwarding through the gateway port. */
  async addNetwork(networkId: string, subnet: string, gatewayPort: string): Promise<void> {
    await this.ensureChains();
    for (const r of networkRules(networkId, subnet, gatewayPort)) await this.add(r);
  }


  async removeNetwork(networkId: string, subnet: string, gatewayPort: string): Promise<void> {
    for (const r of networkRules(networkId, subnet, gatewayPort)) await this.remove(r);
  }

  /** DNAT from the host's ports to the container's. */
  async addPorts(endpointId: string, address: string, ports: readonly PortBinding[]): Promise<void> {
    await this.ensureChains();
    const done: Rule[] = [];
    try {
      for (const r of portRules(endpointId, address, ports)) {
        await this.add(r);
        done.push(r);
      }
    } catch (err) {
      for (const r of done.reverse()) await this.remove(r).catch(() => undefined);
      throw err;
    }
  }

  async removePorts(endpointId: string, address: string, ports: readonly PortBinding[]): Promise<void> {
    for (const r of portRules(endpointId, address, ports)) await this.remove(r);
  }

  private ensureChains(): Promise<void> {
    this.chainsReady ??= (async () => {
      for (const [table, chain] of [['nat', CHAINS.masquerade], ['nat', CHAINS.dnat], ['filter', CHAINS.forward]] as const) {
        const r = await exec(this.iptables, ['-w', '-t', table, '-N', chain]);
        if (r.code !== 0 && !/already exists/i.test(r.stderr)) throw natError(`create chain ${chain}`, r.stderr);
      }
      for (const j of JUMPS) await this.add(j);
    })().catch((err: unknown) => {
      this.chainsReady = undefined;
      throw err;
    });
    return this.chainsReady;
  }

  private async add(rule: Rule): Promise<void> {
    const base = ['-w', '-t', rule.table];
    if ((await exec(this.iptables, [...base, '-C', rule.chain, ...rule.spec])).code === 0) return;
    const insert = rule.insert === true;
    const r = await exec(this.iptables, [...base, insert ? '-I' : '-A', rule.chain, ...(insert ? ['1'] : []), ...rule.spec]);
    if (r.code !== 0) throw natError(`add ${rule.table} rule ${rule.spec.join(' ')}`, r.stderr);
  }

  private async remove(rule: Rule): Promise<void> {
    const base = ['-w', '-t', rule.table];
    if ((await exec(this.iptables, [...base, '-C', rule.chain, ...rule.spec])).code !== 0) return;
    const r = await exec(this.iptables, [...base, '-D', rule.chain, ...rule.spec]);
    if (r.code !== 0) throw natError(`remove ${rule.table} rule ${rule.spec.join(' ')}`, r.stderr);
  }
}

function natError(what: string, stderr: string): OvsnetError {
  return new OvsnetError('NAT_FAILED', `cannot ${what}: ${stderr.trim()}`);
}

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

export function portRules(endpointId: string, address: string, ports: readonly PortBinding[]): Rule[] {
  return ports.map((p) => {
    const range = p.hostPortEnd > p.hostPort ? `${p.hostPort}:${p.hostPortEnd}` : String(p.hostPort);
    return {
      table: 'nat' as const,
      chain: CHAINS.dnat,
      spec: [
        ...(p.hostIp === '' || p.hostIp === '0.0.0.0' ? [] : ['-d', p.hostIp]),
        '-p', p.proto, '--dport', range, ...comment(endpointId),
        '-j', 'DNAT', '--to-destination', `${address}:${p.containerPort}`,
      ],
    };
  });
}
