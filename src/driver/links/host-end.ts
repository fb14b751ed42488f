/**
 * The host end of a container's veth is a switch port, nothing more: no part in the host's IP
 * stack (on the userspace datapath the kernel otherwise answered a container's ARP for its
 * gateway from the veth, and its traffic went into the host stack: docs/networks.md). Applied
 * over netlink in the Join step that creates the pair, gone with the veth: IFF_NOARP (set with
 * the link up, netlink-ops.ts); IPv4 devconf arp_ignore 8, arp_announce 2, forwarding 0,
 * rp_filter 1, drop_unicast_in_l2_multicast; IPv6 address generation off, and disable_ipv6
 * through /proc/sys where writable (a managed plugin's is read-only; netlink does not need it).
 * Frames still pass: OVS takes them before the IP stack (kernel datapath) or over AF_PACKET
 * (userspace), which neither setting touches.
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
