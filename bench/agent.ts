/**
 * One host of the 200-host benchmark (bench/hosts.ts), in this process: its own etcd client,
 * doing what ovsnet does for the cluster and nothing else: the host registry (a lease and a
 * record), membership of one logical network, and the tunnels (Tunnels, as in the daemon). A
 * light agent's OVS is in memory (FakeOvs); a full host's is a real Open vSwitch
 * (bench/full-host.ts).
 */
import type { OvsApi } from '../src/driver/effects/deps.js';
import { joinLogical } from '../src/driver/vxlan/logical.js';
import { Tunnels } from '../src/driver/vxlan/tunnels.js';
import type { NetworkRecord } from '../src/driver/model/records.js';
import { createLogger } from '../src/lib/log.js';
import { EtcdStore } from '../src/store/etcd/etcd.js';
import { HostRegistry } from '../src/cluster/hosts.js';
import type { Store } from '../src/store/types.js';

const log = createLogger('silent');

/** What a host's watches delivered: events, bytes (keys and values), when the last one came (performance.now()). */
export interface Seen {
  events: number;
  bytes: number;
  lastEventAt: number;
}

/** A store that counts the watch events and bytes it delivers. */
function counted(inner: Store, seen: Seen): Store {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop !== 'watch') return Reflect.get(target, prop, receiver) as unknown;
      const watch: Store['watch'] = (prefix, from, handlers) =>
        target.watch(prefix, from, {
          ...handlers,
          onEvents: (events) => {
            seen.events += events.length;
            seen.lastEventAt = performance.now();
            for (const e of events) seen.bytes += e.kv.key.length + e.kv.value.length;
            handlers.onEvents(events);
          },
        });
      return watch;
    },
  });
}

export interface Agent<O extends OvsApi = OvsApi> {
  readonly name: string;
  /** Its tunnel address (agentVtep of its index): what its tunnel ports are named by. */
  readonly vtepIp: string;
  readonly ovs: O;
  readonly seen: Seen;
  /** When its registry was up (its record written, the others' listed) and its member key written (performance.now()). */
  readonly wrote: { readonly registered: number; readonly joined: number };
  /** Starts the tunnels of an agent made with `tunnelsLater` (else they run already). */
  readonly startTunnels: () => Promise<void>;
  readonly stop: () => Promise<void>;
}

export interface AgentSpec<O extends OvsApi> {
  /** Makes the host's name and VTEP address (10.200.x.y) unique. */
  readonly index: number;
  readonly name?: string;
  readonly logical: string;
  readonly vni: number;
  readonly ovs: O;
  /** As the daemon's on the userspace datapath: wait until applied, drop cached flows. */
  readonly afterAdding?: () => Promise<void>;
  /** Registers and joins only; the tunnels start with startTunnels(). */
  readonly tunnelsLater?: boolean;
}

/** Agent `i`'s tunnel address, unique per index (10.200.x.y up). */
export const agentVtep = (i: number): string => `10.${200 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;

/** Registers the host, joins the logical network with a network on br0 (which must exist), starts its tunnels. */
export async function agent<O extends OvsApi>(endpoints: string[], spec: AgentSpec<O>): Promise<Agent<O>> {
  const i = spec.index;
  const name = spec.name ?? `scale${i}`;
  const { logical, vni, ovs } = spec;
  const seen: Seen = { events: 0, bytes: 0, lastEventAt: 0 };
  const raw = new EtcdStore({ endpoints, timeoutMs: 10_000 });
  const store = counted(raw, seen);
  const vtepIp = agentVtep(i);
  const networkId = i.toString(16).padStart(64, '0');
  const network: NetworkRecord = {
    networkId,
    host: name,
    logical,
    vni,
    bridge: 'br0',
    tag: 1,
    mtu: 1450,
    internal: false,
    ipv4: [],
    ipv6: [],
    createdAt: new Date().toISOString(),
  };
  const tunnels = new Tunnels({
    store,
    log,
    ovs,
    self: () => ({ name, vtepIp }),
    hosts: () => registry.hosts(),
    networks: () => Promise.resolve([network]),
    ...(spec.afterAdding === undefined ? {} : { afterAdding: spec.afterAdding }),
  });
  // The registry tells the tunnels of peers; the tunnels read it only once started.
  const registry = new HostRegistry({
    store,
    log,
    self: { name, vtepIp, machineId: `m${i}` },
    ttlSeconds: 60,
    onChange: (_hosts, changed) => tunnels.peersChanged(changed),
  });
  const stop = async () => {
    await tunnels.stop();
    await registry.stop(true);
    await raw.close();
  };
  const wrote = { registered: 0, joined: 0 };
  try {
    await registry.start();
    wrote.registered = performance.now();
    await joinLogical(store, { name: logical, vni, subnets: [], internal: false, host: name, networkId, now: new Date() });
    wrote.joined = performance.now();
    if (spec.tunnelsLater !== true) await tunnels.start();
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
  const startTunnels = async () => {
    await tunnels.start();
    tunnels.schedule();
  };
  if (spec.tunnelsLater !== true) tunnels.schedule();
  return { name, vtepIp, ovs, seen, wrote, startTunnels, stop };
}
