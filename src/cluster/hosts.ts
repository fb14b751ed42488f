/**
 * The host registry: each ovsnet registers its host under a lease (keys.hosts), keeps it alive
 * and watches the others. A host that stops (or loses the store for longer than the TTL) is
 * gone from every peer within the TTL; a live one that loses its lease registers again.
 *
 * Two machines may not use one host name: a registration held by another machine (another
 * machine id) and still alive is refused. The same machine may take over its own name at once
 * (a restarted ovsnet does not wait for its old lease to expire).
 */
import { OvsnetError, isOvsnetError, messageOf } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import { keepTrying, seconds } from '../lib/timers.js';
import { decodeAll, decodeOrSkip, decodeRecord } from '../store/decode.js';
import { FollowedRecords } from '../store/follow.js';
import { keys } from '../store/keys.js';
import { LeaseKeeper } from './lease-keeper.js';
import { del, get, put, type Store } from '../store/types.js';

export interface HostRecord {
  readonly name: string;
  /** Tunnel endpoint address of the host. */
  readonly vtepIp: string;
  /** /etc/machine-id (or another stable id): tells a restart from a name clash. */
  readonly machineId: string;
  /** MTU of the interface holding vtepIp (VXLAN networks default to it minus 50). */
  readonly tunnelMtu?: number;
  readonly startedAt: string;
}

/** The names registered in the store, for whoever has only a Store (the operator's commands). */
export async function registeredNames(store: Store): Promise<string[]> {
  return (await store.list(keys.hosts)).kvs.map((kv) => kv.key.slice(keys.hosts.length));
}

/** The registrations in the store that decode (a malformed one is skipped and noted). */
export async function registeredHosts(store: Store): Promise<HostRecord[]> {
  return decodeAll((await store.list(keys.hosts)).kvs, (kv) => decodeRecord<HostRecord>(kv.key, kv.value));
}

export interface RegistryOptions {
  readonly store: Store;
  readonly log: Logger;
  readonly self: Omit<HostRecord, 'startedAt'>;
  readonly ttlSeconds: number;
  /**
   * Told after every change of the peer set (the tunnels follow it), with the names whose
   * registration came, went or changed; undefined when any may have (a new snapshot).
   */
  readonly onChange?: (hosts: ReadonlyMap<string, HostRecord>, changed: readonly string[] | undefined) => void;
  readonly now?: () => Date;
}

export class HostRegistry {
  private keeper: LeaseKeeper | undefined;
  private readonly peers: FollowedRecords<HostRecord>;
  /** Aborted by stop(): no registration is retried after it. */
  private readonly stopping = new AbortController();
  /** Peers already warned about for an MTU unlike this host's. */
  private readonly mtuWarned = new Set<string>();

  constructor(private readonly opts: RegistryOptions) {
    this.peers = new FollowedRecords<HostRecord>({
      store: opts.store,
      prefix: keys.hosts,
      log: opts.log,
      what: 'hosts',
      onChange: (names) => this.changed(names),
    });
  }

  /** Registers this host and starts following the others (again after a lost watch). */
  async start(): Promise<void> {
    await this.register();
    await this.peers.start();
  }

  /** Names of the hosts registered now; undefined until the first load. */
  names(): ReadonlySet<string> | undefined {
    return this.peers.loaded ? new Set(this.peers.records.keys()) : undefined;
  }

  private changed(names: readonly string[] | undefined): void {
    const mine = this.opts.self.tunnelMtu;
    for (const [name, peer] of this.peers.records) {
      if (
        name === this.opts.self.name ||
        mine === undefined ||
        peer.tunnelMtu === undefined ||
        peer.tunnelMtu === mine ||
        this.mtuWarned.has(name)
      )
        continue;
      this.mtuWarned.add(name);
      this.opts.log.warn(
        { peer: name, peerMtu: peer.tunnelMtu, mtu: mine },
        `host ${name}'s tunnel interface has MTU ${peer.tunnelMtu}, this host's ${mine}: VXLAN networks default to different MTUs, and packets too big for the smaller one are lost; give the hosts' tunnel interfaces one MTU, or pass -o com.docker.network.driver.mtu`,
      );
    }
    this.opts.onChange?.(this.peers.records, names);
  }

  /** The hosts registered now, this one included. */
  hosts(): ReadonlyMap<string, HostRecord> {
    return this.peers.records;
  }

  /** Stops renewing; with `deregister`, the registration goes at once (else at the TTL). */
  async stop(deregister: boolean): Promise<void> {
    this.stopping.abort();
    await this.peers.stop();
    await this.keeper?.stop(deregister);
  }

  /**
   * Registers again after the lease was lost, retrying until it works: every TTL/3 at most (the
   * keep-alive's cadence), not the usual backoff's 30 s, since meanwhile every peer has dropped
   * this host's tunnels and the reclaim grace period runs (one attempt at a time, each bounded
   * by the store's timeout: a store that answers again sees this host back within TTL/3).
   */
  private registerAgain(): void {
    const cadenceMs = (this.opts.ttlSeconds * 1000) / 3;
    void keepTrying(() => this.register(), {
      initialDelayMs: Math.min(200, cadenceMs),
      maxDelayMs: cadenceMs,
      signal: this.stopping.signal,
      onFailure: (err, delayMs) =>
        this.opts.log.error({ err }, `cannot register again (${messageOf(err)}); retrying in ${seconds(delayMs)}`),
    });
  }

  private async register(): Promise<void> {
    const { store, self, ttlSeconds } = this.opts;
    const key = keys.host(self.name);
    const held = await store.txn({ compares: [], success: [get(key)] });
    // A malformed record under this host's name holds nothing: the registration below rewrites it.
    const other = held.gets[0] === undefined ? undefined : decodeOrSkip<HostRecord>(held.gets[0].key, held.gets[0].value);
    if (other !== undefined && other.machineId !== self.machineId) {
      throw new OvsnetError(
        'HOST_NAME_TAKEN',
        `host name ${self.name} is registered by another machine (${other.machineId.slice(0, 12)}, tunnel address ${other.vtepIp}) that is still alive: give this host another OVSNET_HOST`,
      );
    }
    const keeper = await LeaseKeeper.start(store, ttlSeconds, {
      onLost: (err) => {
        if (this.stopping.signal.aborted) return;
        this.opts.log.warn({ err }, 'host registration lost (the store was unreachable longer than the TTL); registering again');
        this.registerAgain();
      },
      onRetry: (err) => this.opts.log.warn({ err }, 'host keep-alive failed; retrying'),
    });
    const record: HostRecord = { ...self, startedAt: (this.opts.now?.() ?? new Date()).toISOString() };
    try {
      // Back before peers reclaimed its addresses: it keeps them (ipam-driver/recovery/dead-host-reclaim.ts).
      await store.txn({ compares: [], success: [put(key, JSON.stringify(record), keeper.lease), del(keys.departedHost(self.name))] });
    } catch (err) {
      await keeper.stop(true).catch(() => undefined);
      throw isOvsnetError(err)
        ? err
        : new OvsnetError('STORE_UNAVAILABLE', `cannot register host ${self.name}: ${messageOf(err)}`, { cause: err });
    }
    const previous = this.keeper;
    this.keeper = keeper;
    await previous?.stop(false);
    this.opts.log.info({ host: self.name, vtepIp: self.vtepIp, lease: keeper.lease, ttlSeconds }, 'host registered');
  }
}
