/**
 * The host end of a container's veth is a switch port, nothing more: it must take no part in the
 * host's IP stack. On the userspace datapath the kernel still sees every frame the container
 * sends (OVS reads the veth through AF_PACKET), and with the defaults it answered a container's
 * ARP for its gateway from the veth's own MAC (arp_ignore 0: any local address, on any
 * interface), so gateway traffic went into the host stack through the veth, where no FORWARD
 * rule accepts it. The settings below, applied over netlink in the same Join step that creates
 * the pair and gone with the veth:
 *
 * - IFF_NOARP (set with the link up, netlink-ops.ts): the kernel drops ARP received there;
 * - IPv4 devconf (IFLA_AF_SPEC / AF_INET): arp_ignore 8 (never reply) and arp_announce 2 should
 *   ARP ever be turned back on, forwarding 0 and rp_filter 1 (no route points at the veth, so
 *   any IP packet arriving there is dropped, not routed or delivered), drop_unicast_in_l2_multicast;
 * - IPv6 (AF_INET6): address generation off, so no link-local address and no part in neighbour
 *   discovery; and disable_ipv6 through /proc/sys where that is writable (a managed plugin's
 *   /proc/sys is read-only: the netlink settings above do not need it).
 *
 * Frames still pass: OVS's kernel datapath takes them before the IP stack, and its userspace
 * datapath reads and writes them over AF_PACKET, which neither setting touches.
 */
import fs from 'node:fs';

const AF_INET = 2;
const AF_INET6 = 10;
const IFLA_INET_CONF = 1;
const IFLA_INET6_ADDR_GEN_MODE = 8;
const IN6_ADDR_GEN_MODE_NONE = 1;

/** IPV4_DEVCONF_* (linux/ip.h) and their values on the host end. */
const IPV4_DEVCONF: ReadonlyArray<readonly [index: number, value: number]> = [
  [1, 0], // FORWARDING
  [8, 1], // RP_FILTER: strict
  [18, 2], // ARP_ANNOUNCE: best local address only
  [19, 8], // ARP_IGNORE: never reply
  [30, 1], // DROP_UNICAST_IN_L2_MULTICAST
];

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
};

/** A netlink attribute builder (netlink-ops.ts's). */
type Attr = (type: number, payload: Buffer) => Buffer;

/** IFLA_AF_SPEC's content for RTM_SETLINK: family -> its attributes. */
export function hostEndIsolation(attr: Attr): Map<number, Buffer> {
  const conf = Buffer.concat(IPV4_DEVCONF.map(([i, v]) => attr(i, u32(v))));
  return new Map([
    [AF_INET, attr(IFLA_INET_CONF | 0x8000, conf)],
    [AF_INET6, attr(IFLA_INET6_ADDR_GEN_MODE, Buffer.from([IN6_ADDR_GEN_MODE_NONE]))],
  ]);
}

/** disable_ipv6 on the host end; skipped where /proc/sys is read-only or IPv6 is absent. */
export function isolateHostEndIpv6(dev: string, procSys = '/proc/sys'): void {
  try {
    fs.writeFileSync(`${procSys}/net/ipv6/conf/${dev}/disable_ipv6`, '1');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EROFS' && code !== 'EACCES' && code !== 'EPERM' && code !== 'ENOENT') throw err;
  }
}
