/**
 * What the operator's commands show, read from the same store the daemon uses (it may run at
 * the same time): networks, endpoints, pool usage per network and per host (doctor.ts: health checks).
 * Pure reads; nothing here changes state.
 */
import { size } from '../lib/cidr.js';
import { listEndpoints, listNetworks } from '../driver/records/driver-records.js';
import { registeredNames } from '../cluster/hosts.js';
import { PoolIndex } from '../ipam-driver/index/pool-index.js';
import { ipamSnapshot, reservationsIn } from '../ipam-driver/state/ipam-reads.js';
import { poolUsage } from '../ipam-driver/index/usage.js';
import type { Store } from '../store/types.js';
import type { EndpointRecord } from '../driver/model/records.js';
import { networkRows, type NetworkRow } from './networks-view.js';

export interface EndpointRow {
  endpoint: string;
  network: string;
  address: string;
  mac: string;
  port: string;
}

export interface PoolRow {
  pool: string;
  range: string;
  used: number;
  usable: string;
  percent: string;
  byHost: Record<string, number>;
  /** Logical network sharing the pool ('' if none), and blocks owned per host. */
  logical: string;
  blocks: Record<string, number>;
}

/** Every network's row, groups under their parent (networks-view.ts). */
export async function networks(store: Store): Promise<NetworkRow[]> {
  return networkRows(await listNetworks(store), await listEndpoints(store));
}

/** Every endpoint's row, of `records` when read already. */
export async function endpoints(store: Store, records?: readonly EndpointRecord[]): Promise<EndpointRow[]> {
  return (records ?? (await listEndpoints(store))).map((e) => ({
    endpoint: e.endpointId.slice(0, 12),
    network: e.networkId.slice(0, 12),
    address: [e.address, e.addressV6].filter((a) => a !== undefined).join(' '),
    mac: e.mac,
    port: e.hostVeth,
  }));
}

/** Pool usage: what `docker network inspect` cannot show for a remote IPAM. */
export async function pools(store: Store): Promise<PoolRow[]> {
  const snapshot = await ipamSnapshot(store);
  const index = new PoolIndex();
  index.load(snapshot);
  return [...index.pools.values()].map((p) => {
    const u = poolUsage(p);
    const byHost: Record<string, number> = {};
    for (const { host } of reservationsIn(snapshot, u.poolId)) byHost[host] = (byHost[host] ?? 0) + 1;
    const blocks: Record<string, number> = {};
    for (const b of u.blocks ?? []) {
      const owner = b.host || '(unowned)';
      blocks[owner] = (blocks[owner] ?? 0) + 1;
    }
    return {
      pool: u.pool,
      range: p.record.subPool ?? u.pool,
      used: u.reserved,
      usable: u.capacity.toString(),
      percent: size(p.prefix) > 1n << 40n ? '<0.01%' : `${((u.reserved / Number(u.capacity === 0n ? 1n : u.capacity)) * 100).toFixed(1)}%`,
      byHost,
      logical: u.logical ?? '',
      blocks,
    };
  });
}

/** Registered hosts (the cluster registry; on a single host, empty). */
export async function hosts(store: Store): Promise<string[]> {
  return registeredNames(store);
}
