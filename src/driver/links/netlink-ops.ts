/**
 * Kernel links over netlink (rtnetlink for links and addresses, the ethtool generic netlink
 * family for offloads), through the `netlink` package: no process spawned per step. These run
 * on link-worker.ts's thread, never on the main one: rtnetlink handles a request inside the
 * sending syscall, under the kernel's RTNL lock, which dockerd holds too while it moves
 * interfaces between namespaces; a request there can wait tens of milliseconds (a veth's
 * deletion waits for an RCU grace period, ~20 ms), and on the main thread that wait stalled
 * every call ovsnet was answering.
 *
 * Idempotency: deleteLink treats a missing link as done; createVeth fails with EEXIST if a
 * link of that name exists, unless it is the endpoint's own leftover and `replace` is asked.
 */
import { errnoOf } from './link-error.js';
import type { GenericNetlinkSocket, RtNetlinkSocket } from 'netlink';
import { enableIpv6, ipv6OffReason } from './gateway-ipv6.js';
import { hostEndIsolation, isolateHostEndIpv6 } from './host-end.js';
import { adoptVeth, parkVeth, type SpareNames } from './spare-ops.js';
import { requirePackage } from '../../lib/packages.js';

type NetlinkModule = typeof import('netlink');

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
const macBytes = (mac: string) => Buffer.from(mac.split(':').map((h) => parseInt(h, 16)));

export interface VethSpec {
  readonly host: string;
  readonly container: string;
  readonly mtu: number;
  /** MAC of the container end. */
  readonly mac?: string;
  /**
   * When a link of the host end's name exists, replace it if it is a leftover of an earlier
   * attempt (it carries `alias`). Looked up only when the create finds the name taken.
   */
  readonly replace?: boolean;
  /** Transmit checksum offload off on the container end (the userspace datapath needs it). */
  readonly txChecksumOff?: boolean;
  /**
   * The host end's alias (IFLA_IFALIAS), set with its up step (the kernel ignores an alias in
   * RTM_NEWLINK): how ovsnet knows its own links again. With `replace`, a leftover is deleted
   * only when it carries this alias; a link of that name without it is someone else's.
   */
  readonly alias?: string;
}

/** A failed step: what was being done, and the netlink error text ("Request rejected: ENODEV"). */
export class NetlinkStepError extends Error {
  constructor(
    readonly what: string,
    readonly detail: string,
  ) {
    super(`cannot ${what}: ${detail}`);
  }
}

const textOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

export class NetlinkOps {
  private ethtoolFamily: Promise<number> | undefined;

  private constructor(
    private readonly nl: NetlinkModule,
    private readonly rtnl: RtNetlinkSocket,
    private readonly genl: GenericNetlinkSocket,
  ) {}

  static open(): NetlinkOps {
    const nl = requirePackage('netlink');
    return new NetlinkOps(nl, nl.createRtNetlink(), nl.createGenericNetlink());
  }

  close(): void {
    this.rtnl.socket.close();
    this.genl.socket.close();
  }

  /**
   * Both ends with their MTU in one RTM_NEWLINK, then the host end up. (Up cannot be asked in
   * the NEWLINK itself: the kernel opens the peer before pairing it and fails with ENOTCONN.)
   * The container end is brought up by Docker once it is in the container. All of a Join's
   * link work is this one call (one message to the worker); a failure deletes the pair again.
   */
  async createVeth(spec: VethSpec): Promise<void> {
    try {
      await this.newVeth(spec);
    } catch (err) {
      // A link of the name exists: the one leftover replace takes is this endpoint's own (its
      // alias), and only then is it looked up at all; any other holder's EEXIST goes back.
      if (!(spec.replace === true && err instanceof NetlinkStepError && errnoOf(err.detail) === 'EEXIST')) throw err;
      if (spec.alias !== undefined && (await this.alias(spec.host)) !== spec.alias) throw err;
      await this.deleteLink(spec.host);
      await this.newVeth(spec);
    }
  }

  private async newVeth(spec: VethSpec): Promise<void> {
    const peer = Buffer.concat([
      this.nl.rt.formatLink({}),
      attr(IFLA_IFNAME, cstr(spec.container)),
      attr(IFLA_MTU, u32(spec.mtu)),
      ...(spec.mac === undefined ? [] : [attr(IFLA_ADDRESS, macBytes(spec.mac))]),
    ]);
    const linkinfo = Buffer.concat([attr(IFLA_INFO_KIND, cstr('veth')), nested(IFLA_INFO_DATA, [attr(VETH_INFO_PEER, peer)])]);
    await step(`create veth ${spec.host}/${spec.container}`, () =>
      this.rtnl.newLink({}, { ifname: spec.host, mtu: spec.mtu, linkinfo }, { flags: NLM_F_CREATE | NLM_F_EXCL }),
    );
    try {
      // Before up, so the host end never gets an IPv6 link-local address (host-end.ts).
      await step(`isolate ${spec.host} from the host's IP stack`, () =>
        this.rtnl.setLink({}, { ifname: spec.host, afSpec: hostEndIsolation(attr) }),
      );
      isolateHostEndIpv6(spec.host);
      // The alias marks the link as ovsnet's (reconcile deletes only such links); the kernel
      // ignores an alias in the create message, so it is set here.
      const alias = spec.alias === undefined ? {} : { ifalias: spec.alias };
      await step(`set ${spec.host} up`, () =>
        this.rtnl.setLink({ flags: { up: true, noarp: true }, change: { up: true, noarp: true } }, { ifname: spec.host, ...alias }),
      );
      if (spec.txChecksumOff === true) await this.disableTxChecksum(spec.container);
    } catch (err) {
      await this.deleteLink(spec.host).catch(() => undefined);
      throw err;
    }
  }

  /** Parks a released pair as a spare (spare-ops.ts); false when the two are not a pair here. */
  parkVeth(host: string, container: string, spare: SpareNames, alias: string): Promise<boolean> {
    return parkVeth(this.rtnl, host, container, spare, alias);
  }

  /** createVeth's result from a parked spare (spare-ops.ts); a failure leaves neither pair. */
  async adoptVeth(spare: SpareNames, spec: VethSpec): Promise<void> {
    if (spec.replace === true && (spec.alias === undefined || (await this.alias(spec.host)) === spec.alias))
      await this.deleteLink(spec.host);
    await adoptVeth(this.rtnl, spare, spec);
    if (spec.txChecksumOff === true)
      await this.disableTxChecksum(spec.container).catch(async (err: unknown) => {
        await this.deleteLink(spec.host).catch(() => undefined);
        throw err;
      });
  }

  /** `ethtool -K DEV tx off` (without it TCP fails on the userspace datapath). */
  private async disableTxChecksum(dev: string): Promise<void> {
    this.ethtoolFamily ??= this.genl.ctrlRequest(this.nl.genl.Commands.GET_FAMILY, { familyName: 'ethtool' }).then((m) => {
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
    await step(`disable tx checksum on ${dev}`, () => this.genl.request(family, ETHTOOL_MSG_FEATURES_SET, 1, [data]));
  }

  /** Deletes a link by name (its veth peer goes with it); a missing link is success. */
  async deleteLink(name: string): Promise<void> {
    try {
      await this.rtnl.delLink({}, { ifname: name });
    } catch (err) {
      if (errnoOf(textOf(err)) !== 'ENODEV') throw new NetlinkStepError(`delete link ${name}`, textOf(err));
    }
  }

  /** The link's index, or undefined when there is none of that name. */
  async index(name: string): Promise<number | undefined> {
    try {
      const [link] = await this.rtnl.getLink({}, { ifname: name });
      return link?.data.index;
    } catch (err) {
      if (errnoOf(textOf(err)) === 'ENODEV') return undefined;
      throw new NetlinkStepError(`look up link ${name}`, textOf(err));
    }
  }

  /** The link's alias ('' when it has none), or undefined when there is no link of that name. */
  async alias(name: string): Promise<string | undefined> {
    try {
      const [link] = await this.rtnl.getLink({}, { ifname: name });
      return link === undefined ? undefined : (link.attrs.ifalias ?? '');
    } catch (err) {
      if (errnoOf(textOf(err)) === 'ENODEV') return undefined;
      throw new NetlinkStepError(`look up link ${name}`, textOf(err));
    }
  }

  /** The host's links whose alias starts with `prefix`, with their alias. */
  async aliased(prefix: string): Promise<{ name: string; alias: string }[]> {
    const links = await step('list links', () => this.rtnl.getLinks());
    return links
      .map((l) => ({ name: l.attrs.ifname ?? '', alias: l.attrs.ifalias ?? '' }))
      .filter((l) => l.name !== '' && l.alias.startsWith(prefix));
  }

  /**
   * Sets MTU and up, and gives the link `address`/`prefixLength`; idempotent. An IPv6 address
   * gets IPv6 turned on first (gateway-ipv6.ts) and no duplicate address detection: IPAM made
   * it unique, and DAD would leave it unanswering ("tentative") for the first second or two,
   * when containers started right after the network lose their first packets to the gateway.
   */
  async configureAddress(name: string, family: 4 | 6, address: Buffer, prefixLength: number, mtu: number): Promise<void> {
    const index = await this.index(name);
    if (index === undefined) throw new NetlinkStepError(`configure link ${name}`, 'it does not exist');
    const enabled = family === 6 && enableIpv6(name);
    await step(`set ${name} up`, () => this.rtnl.setLink({ index, flags: { up: true }, change: { up: true } }, { mtu }));
    try {
      await this.rtnl.newAddress(
        { family: family === 4 ? 2 : 10, prefixlen: prefixLength, index },
        { local: address, address, ...(family === 6 ? { flags: { nodad: true as const } } : {}) },
        { flags: NLM_F_CREATE | NLM_F_EXCL },
      );
    } catch (err) {
      const errno = errnoOf(textOf(err));
      if (errno === 'EACCES' && family === 6) throw new NetlinkStepError(`add an address to ${name}`, ipv6OffReason(name, enabled));
      if (errno !== 'EEXIST') throw new NetlinkStepError(`add an address to ${name}`, textOf(err));
    }
  }
}

async function step<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw new NetlinkStepError(what, textOf(err));
  }
}
