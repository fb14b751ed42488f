/**
 * The OVSDB rows of the uplink (OVSNET_UPLINK): the interface as a trunk port of the integration
 * bridge, and the host port (an internal port on the untagged VLAN 0) that holds the host's
 * addresses once the interface is a bridge port. Both carry ovsnet's external_ids (role uplink,
 * role uplink-host), so a restarted ovsnet finds them, and reconcile leaves them alone.
 */
import { OWNER } from '../ovs/external-ids.js';
import type { Ovsdb } from '../ovs/ovsdb.js';

type Row = Record<string, unknown>;

const map = (o: Record<string, string>) => ['map', Object.entries(o)];
const set = (values: readonly unknown[]) => ['set', values];
const uuid = (v: unknown) => (Array.isArray(v) && typeof v[1] === 'string' ? v[1] : '');

export const ROLE_KEY = 'ovsnet-role';
export const UPLINK_ROLE = 'uplink';
export const UPLINK_HOST_ROLE = 'uplink-host';

/** Where an interface is in OVS: its type and the bridge and port holding it (undefined: not in OVS). */
export async function placeOf(
  ovs: Ovsdb,
  name: string,
): Promise<{ type: string; port?: string; bridge?: string; role?: string } | undefined> {
  const [ifaces] = await ovs.transact([{ op: 'select', table: 'Interface', where: [['name', '==', name]], columns: ['_uuid', 'type'] }]);
  const iface = (ifaces?.rows as Row[] | undefined)?.[0];
  if (iface === undefined) return undefined;
  const [ports] = await ovs.transact([
    {
      op: 'select',
      table: 'Port',
      where: [['interfaces', 'includes', ['uuid', uuid(iface._uuid)]]],
      columns: ['_uuid', 'name', 'external_ids'],
    },
  ]);
  const port = (ports?.rows as Row[] | undefined)?.[0];
  const type = typeof iface.type === 'string' ? iface.type : '';
  if (port === undefined) return { type };
  const [bridges] = await ovs.transact([
    { op: 'select', table: 'Bridge', where: [['ports', 'includes', ['uuid', uuid(port._uuid)]]], columns: ['name'] },
  ]);
  const bridge = (bridges?.rows as Row[] | undefined)?.[0]?.name;
  const ids = Array.isArray(port.external_ids) ? Object.fromEntries(port.external_ids[1] as [string, string][]) : {};
  return {
    type,
    port: String(port.name),
    ...(typeof bridge === 'string' ? { bridge } : {}),
    ...(ids[ROLE_KEY] === undefined ? {} : { role: ids[ROLE_KEY] }),
  };
}

/** Names of the ports ovsnet made with this role (normally one or none). */
export async function portsWithRole(ovs: Ovsdb, role: string): Promise<string[]> {
  const [sel] = await ovs.transact([
    { op: 'select', table: 'Port', where: [['external_ids', 'includes', map({ ...OWNER, [ROLE_KEY]: role })]], columns: ['name'] },
  ]);
  return ((sel?.rows as Row[] | undefined) ?? []).map((r) => String(r.name));
}

/** Adds the interface as a trunk port carrying the untagged VLAN 0 and `tags`. */
export async function addTrunk(ovs: Ovsdb, bridge: string, name: string, tags: readonly number[]): Promise<void> {
  const ids = map({ ...OWNER, [ROLE_KEY]: UPLINK_ROLE });
  await ovs.transact([
    { op: 'insert', table: 'Interface', row: { name, type: '', external_ids: ids }, 'uuid-name': 'iface' },
    {
      op: 'insert',
      table: 'Port',
      row: { name, interfaces: ['named-uuid', 'iface'], vlan_mode: 'trunk', trunks: set(trunkList(tags)), external_ids: ids },
      'uuid-name': 'port',
    },
    { op: 'mutate', table: 'Bridge', where: [['name', '==', bridge]], mutations: [['ports', 'insert', set([['named-uuid', 'port']])]] },
    { op: 'wait', table: 'Bridge', where: [['name', '==', bridge]], columns: ['name'], until: '!=', rows: [], timeout: 0 },
  ]);
}

/** The VLANs the trunk carries: always 0 (the host's untagged traffic), then the networks' tags. */
export function trunkList(tags: readonly number[]): number[] {
  return [0, ...[...new Set(tags)].filter((t) => t !== 0).sort((a, b) => a - b)];
}

/** Sets the VLANs the trunk carries (idempotent). */
export async function setTrunks(ovs: Ovsdb, name: string, tags: readonly number[]): Promise<void> {
  await ovs.transact([{ op: 'update', table: 'Port', where: [['name', '==', name]], row: { trunks: set(trunkList(tags)) } }]);
}

/** The host port: an internal port, access port of VLAN 0 (untagged on the trunk), with the uplink's MAC and MTU. */
export async function addHostPort(ovs: Ovsdb, bridge: string, name: string, mac: string, mtu: number): Promise<void> {
  const ids = map({ ...OWNER, [ROLE_KEY]: UPLINK_HOST_ROLE });
  await ovs.transact([
    {
      op: 'insert',
      table: 'Interface',
      row: { name, type: 'internal', mac, mtu_request: mtu, external_ids: ids },
      'uuid-name': 'iface',
    },
    {
      op: 'insert',
      table: 'Port',
      row: { name, interfaces: ['named-uuid', 'iface'], vlan_mode: 'access', tag: 0, external_ids: ids },
      'uuid-name': 'port',
    },
    { op: 'mutate', table: 'Bridge', where: [['name', '==', bridge]], mutations: [['ports', 'insert', set([['named-uuid', 'port']])]] },
    { op: 'wait', table: 'Bridge', where: [['name', '==', bridge]], columns: ['name'], until: '!=', rows: [], timeout: 0 },
  ]);
}
