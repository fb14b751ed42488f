/**
 * Reaping: releasing this host's reservations whose holder no longer exists. A sweep every third
 * of the grace period (1 to 30 s) judges each one `endpoint gone` (bound by bind-endpoint.ts to
 * an endpoint no record names any more), `container gone` (a CNI attachment the `cniAlive` judge
 * says is gone: undone whole, as DEL would, by cniRemove) or `never bound` (a Docker request in
 * a pool of an ovsnet network of this host that no CreateEndpoint bound, a grace period old: a
 * CreateEndpoint that still comes gets it back, allocation/bind-again.ts). It never frees an
 * address an endpoint record names, another host's reservation, a gateway, one of a network of
 * Docker's own driver, a static request without a name or an adopted one (docs/ipam.md lists
 * why). A holder is reaped only when a sweep a grace period after the first sighting finds it
 * gone still; the release checks, in one transaction, that the record is the one judged.
 */
import { messageOf } from '../../lib/errors.js';
import { Repeater } from '../../lib/timers.js';
import type { Logger } from '../../lib/log.js';
import type { Store } from '../../store/types.js';
import { cniOf, holderOf } from '../state/holder-keys.js';
import type { Reservation } from '../state/records.js';
import { listPools, listReservations, listSticky } from '../state/ipam-reads.js';

export type ReapReason = 'endpoint gone' | 'container gone' | 'never bound';

/** Whether a CNI attachment's container still exists: true, false (gone), undefined (cannot tell). */
export type CniJudge = (containerId: string, ifname: string) => Promise<boolean | undefined>;

/**
 * Undoes a CNI attachment whose container is gone, as DEL would (endpoint, OVS port, veth,
 * addresses, record), judged again under the attachment's lock: 'removed'; 'alive' when the
 * judgement changed; 'none' when no attachment is recorded (the reservation alone is released).
 */
export type CniRemove = (containerId: string, ifname: string) => Promise<'removed' | 'alive' | 'none'>;

export interface ReapDeps {
  readonly store: Store;
  readonly log: Logger;
  readonly host: string;
  /** OVSNET_REAP_GRACE, in ms. */
  readonly graceMs: number;
  /** Every endpoint record (all hosts): their IDs and addresses (plain form). */
  readonly endpoints: () => Promise<{ readonly ids: ReadonlySet<string>; readonly addresses: ReadonlySet<string> }>;
  /** Subnets (CIDR) of this host's ovsnet networks: the pools where CreateEndpoint binds. */
  readonly driverPools: () => Promise<ReadonlySet<string>>;
  /** Releases the address only if its reservation passes `onlyIf`, judged gone for `reason`; true when released (Ipam.reap). */
  readonly release: (poolId: string, address: string, onlyIf: (r: Reservation) => boolean, reason: ReapReason) => Promise<boolean>;
  /** Counted (ovsnet_ipam_reaped_total). */
  readonly onReaped?: (reason: ReapReason) => void;
  /** The CNI front end's judge of an attachment's container (absent: CNI holders are not judged). */
  readonly cniAlive?: CniJudge;
  /** The CNI front end's removal of a gone container's attachment, whole. */
  readonly cniRemove?: CniRemove;
  readonly now?: () => Date;
}

export interface Reaped {
  readonly poolId: string;
  readonly address: string;
  readonly holder: string;
  readonly reason: ReapReason;
}

/** Sticky records older than this are forgotten: "held recently". */
export const STICKY_KEEP_MS = 24 * 3600_000;

export class Reaper {
  /** Whether an attachment's container exists (absent: CNI holders are not judged); from the deps. */
  cniAlive: CniJudge | undefined;
  /** With cniAlive: a gone container's attachment goes whole, not its address alone; from the deps. */
  cniRemove: CniRemove | undefined;
  private readonly repeater = new Repeater();
  /** Holders judged gone, by reservation: when first seen so. */
  private readonly suspects = new Map<string, number>();
  private readonly now: () => Date;

  constructor(private readonly deps: ReapDeps) {
    this.now = deps.now ?? (() => new Date());
    this.cniAlive = deps.cniAlive;
    this.cniRemove = deps.cniRemove;
  }

  start(intervalMs: number): void {
    this.repeater.start(
      intervalMs,
      () => this.sweep(),
      (err) => this.deps.log.warn({ err }, `reap sweep failed: ${messageOf(err)}; the next one retries`),
    );
  }

  stop(): void {
    this.repeater.stop();
  }

  /** One pass: judges every reservation of this host, releases those whose holder is gone. */
  async sweep(): Promise<Reaped[]> {
    const { store, host, graceMs } = this.deps;
    const [held, listed] = await Promise.all([listReservations(store), listPools(store)]);
    const pools = new Map(listed.map(({ record: p }) => [p.poolId, p.pool]));
    const endpoints = await this.deps.endpoints();
    const driverPools = await this.deps.driverPools();
    const now = this.now().getTime();
    const seen = new Set<string>();
    const reaped: Reaped[] = [];
    for (const r of held) {
      if (r.host !== host || r.kind === 'gateway') continue;
      const holder = holderOf(r);
      // A CNI attachment's endpoint record names its address: it is judged by its container instead.
      const cni = cniOf(holder);
      if (cni === undefined && endpoints.addresses.has(r.address)) continue;
      const reason = await this.judge(r, holder, endpoints.ids, driverPools.has(pools.get(r.poolId) ?? ''), now);
      if (reason === undefined) continue;
      const suspect = `${r.poolId}|${r.address}|${holder}|${r.reservedAt}`;
      seen.add(suspect);
      const since = this.suspects.get(suspect);
      if (since === undefined) this.suspects.set(suspect, now);
      if (since === undefined || now - since < graceMs) continue;
      const same = (cur: Reservation) => cur.host === r.host && cur.reservedAt === r.reservedAt && holderOf(cur) === holder;
      const undone = cni === undefined ? 'none' : ((await this.cniRemove?.(cni.containerId, cni.ifname)) ?? 'none');
      if (undone === 'alive') continue;
      if (undone === 'none' && !(await this.deps.release(r.poolId, r.address, same, reason))) continue;
      this.suspects.delete(suspect);
      this.deps.onReaped?.(reason);
      this.deps.log.warn(
        { poolId: r.poolId, address: r.address, holder, reason, reservedAt: r.reservedAt },
        `released ${r.address}: its holder ${holder} is gone (${reason})`,
      );
      reaped.push({ poolId: r.poolId, address: r.address, holder, reason });
    }
    for (const s of this.suspects.keys()) if (!seen.has(s)) this.suspects.delete(s);
    await this.forgetOldSticky(now);
    return reaped;
  }

  private async judge(
    r: Reservation,
    holder: string,
    ids: ReadonlySet<string>,
    ovsnetPool: boolean,
    now: number,
  ): Promise<ReapReason | undefined> {
    // A CNI attachment by its container (its endpoint, bound or not, goes with the attachment).
    const cni = cniOf(holder);
    // Adopted from host-local and not attached through ovsnet yet: its container is another network's.
    if (cni !== undefined && r.adoptedFrom !== undefined && r.endpoint === undefined) return undefined;
    if (cni !== undefined) return (await this.cniAlive?.(cni.containerId, cni.ifname)) === false ? 'container gone' : undefined;
    if (r.endpoint !== undefined) return ids.has(r.endpoint) ? undefined : 'endpoint gone';
    const container = (holder.startsWith('docker/request/') && r.kind === 'dynamic') || holder.startsWith('docker/name/');
    const age = now - Date.parse(r.reservedAt);
    return container && ovsnetPool && age >= this.deps.graceMs ? 'never bound' : undefined;
  }

  /** Sticky records (release.ts) of this host's pools are kept a day, then forgotten. */
  private async forgetOldSticky(now: number): Promise<void> {
    const old = (await listSticky(this.deps.store)).filter((s) => now - s.releasedAtMs > STICKY_KEEP_MS);
    for (const s of old) await this.deps.store.txn(s.forget);
  }
}
