/**
 * The CNI front end's logic, in the daemon: a container's namespace attached to an existing
 * ovsnet network through the same driver and IPAM calls Docker's requests make (RequestAddress,
 * CreateEndpoint, Join, on the network record it resolved), then the container end configured in the namespace (netns.ts).
 *
 * Every attachment is a record (attachments.ts) written before anything is done and completed
 * after, so that: a repeated ADD gives the same result; DEL undoes exactly what the record says
 * and succeeds for a container never seen; an ADD cut short (the daemon killed) is undone at
 * the next start (recover); GC removes attachments the runtime no longer lists. Commands of one
 * container and interface run one at a time.
 */
import fs from 'node:fs';
import path from 'node:path';
import { OvsnetError, isOvsnetError, messageOf } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import { KeyedLock } from '../lib/locks.js';
import type { NetworkDriver } from '../driver/network-driver.js';
import type { NetworkRecord } from '../driver/model/records.js';
import type { Ipam } from '../ipam-driver/ipam.js';
import type { Store } from '../store/types.js';
import { holders } from '../ipam-driver/state/holder-keys.js';
import { Attachments, endpointIdOf, holderKey, type Attachment, type HeldAddress } from './attachments.js';
import type { NetnsOps } from './netns.js';
import { resolveNetwork, type DockerLookup } from './resolve.js';
import { resultIn, resultOf, type CniCall } from './request.js';

export interface CniDeps {
  readonly store: Store;
  readonly host: string;
  readonly log: Logger;
  readonly driver: Pick<NetworkDriver, 'localNetworks' | 'createEndpointIn' | 'joinResolved' | 'deleteEndpoint'>;
  readonly ipam: Pick<Ipam, 'usage' | 'requestAddress' | 'releaseHolder'>;
  readonly netns: NetnsOps;
  readonly dockerLookup: DockerLookup;
  readonly now?: () => Date;
}

export class CniService {
  readonly attachments: Attachments;
  private readonly locks = new KeyedLock();

  constructor(private readonly deps: CniDeps) {
    this.attachments = new Attachments(deps.store, deps.host);
  }

  /** Runs a checked command; its answer (the result for ADD and CHECK's nothing) or a coded error. */
  async handle(call: CniCall): Promise<Record<string, unknown> | undefined> {
    switch (call.command) {
      case 'ADD':
        return resultIn(await this.locked(call, () => this.add(call)), call.config.cniVersion);
      case 'DEL':
        return void (await this.locked(call, () => this.del(call)));
      case 'CHECK':
        return void (await this.locked(call, () => this.check(call)));
      case 'GC':
        return void (await this.gc(call));
      case 'STATUS':
        return void (await this.attachments.reachable());
    }
  }

  /** Undoes every ADD a previous process left half done ('adding'); at start, retried until the store answers. */
  async recover(): Promise<number> {
    let undone = 0;
    for (const a of await this.attachments.list()) {
      await this.locked(a, async () => {
        const now = await this.attachments.get(a.containerId, a.ifname);
        if (now?.state !== 'adding') return;
        await this.release(now);
        undone++;
        this.deps.log.info({ containerId: a.containerId, ifname: a.ifname }, 'CNI ADD cut short before a restart undone');
      });
    }
    return undone;
  }

  // --- commands --------------------------------------------------------------------------

  private async add(call: CniCall): Promise<Record<string, unknown>> {
    // Checked before anything is done, and held: the interface goes into what was checked.
    const handle = await this.deps.netns.open(call.netns);
    try {
      return await this.addIn(call, handle.path);
    } finally {
      handle.close();
    }
  }

  private async addIn(call: CniCall, via: string): Promise<Record<string, unknown>> {
    const { containerId, ifname, netns } = call;
    const started = performance.now();
    const standing = await this.attachments.get(containerId, ifname);
    if (standing?.state === 'added') {
      if (standing.network !== call.config.network || standing.netns !== netns) {
        throw new OvsnetError(
          'CNI_ATTACHMENT_CONFLICT',
          `container ${containerId.slice(0, 12)} already has ${ifname} on network ${JSON.stringify(standing.network)} in ${standing.netns}: DEL it first, or use another CNI_IFNAME`,
        );
      }
      if (standing.result !== undefined) return standing.result; // the same ADD again: the same answer
    }
    if (standing !== undefined) await this.release(standing); // a half-done ADD (or one with no result): start again
    const network = await resolveNetwork(call.config.network, await this.deps.driver.localNetworks(), this.deps.dockerLookup);
    const pools = this.poolsOf(network, call.config.network);
    let att: Attachment = {
      containerId,
      ifname,
      netns,
      network: call.config.network,
      networkId: network.networkId,
      endpointId: endpointIdOf(this.deps.host, containerId, ifname),
      addresses: [],
      state: 'adding',
      createdAt: (this.deps.now?.() ?? new Date()).toISOString(),
    };
    await this.attachments.put(att);
    try {
      for (const poolId of pools) {
        // Keyed by the attachment: a repeated ADD gets the same address (ipam-driver/allocation/allocator.ts).
        const { address } = await this.deps.ipam.requestAddress({
          poolId,
          address: '',
          gateway: false,
          holder: holders.cni(containerId, ifname),
        });
        att = { ...att, addresses: [...att.addresses, { poolId, address }] };
        await this.attachments.put(att);
      }
      const v4 = att.addresses.find((a) => !a.address.includes(':'))?.address ?? '';
      const v6 = att.addresses.find((a) => a.address.includes(':'))?.address ?? '';
      // The records this ADD resolved and wrote are handed on: the driver reads neither again.
      const created = await this.deps.driver.createEndpointIn(network, {
        networkId: network.networkId,
        endpointId: att.endpointId,
        address: v4,
        addressV6: v6,
        mac: '',
        portmap: [],
      });
      const joined = await this.deps.driver.joinResolved(network, created.endpoint);
      const gateways = [joined.gateway, joined.gatewayV6].filter((g) => g !== '');
      const addresses = att.addresses.map((a) => a.address);
      await this.deps.netns.attach({ netns, via, device: joined.srcName, ifname, addresses, gateways });
      const result = resultOf(att, created.mac ?? '', gateways);
      att = { ...att, state: 'added', result };
      await this.attachments.put(att);
      const ms = Math.round((performance.now() - started) * 10) / 10;
      this.deps.log.info(
        { containerId, ifname, networkId: network.networkId, addresses: att.addresses.map((a) => a.address), ms },
        'CNI attachment added',
      );
      return result;
    } catch (err) {
      await this.release(att).catch((undoErr: unknown) =>
        this.deps.log.error(
          { err: undoErr, containerId },
          `undoing a failed CNI ADD: ${messageOf(undoErr)}; DEL or the next start undoes the rest`,
        ),
      );
      throw err;
    }
  }

  private async del(call: CniCall): Promise<void> {
    const att = await this.attachments.get(call.containerId, call.ifname);
    if (att === undefined) return; // never seen, or deleted already: DEL succeeds (CNI spec)
    await this.release(att);
    this.deps.log.info({ containerId: call.containerId, ifname: call.ifname }, 'CNI attachment deleted');
  }

  private async check(call: CniCall): Promise<void> {
    const att = await this.attachments.get(call.containerId, call.ifname);
    if (att?.state !== 'added') {
      throw new OvsnetError(
        'CNI_CONTAINER_UNKNOWN',
        `container ${call.containerId.slice(0, 12)} has no ovsnet attachment ${call.ifname}: ADD it first`,
      );
    }
    const handle = await this.deps.netns.open(call.netns);
    let problem: string | undefined;
    try {
      problem = await this.deps.netns.problem(
        call.netns,
        call.ifname,
        att.addresses.map((a) => a.address),
        handle.path,
      );
    } finally {
      handle.close();
    }
    if (problem !== undefined)
      throw new OvsnetError('CNI_CHECK_FAILED', `attachment ${call.ifname} of container ${call.containerId.slice(0, 12)}: ${problem}`);
  }

  /** CNI 1.1 GC: this network's attachments the runtime does not list go (parseCall refuses a GC without the list). */
  private async gc(call: CniCall): Promise<void> {
    const valid = new Set((call.config.validAttachments ?? []).map((v) => holderKey(v.containerId, v.ifname)));
    for (const a of await this.attachments.list()) {
      if (a.network !== call.config.network || valid.has(holderKey(a.containerId, a.ifname))) continue;
      await this.locked(a, async () => {
        const now = await this.attachments.get(a.containerId, a.ifname);
        if (now !== undefined) await this.release(now);
      });
      this.deps.log.info({ containerId: a.containerId, ifname: a.ifname }, 'CNI attachment collected (GC)');
    }
  }

  // --- internals -------------------------------------------------------------------------

  /** The ovsnet pools the network's addresses come from (IPv4 first); refused for Docker's own IPAM. */
  private poolsOf(network: NetworkRecord, given: string): string[] {
    const usage = this.deps.ipam.usage();
    const pools: string[] = [];
    for (const data of [network.ipv4[0], network.ipv6[0]]) {
      if (data === undefined) continue;
      const pool = usage.find((u) => u.pool === data.pool);
      if (pool === undefined) {
        throw new OvsnetError(
          'CNI_NETWORK_UNSUPPORTED',
          `network ${JSON.stringify(given)} (${network.networkId.slice(0, 12)}) takes its ${data.pool} addresses from Docker's own IPAM, which CNI cannot ask: create it with --ipam-driver ovsnet`,
        );
      }
      pools.push(pool.poolId);
    }
    return pools;
  }

  /**
   * Undoes an attachment, each step idempotent, in an order that never frees an address twice:
   * the endpoint (OVS port, veth: the container's interface goes with it), then each address
   * dropped from the record before it is released (a crash between leaks it rather than
   * handing it out twice), then the record.
   */
  private async release(att: Attachment): Promise<void> {
    await this.deps.driver.deleteEndpoint(att.networkId, att.endpointId);
    let left: readonly HeldAddress[] = att.addresses;
    for (const held of att.addresses) {
      left = left.filter((a) => a !== held);
      await this.attachments.put({ ...att, addresses: left });
      // By holder: an address this attachment does not hold (any more) is left alone.
      await this.deps.ipam.releaseHolder(holders.cni(att.containerId, att.ifname), held.poolId).catch((err: unknown) => {
        if (!isOvsnetError(err, 'IPAM_POOL_NOT_FOUND')) throw err; // its network and pool are gone: so is the address
      });
    }
    await this.attachments.delete(att);
  }

  /**
   * Whether an attachment's container still exists, for the reaper (ipam-driver/recovery/orphan-reaper.ts): false
   * when no attachment record is left or its network namespace is gone; undefined when that
   * cannot be told from here (the namespace's directory is not visible to this process).
   */
  async alive(containerId: string, ifname: string): Promise<boolean | undefined> {
    const att = await this.attachments.get(containerId, ifname);
    if (att === undefined) return false;
    if (fs.existsSync(att.netns)) return true;
    return fs.existsSync(path.dirname(att.netns)) ? false : undefined;
  }

  /**
   * The reaper's removal of an attachment whose container is gone without a DEL (the runtime
   * crashed, or its DEL found no daemon): judged again under the attachment's lock, then undone
   * as DEL would. 'none' when no attachment is recorded.
   */
  async collect(containerId: string, ifname: string): Promise<'removed' | 'alive' | 'none'> {
    return this.locked({ containerId, ifname }, async () => {
      const att = await this.attachments.get(containerId, ifname);
      if (att === undefined) return 'none';
      if ((await this.alive(containerId, ifname)) !== false) return 'alive';
      await this.release(att);
      this.deps.log.info({ containerId, ifname, netns: att.netns }, 'CNI attachment whose namespace is gone removed');
      return 'removed';
    });
  }

  /** Runs `fn` after every earlier command of the same container and interface. */
  private async locked<T>(key: { containerId: string; ifname: string }, fn: () => Promise<T>): Promise<T> {
    return this.locks.run(holderKey(key.containerId, key.ifname), fn);
  }
}
