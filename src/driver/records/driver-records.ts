/**
 * The network driver's records in the store (one per Docker network of this host, one per
 * endpoint on it), read through this process's copy of them (record-cache.ts). Every read and
 * write of them goes through here, so the copy's rules live in one place: forget before a store
 * write (a write whose answer is lost leaves no copy), keep after one that succeeded.
 *
 * listNetworks() and listEndpoints() read every host's records straight from the store, for
 * whoever has only a Store (the operator's commands, reconcile).
 */
import { OvsnetError } from '../../lib/errors.js';
import { decodeAll, decodeRecord } from '../../store/decode.js';
import { keys, part, unpart } from '../../store/keys.js';
import { FollowedRecords } from '../../store/follow.js';
import type { Logger } from '../../lib/log.js';
import { absent, del, get, put, type Store } from '../../store/types.js';
import { RecordCache } from './record-cache.js';
import { endpointCodec } from './endpoint-pack.js';
import { isSwarmNetworkId, type EndpointRecord, type NetworkRecord } from '../model/records.js';
import { joinParts, type TxnPart, type TxnPartDone } from './txn-parts.js';
import { bindEach, type BindingPools } from './bind-each.js';
import { findEndpoint, GoneEndpoints } from './endpoint-presence.js';

/** Every endpoint record, of every network (keys.endpoints(networkId) are below it). */

/** Every network record in the store, of every host. */
export async function listNetworks(store: Store): Promise<NetworkRecord[]> {
  return decodeAll((await store.list(keys.networks)).kvs, (kv) => decodeRecord<NetworkRecord>(kv.key, kv.value));
}

/** Every endpoint record in the store, of every network and host. */
export async function listEndpoints(store: Store): Promise<EndpointRecord[]> {
  return decodeAll((await store.list(keys.allEndpoints)).kvs, (kv) => decodeRecord<EndpointRecord>(kv.key, kv.value));
}

/** Every host's network records, followed by NetworkID (groups of logical networks: groups/remote-family.ts). */
export function followNetworks(store: Store, log: Logger, onChange: () => void): FollowedRecords<NetworkRecord> {
  return new FollowedRecords<NetworkRecord>({ store, prefix: keys.networks, nameOf: unpart, log, what: 'network records', onChange });
}

/** One network's endpoint records, followed by EndpointID. */
export function followEndpoints(store: Store, log: Logger, networkId: string, onChange: () => void): FollowedRecords<EndpointRecord> {
  const prefix = keys.endpoints(networkId);
  return new FollowedRecords<EndpointRecord>({
    store,
    prefix,
    nameOf: unpart,
    log,
    what: `endpoints of network ${networkId.slice(0, 12)}`,
    onChange,
  });
}

const missingEndpoint = (networkId: string, endpointId: string) =>
  new OvsnetError(
    'ENDPOINT_NOT_FOUND',
    `endpoint ${endpointId.slice(0, 12)} of network ${networkId.slice(0, 12)} does not exist on this host`,
  );

export class DriverRecords {
  private readonly networks = new RecordCache<NetworkRecord>((key, text) => decodeRecord<NetworkRecord>(key, text));
  private readonly endpoints: RecordCache<EndpointRecord>;
  /** Endpoints whose record this process deleted (endpoint-presence.ts). */
  private readonly gone = new GoneEndpoints();

  constructor(
    private readonly store: Store,
    /** This host: hosts sharing etcd see each other's network records. */
    private readonly host: string,
  ) {
    this.endpoints = new RecordCache<EndpointRecord>((key, text) => decodeRecord<EndpointRecord>(key, text), endpointCodec(host));
  }

  /**
   * This host's network record. Another host's (hosts sharing etcd see each other's records)
   * is not found here: host A never acts on host B's networks, whatever ID it is given.
   */
  async network(networkId: string): Promise<NetworkRecord | undefined> {
    const key = keys.network(this.recordId(networkId));
    const record = await this.networks.read(key, () => this.load(key));
    return record !== undefined && this.owns(record) ? record : undefined;
  }

  /** This host's endpoint record: another host's, or one of another host's network, is not found. */
  async endpoint(networkId: string, endpointId: string): Promise<EndpointRecord | undefined> {
    const record = await this.readEndpoint(networkId, endpointId);
    if (record === undefined) return undefined;
    if (record.host !== undefined) return this.owns(record) ? record : undefined;
    return (await this.network(networkId)) === undefined ? undefined : record; // an older record: its network's host
  }

  /** A network and one of its endpoints, each read once, each found as network() and endpoint() find it. */
  async pair(networkId: string, endpointId: string): Promise<{ network: NetworkRecord | undefined; endpoint: EndpointRecord | undefined }> {
    const network = await this.network(networkId);
    const record = await this.readEndpoint(networkId, endpointId);
    return { network, endpoint: record !== undefined && this.ownsIn(record, network) ? record : undefined };
  }

  /** pair(), or NETWORK_NOT_FOUND (the endpoint not read then), or ENDPOINT_NOT_FOUND. */
  async requirePair(networkId: string, endpointId: string): Promise<{ network: NetworkRecord; endpoint: EndpointRecord }> {
    const network = await this.requireNetwork(networkId);
    const record = await this.readEndpoint(networkId, endpointId);
    if (record !== undefined && this.ownsIn(record, network)) return { network, endpoint: record };
    throw missingEndpoint(networkId, endpointId);
  }

  /** network(), or NETWORK_NOT_FOUND. */
  async requireNetwork(networkId: string): Promise<NetworkRecord> {
    const record = await this.network(networkId);
    if (record !== undefined) return record;
    throw new OvsnetError('NETWORK_NOT_FOUND', `network ${networkId.slice(0, 12)} is not an ovsnet network of this host (or was removed)`);
  }

  /** endpoint(), or ENDPOINT_NOT_FOUND. */
  async requireEndpoint(networkId: string, endpointId: string): Promise<EndpointRecord> {
    const record = await this.endpoint(networkId, endpointId);
    if (record !== undefined) return record;
    throw missingEndpoint(networkId, endpointId);
  }

  /**
   * Whether endpoint `endpointId`'s record exists (the IPAM's release guard): known with no store
   * call when this process created or deleted it, else read in this host's networks whose
   * subnets hold `address` (plain form): endpoint-presence.ts.
   */
  endpointExists(endpointId: string, address: string): boolean | Promise<boolean> {
    if (this.endpoints.hasLeaf(part(endpointId))) return true;
    if (this.gone.has(endpointId)) return false;
    return this.localNetworks().then((networks) => findEndpoint(networks, address, (n) => this.endpoint(n, endpointId)));
  }

  /** Whether a record is this host's (records written before hosts were kept are). */
  owns(record: { readonly host?: string }): boolean {
    return record.host === undefined || record.host === this.host;
  }

  /** Whether an endpoint record is this host's, its network read already (an older record is its network's host's). */
  private ownsIn(record: EndpointRecord, network: NetworkRecord | undefined): boolean {
    return record.host !== undefined ? this.owns(record) : network !== undefined;
  }

  /** This host's networks, from the store. */
  async localNetworks(): Promise<NetworkRecord[]> {
    return (await listNetworks(this.store)).filter((n) => this.owns(n));
  }

  /** This host's endpoint records of a network, from the store. */
  async endpointsOf(networkId: string): Promise<EndpointRecord[]> {
    const kvs = (await this.store.list(keys.endpoints(this.recordId(networkId)))).kvs;
    return decodeAll(kvs, (kv) => decodeRecord<EndpointRecord>(kv.key, kv.value)).filter((e) => this.owns(e));
  }

  /** Every endpoint in the store (of every host), not through the copy. */
  allEndpoints(): Promise<EndpointRecord[]> {
    return listEndpoints(this.store);
  }

  /**
   * This host's endpoint records, from the store (an older record without its host is its
   * network's: `networks`, this host's, read already or read here); of `all` when the caller
   * has read every endpoint record already.
   */
  async localEndpoints(networks?: readonly NetworkRecord[], all?: readonly EndpointRecord[]): Promise<EndpointRecord[]> {
    const local = new Set((networks ?? (await this.localNetworks())).map((n) => n.networkId));
    return (all ?? (await listEndpoints(this.store))).filter((e) => (e.host !== undefined ? this.owns(e) : local.has(e.networkId)));
  }

  /**
   * Writes the record unless one exists; false when one did (a concurrent identical request's).
   * NETWORK_EXISTS when the record standing is another host's: Docker's IDs are random, so such
   * a request is not Docker's, and the caller undoes what it did.
   */
  async createNetwork(record: NetworkRecord): Promise<boolean> {
    const key = keys.network(this.recordId(record.networkId));
    const text = JSON.stringify(record);
    const res = await this.store.txn({ compares: [absent(key)], success: [put(key, text)], failure: [get(key)] });
    if (res.succeeded) {
      this.networks.set(key, record);
      return true;
    }
    const standing = decodeRecord<NetworkRecord>(key, res.gets[0]?.value ?? '{}');
    if (this.owns(standing)) return false;
    throw new OvsnetError(
      'NETWORK_EXISTS',
      `network ${record.networkId.slice(0, 12)} is host ${standing.host ?? '?'}'s, not this host's (${this.host}): every Docker network has an ID of its own`,
    );
  }

  /** Deletes the network's record and every endpoint record of it. */
  async deleteNetwork(networkId: string): Promise<void> {
    this.networks.forget(keys.network(this.recordId(networkId)));
    this.endpoints.forgetPrefix(keys.endpoints(this.recordId(networkId)));
    await this.store.txn({
      compares: [],
      success: [del(keys.network(this.recordId(networkId))), { type: 'deletePrefix', prefix: keys.endpoints(this.recordId(networkId)) }],
    });
  }

  /**
   * Writes the record unless one exists; returns the record that stands. `also`: more compares
   * and writes for the same transaction (the reservation's binding, Ipam.bindOps); when one of
   * its compares fails, the record is written alone and `withDone` is false.
   */
  async createEndpoint(record: EndpointRecord, also?: TxnPart): Promise<{ standing: EndpointRecord; withDone: boolean }> {
    const key = keys.endpoint(this.recordId(record.networkId), record.endpointId);
    const text = JSON.stringify(record);
    const res = await this.store.txn({
      compares: [absent(key), ...(also?.compares ?? [])],
      success: [put(key, text), ...(also?.success ?? [])],
      failure: [get(key)],
    });
    if (res.succeeded) {
      this.endpoints.set(key, record);
      this.gone.delete(record.endpointId);
      return { standing: record, withDone: also !== undefined };
    }
    const found = res.gets[0];
    if (found === undefined && also !== undefined) return { standing: (await this.createEndpoint(record)).standing, withDone: false };
    return { standing: decodeRecord<EndpointRecord>(key, found?.value ?? '{}'), withDone: false };
  }

  /**
   * CreateEndpoint's record; when ovsnet's IPAM gave the addresses, their reservations now name
   * the endpoint: in the record's own transaction when the IPAM knows each reservation as it
   * wrote it (one store round trip), else bound after it, best effort. Refuses an endpoint that
   * exists with other addresses (or another host's). Returns the record that stands (a repeated
   * CreateEndpoint's is the first one's, with the names a Join may have picked).
   */
  async createBound(
    record: EndpointRecord,
    pools: BindingPools | undefined,
    bestEffort: (what: string, fn: () => Promise<void>) => Promise<void>,
  ): Promise<EndpointRecord> {
    const addresses = [record.address, record.addressV6].filter((a): a is string => a !== undefined && a !== '');
    const binds = addresses.map((a) => pools?.bindOps?.(a, record.endpointId));
    const together = binds.length > 0 && binds.every((b) => b !== undefined) ? joinParts(binds) : undefined;
    const { standing, withDone } = await this.createEndpoint(record, together);
    if (!this.owns(standing) || standing.address !== record.address || standing.addressV6 !== record.addressV6) {
      throw new OvsnetError(
        'ENDPOINT_INVALID',
        `endpoint ${record.endpointId.slice(0, 12)} already exists with address ${standing.address ?? standing.addressV6 ?? ''}`,
      );
    }
    const refused = withDone ? undefined : await bindEach(addresses, record.endpointId, pools, bestEffort);
    if (refused !== undefined) {
      if (standing === record) await this.deleteEndpoint(record.networkId, record.endpointId); // this call wrote it
      throw refused;
    }
    return standing;
  }

  async updateEndpoint(record: EndpointRecord): Promise<void> {
    const key = keys.endpoint(this.recordId(record.networkId), record.endpointId);
    const text = JSON.stringify(record);
    this.endpoints.forget(key);
    await this.store.txn({ compares: [], success: [put(key, text)] });
    this.endpoints.set(key, record);
  }

  /**
   * Deletes the endpoint's record; `also`: more compares and writes for the same transaction
   * (the release of its addresses, Ipam.releaseOps), told the outcome. When one of its compares
   * fails, the record is deleted alone.
   */
  async deleteEndpoint(networkId: string, endpointId: string, also?: TxnPartDone): Promise<void> {
    const key = keys.endpoint(this.recordId(networkId), endpointId);
    this.endpoints.forget(key);
    const res = also === undefined ? undefined : await this.store.txn({ compares: also.compares, success: [del(key), ...also.success] });
    if (res !== undefined) also?.done(res.succeeded, res.revision);
    if (res?.succeeded !== true) await this.store.txn({ compares: [], success: [del(key)] });
    this.gone.add(endpointId);
  }

  /**
   * The ID a network's records are kept under: Docker's own, unique per host; a swarm network has
   * one ID on every node, so each node's records go under the ID and the node's name.
   */
  private recordId(networkId: string): string {
    return isSwarmNetworkId(networkId) ? `${networkId}.${this.host}` : networkId;
  }

  private readEndpoint(networkId: string, endpointId: string): Promise<EndpointRecord | undefined> {
    const key = keys.endpoint(this.recordId(networkId), endpointId);
    return this.endpoints.read(key, () => this.load(key));
  }

  /** The text of the record at `key` in the store (the cache decodes it). */
  private async load(key: string): Promise<string | undefined> {
    return (await this.store.get(key))?.value;
  }
}
