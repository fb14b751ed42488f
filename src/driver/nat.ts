/**
 * Applies the iptables rules of nat-rules.ts: the way out (masquerade), forwarding through the
 * gateway port, and -p port publishing (DNAT), in ovsnet's own chains so that they are found
 * and removed without touching anyone else's. Every add checks first (-C) and every delete
 * treats a missing rule as done: both are idempotent.
 */
import { OvsnetError } from '../errors.js';
import { exec, type ExecResult } from './exec.js';
import { JUMPS, OWN_CHAINS, networkRules, newChainArgs, portRules, ruleArgs, type Rule } from './nat-rules.js';
import type { PortBinding } from './records/records.js';

export class Nat {
  private chainsReady: Promise<void> | undefined;

  constructor(
    private readonly iptables = 'iptables',
    private readonly run: (cmd: string, args: readonly string[]) => Promise<ExecResult> = exec,
  ) {}

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
      for (const [table, chain] of OWN_CHAINS) {
        const r = await this.run(this.iptables, newChainArgs(table, chain));
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
    if ((await this.run(this.iptables, ruleArgs('check', rule))).code === 0) return;
    const r = await this.run(this.iptables, ruleArgs('add', rule));
    if (r.code !== 0) throw natError(`add ${rule.table} rule ${rule.spec.join(' ')}`, r.stderr);
  }

  private async remove(rule: Rule): Promise<void> {
    if ((await this.run(this.iptables, ruleArgs('check', rule))).code !== 0) return;
    const r = await this.run(this.iptables, ruleArgs('delete', rule));
    if (r.code !== 0) throw natError(`remove ${rule.table} rule ${rule.spec.join(' ')}`, r.stderr);
  }
}

function natError(what: string, stderr: string): OvsnetError {
  return new OvsnetError('NAT_FAILED', `cannot ${what}: ${stderr.trim()}`);
}
