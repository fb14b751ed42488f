/**
 * What the reclaim of dead hosts (dead-host-reclaim.ts) keeps and reads outside ipam/: its own
 * records of hosts seen gone (when each was first seen so), and, read only, the host registry
 * and the logical networks' members, which the cluster and the network driver own.
 */
import { decodeRecord } from '../../store/decode.js';
import { keys, unpart } from '../../store/keys.js';
import { absent, del, put, type Compare, type KeyValue, type Op, type Store } from '../../store/types.js';

export interface Departed {
  readonly host: string;
  readonly since: string;
}

/** Hosts seen gone, by name. */
export async function listDeparted(store: Store): Promise<Map<string, Departed>> {
  const { kvs } = await store.list(keys.departed);
  return new Map(kvs.map((kv) => [unpart(kv.key.slice(keys.departed.length)), decodeRecord<Departed>(kv.key, kv.value)]));
}

/** Members inside a logical network record (layout 1's form; only their names matter here). */
function membersOf(kv: KeyValue): string[] {
  const record = decodeRecord<{ members?: Record<string, unknown> }>(kv.key, kv.value);
  return Object.keys(typeof record.members === 'object' && record.members !== null ? record.members : {});
}

/** Every logical network with the hosts that are its members (their keys, and layout 1's). */
export async function listLogicalMembers(store: Store): Promise<{ name: string; members: string[] }[]> {
  const [records, keyed] = await Promise.all([store.list(keys.logicalNetworks), store.list(keys.allLogicalMembers)]);
  const byName = new Map<string, Set<string>>();
  for (const kv of records.kvs) byName.set(unpart(kv.key.slice(keys.logicalNetworks.length)), new Set(membersOf(kv)));
  for (const kv of keyed.kvs) {
    const [name, host] = kv.key.slice(keys.allLogicalMembers.length).split('/');
    if (name === undefined || host === undefined) continue;
    const of = byName.get(unpart(name)) ?? new Set<string>();
    byName.set(unpart(name), of.add(unpart(host)));
  }
  return [...byName].map(([name, members]) => ({ name, members: [...members] }));
}

export const departedTxn = {
  /** The host has not registered (again). */
  unregistered: (host: string): Compare => absent(keys.host(host)),
  /** First sighting only: the earliest one counts. */
  noted: (host: string): Compare => absent(keys.departedHost(host)),
  put: (record: Departed): Op => put(keys.departedHost(record.host), JSON.stringify(record)),
  del: (host: string): Op => del(keys.departedHost(host)),
};
