/**
 * Applies the iptables rules of nat-rules.ts, with the iptables flavour Docker uses
 * (iptables-flavour.ts): the way out (masquerade), forwarding through the gateway port (IPv4 and
 * IPv6), and -p port publishing (DNAT), in ovsnet's own chains so that they are found and
 * removed without touching anyone else's. The isolation chain is jumped to first from Docker's
 * DOCKER-USER, and the inbound chain first from mangle's FORWARD, kept first on every network add
 * (creation, reconcile, start). Network rules:
 * every add checks first (-C) and every delete treats a missing rule as done. An endpoint's port rules: one iptables-save and one
 * iptables-restore --noflush batch, whatever their number (its old rules, found by their
 * comment, replaced in the same batch). All idempotent.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { OvsnetError } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import { exec, type Run } from '../../lib/exec.js';
import { detectFlavour, type Flavour } from './iptables-flavour.js';
import {
  CHAINS,
  DOCKER_ISOLATION,
  DOCKER_USER,
  FIRST_JUMPS,
  JUMPS,
  JUMPS_V6,
  OLD_JUMPS,
  OWN_CHAINS,
  networkRules,
  newChainArgs,
  oldNetworkRules,
  portRules,
  restoreInput,
  ruleArgs,
  type Rule,
} from './nat-rules.js';
import type { PortBinding } from '../model/records.js';
import type { NetRule } from '../model/policy-options.js';

type Family = 4 | 6;

/** The host's IPv6 forwarding switch (/proc/sys/net/ipv6/conf/all/forwarding), and where to say it was turned on. */
export interface Ipv6Forwarding {
  readonly file: string;
  readonly log: Logger;
}

export const IPV6_FORWARDING = '/proc/sys/net/ipv6/conf/all/forwarding';
const FAMILIES: readonly Family[] = [4, 6];

export class Nat {
  private flavourReady: Promise<Flavour> | undefined;
  private readonly chainsReady = new Map<Family, Promise<void>>();

  /**
   * `chosen`: a fixed flavour (tests); else the one Docker uses, found on first use.
   * `forwarding`: the host's IPv6 forwarding switch, turned on by the first IPv6 network as
   * Docker's bridge driver does (absent: left alone, as in tests).
   */
  constructor(
    private readonly run: Run = exec,
    private readonly chosen?: Flavour,
    private readonly forwarding?: Ipv6Forwarding,
  ) {}

  /**
   * Masquerading for the subnet (IPv4, or IPv6: NAT66) and forwarding through the gateway port;
   * with `icc` false, none between the network's containers through it (enable_icc=false);
   * `ingress`'s sources of the subnet's family let in (-o ovsnet.ingress).
   */
  async addNetwork(
    networkId: string,
    subnet: string,
    gatewayPort: string,
    masquerade = true,
    icc = true,
    ingress: readonly NetRule[] = [],
  ): Promise<void> {
    const family = familyOf(subnet);
    await this.ensureChains(family);
    for (const j of FIRST_JUMPS) await this.first(family, j);
    // The new rules before the old ones go: no moment without isolation.
    for (const r of networkRules(networkId, subnet, gatewayPort, masquerade, icc, ingress)) await this.add(family, r);
    for (const r of oldNetworkRules(networkId, gatewayPort)) await this.remove(family, r);
    if (family === 6) await this.forwardIpv6();
  }

  /** IPv6 routed through the host at all: forwarding on (a no-op once it is). */
  private async forwardIpv6(): Promise<void> {
    const f = this.forwarding;
    if (f === undefined || (await readFile(f.file, 'utf8')).trim() === '1') return;
    await writeFile(f.file, '1\n');
    f.log.warn(
      `IPv6 forwarding was off: turned on (${f.file}), as Docker's bridge driver does for IPv6 networks; an interface with accept_ra=1 no longer takes router advertisements: give it accept_ra=2 if this host's IPv6 default route comes from them`,
    );
  }

  async removeNetwork(networkId: string, subnet: string, gatewayPort: string, ingress: readonly NetRule[] = []): Promise<void> {
    const family = familyOf(subnet);
    for (const r of [...networkRules(networkId, subnet, gatewayPort, true, true, ingress), ...oldNetworkRules(networkId, gatewayPort)])
      await this.remove(family, r);
  }

  /**
   * DNAT from the host's ports to the container's `address` (iptables or ip6tables by its
   * family): replaces the endpoint's port rules of that family in one batch.
   */
  async addPorts(endpointId: string, address: string, ports: readonly PortBinding[]): Promise<void> {
    const family = familyOf(address);
    await this.ensureChains(family);
    await this.restorePorts(family, endpointId, portRules(endpointId, address, ports));
  }

  /** Removes the endpoint's port rules of both families (found by their comment). Idempotent. */
  async removePorts(endpointId: string): Promise<void> {
    for (const family of FAMILIES) await this.restorePorts(family, endpointId, []);
  }

  /**
   * Removes the port rules of endpoints whose 12-character ID prefix is not in `keep`: those of
   * endpoints removed while ovsnet was down. Answers the prefixes removed. Idempotent.
   */
  async prunePorts(keep: ReadonlySet<string>): Promise<string[]> {
    const stale = new Set<string>();
    for (const family of FAMILIES) {
      const saved = await this.saveNat(family, true);
      for (const l of saved.split('\n')) {
        const tag = l.startsWith(`-A ${CHAINS.dnat} `) ? (/ovsnet:([0-9a-f]{12})/.exec(l)?.[1] ?? '') : '';
        if (tag !== '' && !keep.has(tag)) stale.add(tag);
      }
    }
    for (const tag of stale) await this.removePorts(tag);
    return [...stale];
  }

  /**
   * The nat table of a family. Removing (no rule to add): an IPv6 table that cannot be read holds
   * none of ovsnet's rules (a host booted with ipv6.disable=1, or without ip6tables' nat), so it
   * reads as empty rather than failing every Leave of an endpoint with IPv4 ports.
   */
  private async saveNat(family: Family, removing = false): Promise<string> {
    const f = await this.flavour();
    const saved = await this.run(f.save[family], ['-t', 'nat']);
    if (saved.code !== 0 && removing && family === 6) return '';
    if (saved.code !== 0) throw natError(`read the nat table (${f.save[family]})`, saved.stderr);
    return saved.stdout;
  }

  private async restorePorts(family: Family, endpointId: string, add: readonly Rule[]): Promise<void> {
    const f = await this.flavour();
    const input = restoreInput('nat', await this.saveNat(family, add.length === 0), CHAINS.dnat, endpointId, add);
    if (input === '') return;
    const r = await this.run(f.restore[family], ['-w', '--noflush'], input);
    if (r.code !== 0) throw natError(`apply the port rules of endpoint ${endpointId.slice(0, 12)} (${f.restore[family]})`, r.stderr);
  }

  /** The flavour in use (found once). */
  flavour(): Promise<Flavour> {
    if (this.chosen !== undefined) return Promise.resolve(this.chosen);
    this.flavourReady ??= detectFlavour(this.run);
    return this.flavourReady;
  }

  private ensureChains(family: Family): Promise<void> {
    let ready = this.chainsReady.get(family);
    if (ready === undefined) {
      ready = (async () => {
        const f = await this.flavour();
        const cmd = family === 4 ? f.iptables : f.ip6tables;
        const chains = [...OWN_CHAINS, ['filter', DOCKER_ISOLATION] as const, ['filter', DOCKER_USER] as const];
        for (const [table, chain] of chains) {
          const r = await this.run(cmd, newChainArgs(table, chain));
          if (r.code !== 0 && !/already exists/i.test(r.stderr)) throw natError(`create chain ${chain} (${cmd})`, r.stderr);
        }
        for (const j of family === 4 ? OLD_JUMPS : []) await this.remove(family, j);
        for (const j of family === 4 ? JUMPS : JUMPS_V6) await this.add(family, j);
      })().catch((err: unknown) => {
        this.chainsReady.delete(family);
        throw err;
      });
      this.chainsReady.set(family, ready);
    }
    return ready;
  }

  private async add(family: Family, rule: Rule): Promise<void> {
    const cmd = await this.command(family);
    if ((await this.run(cmd, ruleArgs('check', rule))).code === 0) return;
    const r = await this.run(cmd, ruleArgs('add', rule));
    if (r.code !== 0) throw natError(`add ${rule.table} rule ${rule.spec.join(' ')} (${cmd})`, r.stderr);
  }

  /**
   * The rule first in its chain: left alone if it is, else inserted at the top and then every
   * other copy removed by its number (no moment without it).
   */
  private async first(family: Family, rule: Rule): Promise<void> {
    const cmd = await this.command(family);
    const line = ['-A', rule.chain, ...rule.spec].join(' ');
    const listed = async (): Promise<string[]> => {
      const r = await this.run(cmd, ['-w', '-t', rule.table, '-S', rule.chain]);
      if (r.code !== 0) throw natError(`list chain ${rule.chain} (${cmd})`, r.stderr);
      return r.stdout
        .split('\n')
        .filter((l) => l.startsWith(`-A ${rule.chain} `))
        .map((l) => l.trim());
    };
    if ((await listed())[0] === line) return;
    const added = await this.run(cmd, ruleArgs('add', { ...rule, insert: true }));
    if (added.code !== 0) throw natError(`add ${rule.table} rule ${rule.spec.join(' ')} first in ${rule.chain} (${cmd})`, added.stderr);
    const rules = await listed();
    for (let n = rules.length; n > 1; n--) {
      if (rules[n - 1] !== line) continue;
      const r = await this.run(cmd, ['-w', '-t', rule.table, '-D', rule.chain, String(n)]);
      if (r.code !== 0) throw natError(`remove a second ${rule.spec.join(' ')} from ${rule.chain} (${cmd})`, r.stderr);
    }
  }

  private async remove(family: Family, rule: Rule): Promise<void> {
    const cmd = await this.command(family);
    if ((await this.run(cmd, ruleArgs('check', rule))).code !== 0) return;
    const r = await this.run(cmd, ruleArgs('delete', rule));
    if (r.code !== 0) throw natError(`remove ${rule.table} rule ${rule.spec.join(' ')} (${cmd})`, r.stderr);
  }

  private async command(family: Family): Promise<string> {
    const f = await this.flavour();
    return family === 4 ? f.iptables : f.ip6tables;
  }
}

function familyOf(subnet: string): Family {
  return subnet.includes(':') ? 6 : 4;
}

function natError(what: string, stderr: string): OvsnetError {
  return new OvsnetError('NAT_FAILED', `cannot ${what}: ${stderr.trim()}`);
}
