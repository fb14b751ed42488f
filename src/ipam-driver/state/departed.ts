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

/** The members of a logical network record (only their names matter here). */
function membersOf(kv: KeyValue): Record<string, unknown> {
  return decodeRecord<{ members: Record<string, unknown> }>(kv.key, kv.value, (v) =>
    typeof v.members === 'object' && v.members !== null ? undefined : 'it has no members',
  ).members;
}

/** Every logical network with the hosts that are its members. */
export async function listLogicalMembers(store: Store): Promise<{ name: string; members: string[] }[]> {
  const { kvs } = await store.list(keys.logicalNetworks);
  return kvs.map((kv) => ({ name: unpart(kv.key.slice(keys.logicalNetworks.length)), members: Object.keys(membersOf(kv)) }));
}

export const departedTxn = {
  /** The host has not registered (again). */
  unregistered: (host: string): Compare => absent(keys.host(host)),
  /** First sighting only: the earliest one counts. */
  noted: (host: string): Compare => absent(keys.departedHost(host)),
  put: (record: Departed): Op => put(keys.departedHost(record.host), JSON.stringify(record)),
  del: (host: string): Op => del(keys.departedHost(host)),
};
