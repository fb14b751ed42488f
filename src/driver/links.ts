/**
 * Kernel links over netlink (rtnetlink for links and addresses, the ethtool generic netlink
 * family for offloads), through the `netlink` package: no process spawned per step. A Join
 * costs two netlink round trips here (bench/driver.ts) where `ip` + `ethtool` cost ~10 ms.
 *
 * Owner of the netlink sockets. Idempotency: deleteLink treats a missing link as done;
 * createVeth fails if a link of that name exists (the caller deletes first).
 */
import { Worker } from 'node:worker_threads';
import type { GenericNetlinkSocket, RtNetlinkSocket } from 'netlink';
import { OvsnetError, messageOf } from '../errors.js';

/** Loaded on first use, not at start: the plugin socket must answer Docker first. */
type NetlinkModule = typeof import('netlink');
let netlinkModule: Promise<NetlinkModule> | undefined;
const netlink = (): Promise<NetlinkModule> => (netlinkModule ??= import('netlink').then((m) => ((m as { default?: NetlinkModule }).default ?? m)));

// Attribute numbers from linux/if_link.h, linux/veth.h and linux/ethtool_netlink.h.
const IFLA_ADDRESS = 1;
const IFLA_IFNAME = 3;
const IFLA_MTU = 4;
const IFLA_INFO_KIND = 1;
const IFLA_INFO_DATA = 2;
const VETH_INFO_PEER = 1;
const ETHTOOL_MSG_FEATURES_SET = 12;
const ETHTOOL_A_FEATURES_HEADER = 1;
const ETHTOOL_A_FEATURES_WANTED = 3;
const ETHTOOL_A_HEADER_DEV_NAME = 2;
const ETHTOOL_A_BITSET_BITS = 3;
const ETHTOOL_A_BITSET_BITS_BIT = 1;
const ETHTOOL_A_BITSET_BIT_NAME = 2;
const NLM_F_CREATE = 0x400;
const NLM_F_EXCL = 0x200;

/** `ethtool -K DEV tx off`: every transmit checksum feature; the kernel then drops TSO. */
const TX_CHECKSUM_FEATURES = ['tx-checksum-ipv4', 'tx-checksum-ip-generic', 'tx-checksum-ipv6', 'tx-checksum-sctp'];

/** A netlink attribute: length, type, payload, padded to 4 bytes. */
function attr(type: number, payload: Buffer): Buffer {
  const len = 4 + payload.length;
  const b = Buffer.alloc(len + ((4 - (len % 4)) % 4));
  b.writeUInt16LE(len, 0);
  b.writeUInt16LE(type, 2);
  payload.copy(b, 4);
  return b;
}
const nested = (type: number, parts: Buffer[]) => attr(type | 0x8000, Buffer.concat(parts));
const cstr = (s: string) => Buffer.from(`${s}\0`);
const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
};
export const macBytes = (mac: string) => Buffer.from(mac.split(':').map((h) => parseInt(h, 16)));

export interface VethSpec {
  readonly host: string;
  readonly container: string;
  readonly mtu: number;
  /** MAC of the container end. */
  readonly mac?: string;
}

export class Links {
  private socketsPromise: Promise<{ nl: NetlinkModule; rtnl: RtNetlinkSocket; genl: GenericNetlinkSocket }> | undefined;
  private ethtoolFamily: Promise<number> | undefined;
  /** link-worker.ts, started on the first deletion; replies by request id. */
  private deleter: { worker: Worker; pending: Map<number, (error: string | undefined) => void>; nextId: number } | undefined;

  private sockets() {
    return (this.socketsPromise ??= netlink().then((nl) => ({ nl, rtnl: nl.createRtNetlink(), genl: nl.createGenericNetlink() })));
  }

  close(): void {
    void this.deleter?.worker.terminate();
    void this.socketsPromise?.then(({ rtnl, genl }) => {
      rtnl.socket.close();
      genl.socket.close();
    });
  }

  /**
   * Both ends with their MTU in one RTM_NEWLINK, then the host end up. (Up cannot be asked in
   * the NEWLINK itself: the kernel opens the peer before pairing it and fails with ENOTCONN.)
   * The container end is brought up by Docker once it is in the container.
   */
  async createVeth(spec: VethSpec): Promise<void> {
    const { nl, rtnl } = await this.sockets();
    const peer = Buffer.concat([
      nl.rt.formatLink({}),
      attr(IFLA_IFNAME, cstr(spec.container)),
      attr(IFLA_MTU, u32(spec.mtu)),
      ...(spec.mac === undefined ? [] : [attr(IFLA_ADDRESS, macBytes(spec.mac))]),
    ]);
    const linkinfo = Buffer.concat([attr(IFLA_INFO_KIND, cstr('veth')), nested(IFLA_INFO_DATA, [attr(VETH_INFO_PEER, peer)])]);
    await this.call(`create veth ${spec.host}/${spec.container}`, () =>
      rtnl.newLink({}, { ifname: spec.host, mtu: spec.mtu, linkinfo }, { flags: NLM_F_CREATE | NLM_F_EXCL }),
    );
    await this.call(`set ${spec.host} up`, () => rtnl.setLink({ flags: { up: true }, change: { up: true } }, { ifname: spec.host }));
  }

  /** Transmit checksum offload off (needed on the userspace datapath, or TCP fails). */
  async disableTxChecksum(dev: string): Promise<void> {
    const { nl, genl } = await this.sockets();
    this.ethtoolFamily ??= genl
      .ctrlRequest(nl.genl.Commands.GET_FAMILY, { familyName: 'ethtool' })
      .then((m) => {
        const id = m[0]?.familyId;
        if (id === undefined) throw new Error('the kernel has no ethtool netlink family');
        return id;
      });
    const family = await this.ethtoolFamily;
    const bits = TX_CHECKSUM_FEATURES.map((n) => nested(ETHTOOL_A_BITSET_BITS_BIT, [attr(ETHTOOL_A_BITSET_BIT_NAME, cstr(n))]));
    const data = Buffer.concat([
      nested(ETHTOOL_A_FEATURES_HEADER, [attr(ETHTOOL_A_HEADER_DEV_NAME, cstr(dev))]),
      // A bitset with a mask: bits listed without a VALUE flag are turned off.
      nested(ETHTOOL_A_FEATURES_WANTED, [nested(ETHTOOL_A_BITSET_BITS, bits)]),
    ]);
    await this.call(`disable tx checksum on ${dev}`, () => genl.request(family, ETHTOOL_MSG_FEATURES_SET, 1, [data]));
  }

  /**
   * Deletes a link by name (its veth peer goes with it); a missing link is success. Sent from
   * link-worker.ts's thread: the kernel's ~20 ms for a veth would stall this one.
   */
  async deleteLink(name: string): Promise<void> {
    const error = await this.deleteOnWorker(name);
    if (error === undefined || errnoOf(error) === 'ENODEV') return;
    throw new OvsnetError('LINK_FAILED', `cannot delete link ${name}: ${error}`);
  }

  private deleteOnWorker(name: string): Promise<string | undefined> {
    if (this.deleter === undefined) {
      const worker = new Worker(new URL('./link-worker.js', import.meta.url));
      const d = { worker, pending: new Map<number, (error: string | undefined) => void>(), nextId: 1 };
      worker.on('message', (m: { id: number; error?: string }) => {
        d.pending.get(m.id)?.(m.error);
        d.pending.delete(m.id);
        if (d.pending.size === 0) worker.unref();
      });
      const fail = (why: string) => {
        if (this.deleter === d) this.deleter = undefined; // the next deletion starts a new one
        for (const done of d.pending.values()) done(`the link worker ${why}`);
        d.pending.clear();
      };
      worker.on('error', (err) => fail(`failed: ${messageOf(err)}`));
      worker.on('exit', (code) => fail(`exited (${code})`));
      this.deleter = d;
    }
    const d = this.deleter;
    const id = d.nextId++;
    d.worker.ref();
    return new Promise((resolve) => {
      d.pending.set(id, resolve);
      d.worker.postMessage({ id, name });
    });
  }

  async exists(name: string): Promise<boolean> {
    return (await this.index(name)) !== undefined;
  }

  /** Names of the host's links starting with `prefix`. */
  async list(prefix: string): Promise<string[]> {
    const { rtnl } = await this.sockets();
    const links = await this.call('list links', () => rtnl.getLinks());
    return links.map((l) => l.attrs.ifname ?? '').filter((n) => n.startsWith(prefix));
  }

  /** Sets MTU and up, and makes `cidr` (e.g. 10.1.0.1/24) the link's address; idempotent. */
  async configureAddress(name: string, family: 4 | 6, address: Buffer, prefixLength: number, mtu: number): Promise<void> {
    const { rtnl } = await this.sockets();
    const index = await this.index(name);
    if (index === undefined) throw new OvsnetError('LINK_FAILED', `link ${name} does not exist`);
    await this.call(`set ${name} up`, () => rtnl.setLink({ index, flags: { up: true }, change: { up: true } }, { mtu }));
    try {
      await rtnl.newAddress(
        { family: family === 4 ? 2 : 10, prefixlen: prefixLength, index },
        { local: address, address },
        { flags: NLM_F_CREATE | NLM_F_EXCL },
      );
    } catch (err) {
      if (errnoOf(err) !== 'EEXIST') throw new OvsnetError('LINK_FAILED', `cannot add an address to ${name}: ${messageOf(err)}`, { cause: err });
    }
  }

  private async index(name: string): Promise<number | undefined> {
    const { rtnl } = await this.sockets();
    try {
      const [link] = await rtnl.getLink({}, { ifname: name });
      return link?.data.index;
    } catch (err) {
      if (errnoOf(err) === 'ENODEV') return undefined;
      throw new OvsnetError('LINK_FAILED', `cannot look up link ${name}: ${messageOf(err)}`, { cause: err });
    }
  }

  private async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw new OvsnetError('LINK_FAILED', `cannot ${what}: ${messageOf(err)}`, { cause: err });
    }
  }
}

/** The errno of a netlink rejection; the package only gives it as text ("Request rejected: ENODEV"). */
function errnoOf(err: unknown): string | undefined {
  return /Request rejected: (E[A-Z]+|-?\d+)/.exec(messageOf(err))?.[1];
}
