/**
 * A joined endpoint announces its addresses: an ARP announcement and an IPv6 neighbour
 * advertisement (announce-frames.ts), given to the bridge as if the container sent them (a
 * PACKET_OUT in by its port, through ovsnet's flow tables, on the bridge's OpenFlow connection:
 * ovs/of-watch.ts). Why: an endpoint's MAC is made from its address, so an address freed on one
 * host and given on another keeps its MAC. A peer that reached it before still has that MAC
 * learned on its tunnel to the first host, which floods it to its local ports only: the address
 * is unreachable from that peer until the entry ages out (300 s). The announcement floods to
 * every peer of the network, whose switch learns the MAC on the right tunnel, and whose
 * containers' neighbour entries take it; on this host's bridge too, where the MAC may be
 * learned on a tunnel.
 *
 * Off Join's path: Join queues the endpoint and returns. The first round, ANNOUNCE_AT_MS after Join
 * (ovs-vswitchd gives a new port its number a moment after it is added), reads the OpenFlow
 * numbers of the ports due in one OVSDB transaction and sends; the second sends again with the
 * number read (a lost first frame), no read. A port OVSDB does not have is forgotten, and so is an
 * endpoint deleted meanwhile (forget(), from DeleteEndpoint): it announces nothing more. Until its
 * number, or the connection, is there it is tried again, for GIVE_UP_MS at most. In a storm of
 * 100 starts, reading at once and again every 20 ms took 3.3 OVSDB transactions per start.
 */
import type { Logger } from '../../lib/log.js';
import { messageOf } from '../../lib/errors.js';
import type { EndpointRecord } from '../model/records.js';
import { OFPP_TABLE, PACKET_OUT_MIN_VERSION, packetOut } from '../ovs/packet-out.js';
import { arpAnnouncement, neighbourAdvertisement } from './announce-frames.js';

/** When each announcement goes, after Join: 0.1 s (the port numbered by then, mostly), and once more. */
export const ANNOUNCE_AT_MS: readonly number[] = [100, 1000];
/** How long a port is waited for (its OpenFlow number, the connection) before it goes unannounced. */
export const GIVE_UP_MS = 5000;
const FIRST_WAIT_MS = 100;
const MAX_WAIT_MS = 500;

export type Announced = Pick<EndpointRecord, 'hostVeth' | 'mac' | 'address' | 'addressV6'>;

export interface AnnouncerDeps {
  readonly log: Logger;
  readonly ovs: {
    /** The OpenFlow number of each interface named that exists (undefined until it has one); names absent: no such interface. */
    ofports(names: readonly string[]): Promise<ReadonlyMap<string, number | undefined>>;
  };
  /** The bridge's OpenFlow connection (undefined: none yet). */
  readonly bridge: () => OpenFlowLink | undefined;
  readonly now?: () => number;
  /** ANNOUNCE_AT_MS and GIVE_UP_MS unless said (tests). */
  readonly timing?: { readonly at: readonly number[]; readonly giveUpMs: number };
}

/** An OpenFlow connection to the bridge (daemon/ovs-watch.ts). */
export interface OpenFlowLink {
  /** Its version (the wire number: 4 is 1.3); undefined while it is down. */
  readonly openflowVersion: number | undefined;
  /** Sends the messages on it; false when it is down. */
  send(messages: readonly Buffer[]): boolean;
}

interface Pending {
  readonly ep: Announced;
  /** Its OpenFlow number, once read. */
  ofport: number | undefined;
  readonly since: number;
  sent: number;
  due: number;
  wait: number;
}

/** The frames announcing the endpoint's addresses. Pure. */
export function announcements(ep: Announced): Buffer[] {
  return [
    ...(ep.address === undefined ? [] : [arpAnnouncement(ep.mac, ep.address)]),
    ...(ep.addressV6 === undefined ? [] : [neighbourAdvertisement(ep.mac, ep.addressV6)]),
  ];
}

export class Announcer {
  private readonly pending = new Map<string, Pending>();
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  private running = false;
  private xid = 0x0a770000;
  private stopped = false;
  /** Announcements sent (each is one frame per address), and endpoints that went unannounced. */
  readonly counts = { sent: 0, unannounced: 0 };

  private readonly at: readonly number[];
  private readonly giveUpMs: number;

  constructor(private readonly deps: AnnouncerDeps) {
    this.now = deps.now ?? Date.now;
    this.at = deps.timing?.at ?? ANNOUNCE_AT_MS;
    this.giveUpMs = deps.timing?.giveUpMs ?? GIVE_UP_MS;
  }

  /** Queues the endpoint's announcements; the one queued before for its port is replaced. */
  announce(ep: Announced): void {
    if (this.stopped || (ep.address === undefined && ep.addressV6 === undefined)) return;
    const now = this.now();
    this.pending.set(ep.hostVeth, { ep, ofport: undefined, since: now, sent: 0, due: now + (this.at[0] ?? 0), wait: FIRST_WAIT_MS });
    this.arm();
  }

  /** Its endpoint was deleted: nothing more is sent for the port. */
  forget(port: string): void {
    this.pending.delete(port);
  }

  /** Endpoints with announcements still to send. */
  get queued(): number {
    return this.pending.size;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.pending.clear();
  }

  private arm(): void {
    if (this.running || this.stopped) return;
    let at = Number.POSITIVE_INFINITY;
    for (const p of this.pending.values()) at = Math.min(at, p.due);
    if (at >= this.timerAt || at === Number.POSITIVE_INFINITY) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => void this.round(), Math.max(0, at - this.now()));
    this.timer.unref();
  }

  private async round(): Promise<void> {
    this.timerAt = Number.POSITIVE_INFINITY;
    this.running = true;
    try {
      const now = this.now();
      const due = [...this.pending.values()].filter((p) => p.due <= now);
      if (due.length > 0) await this.send(due, now);
    } finally {
      this.running = false;
      this.arm();
    }
  }

  private async send(due: readonly Pending[], now: number): Promise<void> {
    const unread = due.filter((p) => p.ofport === undefined).map((p) => p.ep.hostVeth);
    let ofports: ReadonlyMap<string, number | undefined> = new Map();
    try {
      if (unread.length > 0) ofports = await this.deps.ovs.ofports(unread);
    } catch (err) {
      for (const p of due) this.later(p, now, `cannot read its OpenFlow port number: ${messageOf(err)}`);
      return;
    }
    const version = this.deps.bridge()?.openflowVersion;
    for (const p of due) {
      if (this.pending.get(p.ep.hostVeth) !== p) continue; // forgotten, or queued anew, meanwhile
      if (p.ofport === undefined && !ofports.has(p.ep.hostVeth)) {
        this.pending.delete(p.ep.hostVeth); // the port is gone: its endpoint was deleted
        continue;
      }
      const ofport = (p.ofport ??= ofports.get(p.ep.hostVeth));
      if (ofport === undefined) this.later(p, now, 'ovs-vswitchd has given its port no OpenFlow number');
      else if (version === undefined) this.later(p, now, 'the OpenFlow connection to the bridge is down');
      else if (version < PACKET_OUT_MIN_VERSION) this.drop(p, `the bridge's OpenFlow connection speaks version ${version}, under 1.3`);
      else this.sendOne(p, ofport, version, now);
    }
  }

  private sendOne(p: Pending, ofport: number, version: number, now: number): void {
    let messages: Buffer[];
    try {
      messages = announcements(p.ep).map((frame) =>
        packetOut(version, (this.xid = (this.xid + 1) >>> 0), frame, { inPort: ofport, output: OFPP_TABLE }),
      );
    } catch (err) {
      return this.drop(p, messageOf(err));
    }
    if (!(this.deps.bridge()?.send(messages) ?? false)) return this.later(p, now, 'the OpenFlow connection to the bridge is down');
    this.counts.sent += 1;
    p.sent += 1;
    const next = this.at[p.sent];
    if (next === undefined) this.pending.delete(p.ep.hostVeth);
    else p.due = p.since + next;
  }

  /** Tried again after a wait that doubles, until GIVE_UP_MS have passed since Join. */
  private later(p: Pending, now: number, why: string): void {
    if (now - p.since >= this.giveUpMs) return this.drop(p, `${why}, for ${this.giveUpMs / 1000} s`);
    p.due = now + p.wait;
    p.wait = Math.min(p.wait * 2, MAX_WAIT_MS);
  }

  private drop(p: Pending, why: string): void {
    this.pending.delete(p.ep.hostVeth);
    if (p.sent > 0) return; // announced once already
    this.counts.unannounced += 1;
    this.deps.log.warn(
      { port: p.ep.hostVeth, address: p.ep.address, addressV6: p.ep.addressV6 },
      `endpoint port ${p.ep.hostVeth} not announced (${why}): a peer that reached its address on another host reaches it here once its switch forgets the old place (up to 300 s)`,
    );
  }
}
