/**
 * OVSDB (RFC 7047) over JSON-RPC: transactions on the Open_vSwitch database, and the
 * datapath operations the driver needs. No ovs-vsctl process on any request path.
 *
 * Idempotency (each method's, for the driver, in src/driver/effects/deps.ts): ensureBridge does
 * nothing when the bridge exists (one another ovsnet creates meanwhile counts as made); setMtu
 * and waitApplied are safe to repeat; addPort fails if a port of that name exists unless asked to
 * replace it; deletePort treats a missing port as done. Rows ovsnet creates carry external_ids
 * (external-ids.ts: the owner mark, and a port's network, endpoint or role) so that a
 * restarted ovsnet finds its own ports again.
 */
import { OvsnetError } from '../../lib/errors.js';
import { JsonRpcClient } from './jsonrpc.js';
import { OWNER } from './external-ids.js';
import {
  DB,
  MAX_OFPORT,
  isRow,
  malformed,
  map,
  named,
  portOps,
  rowsOf,
  stringMap,
  uuidOf,
  uuidsOf,
  type Op,
  type PortOptions,
  type Row,
} from './ovsdb-rows.js';

export type { PortOptions } from './ovsdb-rows.js';

export interface OwnPort {
  readonly name: string;
  readonly uuid: string;
  readonly tag: number | undefined;
  readonly externalIds: Record<string, string>;
}

export type DatapathType = 'system' | 'netdev';

/**
 * secure: the bridge forwards only what its flows say (ovsnet's, openflow-state.ts), so that
 * while ovs-vswitchd comes back from a restart packets drop rather than pass a rule not back yet.
 * standalone: a learning switch by itself (OVS's default), for tools without OpenFlow access.
 */
export type FailMode = 'secure' | 'standalone';

/** A new port: its VLAN tag, interface type and options, external_ids, MTU, split horizon. */

export class Ovsdb {
  private readonly rpc: JsonRpcClient;

  constructor(
    target: string,
    private readonly timeoutMs: number,
    observe?: (method: string, ok: boolean, seconds: number) => void,
    onLost?: () => void,
  ) {
    this.rpc = new JsonRpcClient({
      target,
      timeoutMs,
      ...(observe === undefined ? {} : { observe }),
      ...(onLost === undefined ? {} : { onLost }),
    });
  }

  close(): void {
    this.rpc.close();
  }

  /**
   * One OVSDB transaction; any failed operation fails the whole call with its details. A reply
   * that is not one result per operation (RFC 7047 §4.1.3) fails it as OVS_FAILED.
   */
  async transact(ops: Op[]): Promise<Row[]> {
    const r = await this.attempt(ops);
    if ('failed' in r) throw r.failed;
    return r.rows;
  }

  /** A transaction whose failure is an answer: which operation failed (`at`), and the error it would throw. */
  private async attempt(ops: Op[]): Promise<{ rows: Row[] } | { at: number; failed: OvsnetError }> {
    const reply = await this.rpc.request('transact', [DB, ...ops]);
    if (!Array.isArray(reply) || reply.length < ops.length || !reply.every((r) => r === null || isRow(r))) {
      throw malformed('transact', 'not a list of one result object per operation', reply);
    }
    const result = reply as (Row | null)[];
    const at = result.findIndex((r) => r !== null && 'error' in r);
    const bad = result[at];
    if (bad === undefined || bad === null) return { rows: result.map((r) => r ?? {}) };
    const details = bad.details === undefined ? '' : `: ${JSON.stringify(bad.details)}`;
    return { at, failed: new OvsnetError('OVS_FAILED', `OVSDB transaction failed: ${String(bad.error)}${details}`) };
  }

  async bridgeExists(bridge: string): Promise<boolean> {
    const [sel] = await this.transact([{ op: 'select', table: 'Bridge', where: [['name', '==', bridge]], columns: ['name'] }]);
    return rowsOf(sel).length > 0;
  }

  /** Creates the bridge (VLAN-aware, of that fail mode) if missing; an existing one is left as it is. */
  async ensureBridge(bridge: string, datapath: DatapathType, failMode: FailMode): Promise<void> {
    if (await this.bridgeExists(bridge)) return;
    // Without the root row a new bridge is garbage-collected at commit, silently.
    const [root] = await this.transact([{ op: 'select', table: 'Open_vSwitch', where: [], columns: ['_uuid'] }]);
    if (rowsOf(root).length === 0) {
      throw new OvsnetError(
        'OVS_UNAVAILABLE',
        'the Open vSwitch database is not initialized (no Open_vSwitch row): run `ovs-vsctl --no-wait init`, or start Open vSwitch with its service script',
      );
    }
    await this.transact([
      { op: 'wait', table: 'Bridge', where: [['name', '==', bridge]], columns: ['name'], until: '==', rows: [], timeout: 0 },
      { op: 'insert', table: 'Interface', row: { name: bridge, type: 'internal' }, 'uuid-name': 'iface' },
      { op: 'insert', table: 'Port', row: { name: bridge, interfaces: named('iface') }, 'uuid-name': 'port' },
      {
        op: 'insert',
        table: 'Bridge',
        row: { name: bridge, ports: named('port'), datapath_type: datapath, fail_mode: failMode, external_ids: map(OWNER) },
        'uuid-name': 'br',
      },
      { op: 'mutate', table: 'Open_vSwitch', where: [], mutations: [['bridges', 'insert', ['set', [named('br')]]]] },
    ]).catch((err: unknown) => {
      // Another ovsnet created it between the check and the insert: that is success.
      if (err instanceof OvsnetError && /timed out|not met/i.test(err.message)) return [];
      throw err;
    });
    await this.waitApplied();
  }

  /** The bridge's fail_mode ('' when unset, which OVS takes as standalone); undefined without the bridge. */
  async failMode(bridge: string): Promise<string | undefined> {
    const [sel] = await this.transact([{ op: 'select', table: 'Bridge', where: [['name', '==', bridge]], columns: ['fail_mode'] }]);
    const row = rowsOf(sel)[0];
    if (row === undefined) return undefined;
    // An optional column: a string when set, an empty set (["set", []]) when not.
    return typeof row.fail_mode === 'string' ? row.fail_mode : '';
  }

  /** Sets the bridge's fail_mode in OVSDB (ovs-vswitchd, when running, flushes the bridge's flows as it applies it). */
  async setFailMode(bridge: string, failMode: FailMode): Promise<void> {
    await this.transact([{ op: 'update', table: 'Bridge', where: [['name', '==', bridge]], row: { fail_mode: failMode } }]);
  }

  /** Open_vSwitch other_config:flow-restore-wait. */
  async flowRestoreWait(): Promise<boolean> {
    const [sel] = await this.transact([{ op: 'select', table: 'Open_vSwitch', where: [], columns: ['other_config'] }]);
    const row = rowsOf(sel)[0];
    return row === undefined ? false : stringMap(row.other_config)['flow-restore-wait'] === 'true';
  }

  /**
   * Sets (true) or removes flow-restore-wait. While it is true a starting ovs-vswitchd keeps the
   * kernel datapath's flows and waits for OpenFlow rules before it touches the datapath.
   */
  async setFlowRestoreWait(on: boolean): Promise<void> {
    // The key deleted first either way: insert would leave an existing value ("false") as it is.
    const mutate = (m: unknown[]): Op => ({ op: 'mutate', table: 'Open_vSwitch', where: [], mutations: [m] });
    const drop = mutate(['other_config', 'delete', ['set', ['flow-restore-wait']]]);
    await this.transact(on ? [drop, mutate(['other_config', 'insert', map({ 'flow-restore-wait': 'true' })])] : [drop]);
  }

  /**
   * Adds a port (and its interface) to the bridge with a VLAN tag, in one transaction.
   * `type` is '' for a kernel device (veth), 'internal' for a port OVS creates, 'vxlan' for a
   * tunnel (its `options`: remote_ip, local_ip, key).
   */
  async addPort(bridge: string, name: string, opts: PortOptions): Promise<void> {
    const ops = portOps(bridge, name, opts);
    if (opts.replace !== true) return void (await this.transact(ops));
    // Most often no port has the name: one transaction that adds it unless one does.
    const free: Op = { op: 'wait', table: 'Port', where: [['name', '==', name]], columns: ['name'], until: '==', rows: [], timeout: 0 };
    const first = await this.attempt([free, ...ops]);
    if (!('failed' in first)) return;
    if (first.at !== 0) throw first.failed;
    await this.deletePort(name);
    await this.transact(ops);
  }

  /** The type of the interface named (internal, vxlan, '' for a kernel device); undefined if none. */
  async interfaceType(name: string): Promise<string | undefined> {
    const [sel] = await this.transact([{ op: 'select', table: 'Interface', where: [['name', '==', name]], columns: ['type'] }]);
    const type = rowsOf(sel)[0]?.type;
    return typeof type === 'string' ? type : undefined;
  }

  /** Pins an interface's MTU (mtu_request); idempotent. */
  async setMtu(name: string, mtu: number): Promise<void> {
    await this.transact([{ op: 'update', table: 'Interface', where: [['name', '==', name]], row: { mtu_request: mtu } }]);
  }

  /**
   * Removes a port by name from whichever bridge holds it; true when there was one (a missing
   * port is success). With `marks`, only when its external_ids include them.
   */
  async deletePort(name: string, marks?: Readonly<Record<string, string>>): Promise<boolean> {
    const where: unknown[] = [['name', '==', name], ...(marks === undefined ? [] : [['external_ids', 'includes', map(marks)]])];
    const [sel] = await this.transact([{ op: 'select', table: 'Port', where, columns: ['_uuid'] }]);
    const row = rowsOf(sel)[0];
    if (row === undefined) return false;
    const uuid = uuidOf(row._uuid);
    await this.transact([
      {
        op: 'mutate',
        table: 'Bridge',
        where: [['ports', 'includes', ['uuid', uuid]]],
        mutations: [['ports', 'delete', ['set', [['uuid', uuid]]]]],
      },
    ]);
    return true;
  }

  /** Every port ovsnet created, with its tag and external_ids. */
  async ownPorts(): Promise<OwnPort[]> {
    const [sel] = await this.transact([
      { op: 'select', table: 'Port', where: [['external_ids', 'includes', map(OWNER)]], columns: ['_uuid', 'name', 'tag', 'external_ids'] },
    ]);
    return rowsOf(sel).map((r) => ({
      name: String(r.name),
      uuid: uuidOf(r._uuid),
      tag: typeof r.tag === 'number' ? r.tag : undefined,
      externalIds: stringMap(r.external_ids),
    }));
  }

  /**
   * The OpenFlow number of each interface named that exists, in one transaction: undefined until
   * ovs-vswitchd has given it one (or when it could not: -1). A name without an interface is absent.
   */
  async ofports(names: readonly string[]): Promise<Map<string, number | undefined>> {
    if (names.length === 0) return new Map();
    const sels = await this.transact(
      names.map((name) => ({ op: 'select', table: 'Interface', where: [['name', '==', name]], columns: ['name', 'ofport'] })),
    );
    const rows = sels.flatMap((sel) => rowsOf(sel));
    return new Map(rows.map((r) => [String(r.name), typeof r.ofport === 'number' && r.ofport > 0 ? r.ofport : undefined]));
  }

  /**
   * The OpenFlow number of every port of the bridge, by interface name, in one transaction: what
   * `ovs-ofctl dump-ports-desc` lists, without its process. Interfaces ovs-vswitchd has not
   * numbered yet (or could not: -1) and the bridge's own (LOCAL) are left out. Empty without the
   * bridge.
   */
  async bridgeOfports(bridge: string): Promise<Map<string, number>> {
    const [br, ports, ifaces] = await this.transact([
      { op: 'select', table: 'Bridge', where: [['name', '==', bridge]], columns: ['ports'] },
      { op: 'select', table: 'Port', where: [], columns: ['_uuid', 'interfaces'] },
      { op: 'select', table: 'Interface', where: [], columns: ['_uuid', 'name', 'ofport'] },
    ]);
    const bridgeRow = rowsOf(br)[0];
    if (bridgeRow === undefined) return new Map();
    const onBridge = new Set(uuidsOf(bridgeRow.ports));
    const wanted = new Set(rowsOf(ports).flatMap((p) => (onBridge.has(uuidOf(p._uuid)) ? uuidsOf(p.interfaces) : [])));
    const out = new Map<string, number>();
    for (const i of rowsOf(ifaces)) {
      if (wanted.has(uuidOf(i._uuid)) && typeof i.ofport === 'number' && i.ofport >= 1 && i.ofport <= MAX_OFPORT)
        out.set(String(i.name), i.ofport);
    }
    return out;
  }

  /** Bumps next_cfg and waits until ovs-vswitchd has applied everything up to it. */
  async waitApplied(): Promise<void> {
    const [, sel] = await this.transact([
      { op: 'mutate', table: 'Open_vSwitch', where: [], mutations: [['next_cfg', '+=', 1]] },
      { op: 'select', table: 'Open_vSwitch', where: [], columns: ['next_cfg'] },
    ]);
    const target = Number(rowsOf(sel)[0]?.next_cfg ?? 0);
    const deadline = Date.now() + this.timeoutMs;
    for (let delay = 1; ; delay = Math.min(delay * 2, 50)) {
      const [cur] = await this.transact([{ op: 'select', table: 'Open_vSwitch', where: [], columns: ['cur_cfg'] }]);
      if (Number(rowsOf(cur)[0]?.cur_cfg ?? 0) >= target) return;
      if (Date.now() > deadline) {
        throw new OvsnetError(
          'OVS_UNAVAILABLE',
          `ovs-vswitchd did not apply configuration ${target} within ${this.timeoutMs} ms: is ovs-vswitchd running?`,
        );
      }
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
