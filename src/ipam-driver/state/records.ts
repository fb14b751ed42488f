/** What IPAM keeps in the store, and how it is read back. */
import { decodeRecord, type ShapeCheck } from '../../store/decode.js';
import type { KeyValue } from '../../store/types.js';

export interface PoolRecord {
  readonly poolId: string;
  readonly addressSpace: string;
  /** Canonical CIDR of the pool. */
  readonly pool: string;
  /** Canonical CIDR of the range addresses are handed out from, when narrower than the pool. */
  readonly subPool?: string;
  readonly v6: boolean;
  /** True when ovsnet chose the pool (no --subnet). */
  readonly dynamic: boolean;
  readonly options: Readonly<Record<string, string>>;
  readonly host: string;
  readonly createdAt: string;
  /** Unique to the request that created it: finds it again when the store did not confirm it. */
  readonly token?: string;
  /** Set when a logical network (several hosts) shares the pool: its name. */
  readonly logical?: string;
  /** Hosts whose Docker networks use the pool (logical pools); the pool goes with the last. */
  readonly users?: readonly string[];
  /** Endpoint groups sharing this one-host pool with its parent (group-pool.ts); the pool stays while any does. */
  readonly shares?: number;
  /**
   * Endpoint groups sharing a logical network's pool, per host (each host's groups share it with
   * that host's network of the logical network): the host stays a user while any does.
   */
  readonly hostShares?: Readonly<Record<string, number>>;
}

/**
 * A block of a shared (logical) pool: who owns it ('' for nobody: it holds addresses reserved
 * outside any host's block, or a dead host's were reclaimed) and how many addresses of it are
 * reserved. The per-block count is what shared pools keep instead of one per-pool count.
 */
export interface BlockRecord {
  readonly host: string;
  readonly count: number;
  readonly claimedAt: string;
}

/**
 * Whether `host` may use the pool: its own (the host that requested it), or shared on purpose
 * by a logical network. Another host's one-host pool is "not found" to this host's IPAM, so a
 * PoolID of host B given to host A changes nothing of B's. (A record without a host, which no
 * ovsnet writes, counts as nobody's but a logical network's.)
 */
export function poolUsableBy(record: PoolRecord, host: string): boolean {
  return record.logical !== undefined || record.host === host;
}

/** Why an address was asked for. */
export type ReservationKind = 'gateway' | 'static' | 'dynamic';

export interface Reservation {
  readonly address: string;
  readonly poolId: string;
  readonly kind: ReservationKind;
  /** Host whose ovsnet reserved it. */
  readonly host: string;
  /** Docker's endpoint name, when Docker sends it (v29+). */
  readonly name?: string;
  readonly reservedAt: string;
  /** Unique to the request that made it: finds it again when the store did not confirm it. */
  readonly token?: string;
  /** Endpoint bound to it by the network driver's CreateEndpoint. */
  readonly endpoint?: string;
  /**
   * The holder key it was reserved for (holder-keys.ts lists the forms); absent in records written
   * before holders were kept, which holderOf reads from `endpoint`, `kind` and `name`.
   */
  readonly holder?: string;
  /** Set when `ovsnet ipam adopt` took it over from another allocator: which one. */
  readonly adoptedFrom?: string;
}

/** What a record must hold for IPAM to use it: the named fields, of these types. */
function fields(wanted: Readonly<Record<string, 'string' | 'number'>>): ShapeCheck {
  return (value) => {
    for (const [name, type] of Object.entries(wanted)) {
      if (typeof value[name] !== type) return `its ${name} is not a ${type}`;
    }
    return undefined;
  };
}

const poolShape = fields({ poolId: 'string', pool: 'string' });
const blockShape = fields({ host: 'string', count: 'number' });
const reservationFields = fields({ address: 'string', poolId: 'string', host: 'string' });
/** A holder key, when present, is a string (holder-keys.ts reads it as one). */
const reservationShape: ShapeCheck = (value) =>
  reservationFields(value) ?? (value.holder === undefined || typeof value.holder === 'string' ? undefined : 'its holder is not a string');

/** A pool record read from the store (STORE_RECORD_INVALID when malformed). */
export const decodePool = (kv: Pick<KeyValue, 'key' | 'value'>): PoolRecord => decodeRecord<PoolRecord>(kv.key, kv.value, poolShape);
export const decodeBlock = (kv: Pick<KeyValue, 'key' | 'value'>): BlockRecord => decodeRecord<BlockRecord>(kv.key, kv.value, blockShape);
export const decodeReservation = (kv: Pick<KeyValue, 'key' | 'value'>): Reservation =>
  decodeRecord<Reservation>(kv.key, kv.value, reservationShape);

/** What a sticky pool remembers of a released reservation (allocation/release.ts). */
export interface StickyRecord {
  readonly address: string;
  readonly releasedAt: string;
}

/** A sticky record's value, or undefined when it is not one of ours (a hint: never an error). */
export function decodeSticky(value: string): StickyRecord | undefined {
  try {
    const v = JSON.parse(value) as Partial<StickyRecord>;
    return typeof v.address === 'string' ? { address: v.address, releasedAt: String(v.releasedAt) } : undefined;
  } catch {
    return undefined;
  }
}

export function describeHolder(r: Reservation): string {
  const who = r.kind === 'gateway' ? 'the network gateway' : r.kind === 'static' ? 'a request for this exact address' : 'a container';
  const name = r.name === undefined ? '' : ` "${r.name}"`;
  const ep = r.endpoint === undefined ? '' : `, endpoint ${r.endpoint.slice(0, 12)}`;
  return `${who}${name} (host ${r.host}, since ${r.reservedAt}${ep})`;
}
