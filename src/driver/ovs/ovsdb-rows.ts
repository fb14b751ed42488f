/**
 * OVSDB's wire forms as ovsdb.ts reads and writes them (RFC 7047): rows, maps, UUIDs, each
 * read checked (OVS_FAILED naming what was malformed), and the operations that add a port.
 */
import { OvsnetError } from '../../lib/errors.js';
import { OWNER } from './external-ids.js';

export const DB = 'Open_vSwitch';

/** The highest number a port of a bridge can have (OFPP_MAX is 0xff00; LOCAL is 0xfffe). */
export const MAX_OFPORT = 0xfeff;

export type Row = Record<string, unknown>;
export type Op = Record<string, unknown>;

export const map = (o: Record<string, string>) => ['map', Object.entries(o)];

export const isRow = (v: unknown): v is Row => typeof v === 'object' && v !== null && !Array.isArray(v);

export function malformed(what: string, why: string, reply: unknown): OvsnetError {
  const shown = JSON.stringify(reply) ?? String(reply);
  return new OvsnetError(
    'OVS_FAILED',
    `OVSDB answered ${what} with a malformed reply (${why}): ${shown.length > 120 ? `${shown.slice(0, 120)}...` : shown}`,
  );
}

/** The rows of a select's result; OVS_FAILED when they are not a list of objects. */
export function rowsOf(result: Row | undefined): Row[] {
  const rows = result?.rows ?? [];
  if (!Array.isArray(rows) || !rows.every(isRow)) throw malformed('select', 'its rows are not a list of objects', rows);
  return rows;
}

/** A UUID as OVSDB sends it (["uuid", "..."]); OVS_FAILED otherwise. */
export function uuidOf(v: unknown): string {
  if (!Array.isArray(v) || v[0] !== 'uuid' || typeof v[1] !== 'string') throw malformed('select', 'a _uuid is not ["uuid", "..."]', v);
  return v[1];
}

/** A set of UUIDs as OVSDB sends it (["set", [["uuid", "..."], ...]], or one ["uuid", "..."]); OVS_FAILED otherwise. */
export function uuidsOf(v: unknown): string[] {
  if (Array.isArray(v) && v[0] === 'set' && Array.isArray(v[1])) return (v[1] as unknown[]).map(uuidOf);
  return [uuidOf(v)];
}

/** A string map as OVSDB sends it (["map", [[k, v], ...]]); OVS_FAILED otherwise. */
export function stringMap(v: unknown): Record<string, string> {
  if (
    !Array.isArray(v) ||
    v[0] !== 'map' ||
    !Array.isArray(v[1]) ||
    !v[1].every((e) => Array.isArray(e) && e.length === 2 && typeof e[0] === 'string' && typeof e[1] === 'string')
  ) {
    throw malformed('select', 'a map column is not ["map", [[key, value], ...]]', v);
  }
  return Object.fromEntries(v[1] as [string, string][]);
}
export const named = (n: string) => ['named-uuid', n];

export interface PortOptions {
  readonly tag: number;
  readonly type?: string;
  readonly externalIds: Record<string, string>;
  readonly options?: Record<string, string>;
  readonly mtu?: number;
  readonly protected?: boolean;
  /** A port of that name (a leftover of an earlier attempt) is replaced; looked up only when there is one. */
  readonly replace?: boolean;
}

/** The operations that add port `name` and its interface to `bridge` (failing the transaction if the bridge is missing). */
export function portOps(bridge: string, name: string, opts: PortOptions): Op[] {
  const ids = { ...OWNER, ...opts.externalIds };
  return [
    {
      op: 'insert',
      table: 'Interface',
      row: {
        name,
        type: opts.type ?? '',
        external_ids: map(ids),
        options: map(opts.options ?? {}),
        // Without mtu_request OVS gives an internal port the smallest MTU of the bridge's
        // other ports, so one network's MTU would lower every gateway's.
        ...(opts.mtu === undefined ? {} : { mtu_request: opts.mtu }),
      },
      'uuid-name': 'iface',
    },
    {
      op: 'insert',
      table: 'Port',
      // protected: OVS forwards nothing between two protected ports (the tunnels' split horizon).
      row: {
        name,
        interfaces: named('iface'),
        tag: opts.tag,
        external_ids: map(ids),
        ...(opts.protected === true ? { protected: true } : {}),
      },
      'uuid-name': 'port',
    },
    { op: 'mutate', table: 'Bridge', where: [['name', '==', bridge]], mutations: [['ports', 'insert', ['set', [named('port')]]]] },
    // Fails the transaction if the bridge is missing, rather than leaving an orphan port.
    { op: 'wait', table: 'Bridge', where: [['name', '==', bridge]], columns: ['name'], until: '!=', rows: [], timeout: 0 },
  ];
}
