/**
 * CNI attachments in the store: one record per container and interface on this host
 * (keys.cniAttachment), written before ADD acts ('adding') and completed after ('added'), so
 * that a repeated ADD returns the same result, DEL knows what to undo, GC knows what exists,
 * and an ADD cut short (the daemon killed mid-way) is undone at the next start.
 *
 * An attachment's addresses are held in IPAM under `cni/<containerId>/<ifname>` (ipam-driver/state/holder-keys.ts).
 */
import { createHash } from 'node:crypto';
import { decodeAll, decodeRecord, type ShapeCheck } from '../store/decode.js';
import { keys } from '../store/keys.js';
import { del, put, type Store } from '../store/types.js';

/** One address the attachment holds: its pool and the address in CIDR form. */
export interface HeldAddress {
  readonly poolId: string;
  readonly address: string;
}

export interface Attachment {
  readonly containerId: string;
  readonly ifname: string;
  readonly netns: string;
  /** The network as the CNI configuration named it, and the Docker network it resolved to. */
  readonly network: string;
  readonly networkId: string;
  /** The driver endpoint standing for the attachment (endpointIdOf). */
  readonly endpointId: string;
  readonly addresses: readonly HeldAddress[];
  readonly state: 'adding' | 'added';
  /** The CNI result of ADD (at cniVersion 1.0.0), once added. */
  readonly result?: Record<string, unknown>;
  readonly createdAt: string;
}

/** An attachment's key among attachments (its locks, GC's valid list): container ID and interface name. */
export function holderKey(containerId: string, ifname: string): string {
  return `${containerId}/${ifname}`;
}

/** The driver endpoint ID of an attachment: 64 hex digits like Docker's, the same on every retry. */
export function endpointIdOf(host: string, containerId: string, ifname: string): string {
  return createHash('sha256').update(`cni\0${host}\0${containerId}\0${ifname}`).digest('hex');
}

const isText = (v: unknown): boolean => typeof v === 'string';
const shape: ShapeCheck = (v) => {
  for (const f of ['containerId', 'ifname', 'netns', 'network', 'networkId', 'endpointId', 'createdAt'] as const)
    if (!isText(v[f])) return `its ${f} is not a string`;
  if (v.state !== 'adding' && v.state !== 'added') return 'its state is neither "adding" nor "added"';
  const addrs = v.addresses;
  if (
    !Array.isArray(addrs) ||
    !addrs.every(
      (a: unknown) => typeof a === 'object' && a !== null && isText((a as HeldAddress).poolId) && isText((a as HeldAddress).address),
    )
  )
    return 'its addresses are not a list of {poolId, address}';
  return undefined;
};

export class Attachments {
  constructor(
    private readonly store: Store,
    private readonly host: string,
  ) {}

  async get(containerId: string, ifname: string): Promise<Attachment | undefined> {
    const key = keys.cniAttachment(this.host, containerId, ifname);
    const kv = await this.store.get(key);
    return kv === undefined ? undefined : decodeRecord<Attachment>(key, kv.value, shape);
  }

  async put(a: Attachment): Promise<void> {
    await this.store.txn({ compares: [], success: [put(keys.cniAttachment(this.host, a.containerId, a.ifname), JSON.stringify(a))] });
  }

  async delete(a: Pick<Attachment, 'containerId' | 'ifname'>): Promise<void> {
    await this.store.txn({ compares: [], success: [del(keys.cniAttachment(this.host, a.containerId, a.ifname))] });
  }

  /** Resolves once the store answers a read (CNI STATUS: attachments can be kept). */
  async reachable(): Promise<void> {
    await this.store.get(keys.health);
  }

  /** This host's attachments (a malformed record is skipped and noted). */
  async list(): Promise<Attachment[]> {
    const page = await this.store.list(keys.cniAttachments(this.host));
    return decodeAll(page.kvs, (kv) => decodeRecord<Attachment>(kv.key, kv.value, shape));
  }
}
