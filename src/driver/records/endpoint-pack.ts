/**
 * The compact form of an endpoint record in this process's copy (record-cache.ts): a JSON array
 * of its fields in a fixed order, each one that can be derived given as 0 (the endpoint ID from
 * its key, this host, the MAC from the address, the interface names from the endpoint ID), an
 * absent one as null, the network ID as its number in a table of the network IDs seen (a record
 * names its network; a host has few), the creation time as milliseconds when that gives the same
 * text back. About 70 characters where the record's JSON has 400. A record with a field this
 * form does not know (written by a newer ovsnet) is kept as its JSON text, whole.
 */
import { unpart } from '../../store/keys.js';
import { macFor } from '../model/addresses.js';
import { names, type EndpointRecord } from '../model/records.js';
import type { RecordCodec } from './record-cache.js';

/** The fields, in the packed array's order (after the network's number). */
const FIELDS = [
  'endpointId',
  'address',
  'addressV6',
  'mac',
  'host',
  'hostVeth',
  'containerVeth',
  'portmap',
  'published',
  'ifname',
  'qos',
  'createdAt',
] as const satisfies readonly (keyof EndpointRecord)[];
const KNOWN = new Set<string>(['networkId', ...FIELDS]);

type Field = (typeof FIELDS)[number];

export function endpointCodec(host: string): RecordCodec<EndpointRecord> {
  const networks: string[] = [];
  const numbers = new Map<string, number>();
  const networkNumber = (id: string) => {
    let n = numbers.get(id);
    if (n === undefined) numbers.set(id, (n = networks.push(id) - 1));
    return n;
  };
  /** What each derivable field is when derived; undefined: not derivable here. */
  const derived = (key: string, r: Partial<EndpointRecord>, field: Field): unknown => {
    switch (field) {
      case 'endpointId':
        return unpart(key.slice(key.lastIndexOf('/') + 1));
      case 'host':
        return host;
      case 'mac':
        return r.address === undefined || r.address === '' ? undefined : macOf(r.address);
      case 'hostVeth':
        return r.endpointId === undefined ? undefined : names.hostVeth(r.endpointId);
      case 'containerVeth':
        return r.endpointId === undefined ? undefined : names.containerVeth(r.endpointId);
      case 'address':
      case 'addressV6':
      case 'portmap':
      case 'published':
      case 'ifname':
      case 'qos':
      case 'createdAt':
        return undefined;
    }
  };
  return {
    pack(key, record) {
      const values = Object.entries(record).filter(([, v]) => v !== undefined);
      // Numbers and nulls mean "derived" and "absent" in the packed form: such a record (no valid one) is kept whole.
      if (values.some(([f, v]) => !KNOWN.has(f) || typeof v === 'number' || v === null) || typeof record.networkId !== 'string')
        return JSON.stringify(record);
      const slots: unknown[] = [networkNumber(record.networkId)];
      for (const field of FIELDS) {
        const value = record[field];
        if (value === undefined) slots.push(null);
        else if (typeof value === 'string' && value === derived(key, record, field)) slots.push(0);
        else if (field === 'createdAt' && typeof value === 'string' && isoOf(Date.parse(value)) === value) slots.push(Date.parse(value));
        else slots.push(value);
      }
      return JSON.stringify(slots);
    },
    unpack(key, packed) {
      if (packed.startsWith('{')) return JSON.parse(packed) as EndpointRecord;
      const slots = JSON.parse(packed) as unknown[];
      const record: Record<string, unknown> = { networkId: networks[slots[0] as number] };
      FIELDS.forEach((field, i) => {
        const slot = slots[i + 1];
        if (slot === null) return;
        if (field === 'createdAt' && typeof slot === 'number')
          record[field] = isoOf(slot); // milliseconds, 0 among them
        else if (slot === 0) record[field] = derived(key, record, field);
        else record[field] = slot;
      });
      return record as unknown as EndpointRecord;
    },
  };
}

/** How many derived MACs are remembered (the oldest go first). */
const MACS_LIMIT = 1024;
/**
 * The MACs derived lately, by address: every read of a record derives its MAC again (three to
 * five reads per container), and the derivation (parse, bytes, hex) was 3% of a container's
 * calls. A function of the address alone: a record whose address changes derives anew.
 */
const macs = new Map<string, string | undefined>();

/** The MAC ovsnet derives from an address (model/addresses.ts); undefined for an address it cannot parse. */
const macOf = (address: string): string | undefined => {
  if (address === '') return undefined; // macFor makes a random one: nothing to derive
  if (macs.has(address)) return macs.get(address);
  let mac: string | undefined;
  try {
    mac = macFor(address);
  } catch {
    mac = undefined;
  }
  if (macs.size >= MACS_LIMIT) macs.delete(macs.keys().next().value ?? '');
  macs.set(address, mac);
  return mac;
};

const isoOf = (ms: number): string | undefined => (Number.isFinite(ms) ? new Date(ms).toISOString() : undefined);
