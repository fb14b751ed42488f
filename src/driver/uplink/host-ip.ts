/**
 * The host's own addresses and routes on an interface, read and moved with iproute2 (`ip -j`):
 * what the uplink hands over to the host port when it joins the bridge, and takes back when it
 * leaves. Only at start and stop, never on a request path. Link-local addresses and the routes
 * the kernel makes for an address (proto kernel) stay: they follow the address by themselves.
 */
import { OvsnetError } from '../../lib/errors.js';
import { exec, type ExecResult, type Run } from '../../lib/exec.js';

export interface HostAddress {
  readonly cidr: string;
  readonly family: 4 | 6;
  /** Given by DHCP or router advertisement (a lifetime): its client renews it on the interface it runs on. */
  readonly dynamic: boolean;
}

/** A route through the interface, as `ip -j route` shows it. */
export interface HostRoute {
  readonly family: 4 | 6;
  readonly dst: string;
  readonly gateway?: string;
  readonly protocol?: string;
  readonly scope?: string;
  readonly metric?: number;
  readonly prefsrc?: string;
  readonly table?: string;
  readonly flags?: readonly string[];
  readonly nexthops?: unknown;
}

export interface LinkInfo {
  readonly name: string;
  readonly mtu: number;
  readonly mac: string;
  readonly master?: string;
  /** The kind of a virtual link (`ip -d`'s info_kind: bridge, bond, team, vlan, veth...); absent for a physical one. */
  readonly kind?: string;
  readonly loopback: boolean;
  readonly up: boolean;
}

export class HostIp {
  constructor(private readonly run: Run = exec) {}

  /** The link, or undefined when the host has none of that name. */
  async link(name: string): Promise<LinkInfo | undefined> {
    const r = await this.run('ip', ['-j', '-d', 'link', 'show', 'dev', name]);
    if (r.code !== 0) return undefined;
    type Link = {
      ifname: string;
      mtu: number;
      address?: string;
      master?: string;
      flags?: string[];
      link_type?: string;
      linkinfo?: { info_kind?: string };
    };
    const l = (JSON.parse(r.stdout) as Link[])[0];
    if (l === undefined) return undefined;
    return {
      name: l.ifname,
      mtu: l.mtu,
      mac: l.address ?? '',
      ...(l.master === undefined ? {} : { master: l.master }),
      ...(l.linkinfo?.info_kind === undefined ? {} : { kind: l.linkinfo.info_kind }),
      loopback: l.link_type === 'loopback',
      up: l.flags?.includes('UP') ?? false,
    };
  }

  /** Every link's name (to say what would be valid). */
  async linkNames(): Promise<string[]> {
    const r = await this.ip(['-j', 'link', 'show']);
    return (JSON.parse(r.stdout) as { ifname: string }[]).map((l) => l.ifname);
  }

  /** The interface's global addresses (link-local ones belong to the interface). */
  async addresses(dev: string): Promise<HostAddress[]> {
    const r = await this.ip(['-j', 'addr', 'show', 'dev', dev]);
    type Info = { family: string; local: string; prefixlen: number; scope: string; dynamic?: boolean; valid_life_time?: number };
    const infos = (JSON.parse(r.stdout) as { addr_info?: Info[] }[])[0]?.addr_info ?? [];
    return infos
      .filter((a) => a.scope === 'global')
      .map((a) => ({
        cidr: `${a.local}/${a.prefixlen}`,
        family: a.family === 'inet6' ? 6 : 4,
        dynamic: a.dynamic === true || (a.valid_life_time !== undefined && a.valid_life_time !== 4294967295),
      }));
  }

  /** Routes through the interface that the kernel did not make for an address, in any table but local. */
  async routes(dev: string): Promise<HostRoute[]> {
    const out: HostRoute[] = [];
    for (const family of [4, 6] as const) {
      const r = await this.ip([`-${family}`, '-j', 'route', 'show', 'table', 'all', 'dev', dev]);
      for (const route of JSON.parse(r.stdout) as (Omit<HostRoute, 'family'> & { type?: string })[]) {
        if (route.protocol === 'kernel' || route.table === 'local' || (route.type !== undefined && route.type !== 'unicast')) continue;
        if (family === 6 && route.dst.startsWith('fe80:')) continue;
        out.push({ ...route, family });
      }
    }
    return out;
  }

  async setUp(dev: string, mtu?: number): Promise<void> {
    await this.ip(['link', 'set', 'dev', dev, ...(mtu === undefined ? [] : ['mtu', String(mtu)]), 'up']);
  }

  /**
   * Moves addresses and routes from `from` to `to`: the addresses are added to `to` first, the
   * routes replaced to go through it, then the addresses leave `from`; the host's traffic
   * changes interface in a moment. A failure puts back what was moved.
   */
  async move(from: string, to: string, addresses: readonly HostAddress[], routes: readonly HostRoute[]): Promise<void> {
    const added: HostAddress[] = [];
    const rerouted: HostRoute[] = [];
    try {
      for (const a of addresses) {
        await this.ip([`-${a.family}`, 'addr', 'replace', a.cidr, 'dev', to]);
        added.push(a);
      }
      for (const r of routes) {
        await this.ip([`-${r.family}`, 'route', 'replace', ...routeArgs(r, to)]);
        rerouted.push(r);
      }
      for (const a of addresses) await this.ip([`-${a.family}`, 'addr', 'del', a.cidr, 'dev', from]);
    } catch (err) {
      for (const a of addresses) await this.run('ip', [`-${a.family}`, 'addr', 'replace', a.cidr, 'dev', from]);
      for (const r of rerouted) await this.run('ip', [`-${r.family}`, 'route', 'replace', ...routeArgs(r, from)]);
      for (const a of added) await this.run('ip', [`-${a.family}`, 'addr', 'del', a.cidr, 'dev', to]);
      throw err;
    }
  }

  private async ip(args: readonly string[]): Promise<ExecResult> {
    const r = await this.run('ip', args);
    if (r.code !== 0) {
      throw new OvsnetError('LINK_FAILED', `ip ${args.join(' ')} failed (${r.code}): ${r.stderr.trim()}; is iproute2 installed?`);
    }
    return r;
  }
}

/** `ip -F route replace` arguments recreating `r` through `dev`. Pure. */
export function routeArgs(r: HostRoute, dev: string): string[] {
  return [
    r.dst,
    ...(r.gateway === undefined ? [] : ['via', r.gateway]),
    'dev',
    dev,
    ...(r.protocol === undefined ? [] : ['proto', r.protocol]),
    ...(r.scope === undefined ? [] : ['scope', r.scope]),
    ...(r.metric === undefined ? [] : ['metric', String(r.metric)]),
    ...(r.prefsrc === undefined ? [] : ['src', r.prefsrc]),
    ...(r.table === undefined || r.table === 'main' ? [] : ['table', r.table]),
    ...(r.flags?.includes('onlink') === true ? ['onlink'] : []),
  ];
}
