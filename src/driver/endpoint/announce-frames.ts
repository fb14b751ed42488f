/**
 * The frames with which an endpoint announces its addresses, as a host does when it comes up or
 * moves: for IPv4 an ARP announcement (RFC 5227 2.3: a broadcast request whose sender and target
 * address are both the endpoint's), for IPv6 an unsolicited neighbour advertisement to all nodes
 * with the override flag (RFC 4861 7.2.6). A switch that receives one learns where the MAC is;
 * a host that holds an entry for the address takes the MAC in it (Linux updates an entry it has,
 * and makes none). Pure.
 */
import { internetChecksum } from '../../lib/checksum.js';
import { parseCidrAddress } from '../model/addresses.js';

/** The shortest Ethernet frame without its FCS: shorter frames are padded with zeros. */
const MIN_FRAME = 60;

function macBytes(mac: string): Buffer {
  const bytes = Buffer.from(mac.replace(/:/g, ''), 'hex');
  if (bytes.length !== 6 || !/^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i.test(mac))
    throw new RangeError(`${JSON.stringify(mac)} is not a MAC address`);
  return bytes;
}

function ethernet(destination: Buffer, source: Buffer, type: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(14);
  destination.copy(head, 0);
  source.copy(head, 6);
  head.writeUInt16BE(type, 12);
  const frame = Buffer.concat([head, payload]);
  return frame.length >= MIN_FRAME ? frame : Buffer.concat([frame, Buffer.alloc(MIN_FRAME - frame.length)]);
}

/** The ARP announcement of `address` (an IPv4 address, with or without /prefix) at `mac`. */
export function arpAnnouncement(mac: string, address: string): Buffer {
  const sha = macBytes(mac);
  const ip = parseCidrAddress(address.includes('/') ? address : `${address}/32`, 'address');
  if (ip.family !== 4) throw new RangeError(`${address} is not an IPv4 address`);
  const arp = Buffer.alloc(28);
  arp.writeUInt16BE(1, 0); // Ethernet
  arp.writeUInt16BE(0x0800, 2); // IPv4
  arp.writeUInt8(6, 4);
  arp.writeUInt8(4, 5);
  arp.writeUInt16BE(1, 6); // request
  sha.copy(arp, 8);
  ip.bytes.copy(arp, 14); // sender address
  ip.bytes.copy(arp, 24); // target address: the same; target MAC zero
  return ethernet(Buffer.alloc(6, 0xff), sha, 0x0806, arp);
}

const ALL_NODES = Buffer.from('ff020000000000000000000000000001', 'hex');
const ALL_NODES_MAC = Buffer.from('333300000001', 'hex');
const ICMPV6 = 58;

/** The unsolicited neighbour advertisement of `address` (an IPv6 address, with or without /prefix) at `mac`. */
export function neighbourAdvertisement(mac: string, address: string): Buffer {
  const lladdr = macBytes(mac);
  const ip = parseCidrAddress(address.includes('/') ? address : `${address}/128`, 'address');
  if (ip.family !== 6) throw new RangeError(`${address} is not an IPv6 address`);
  const icmp = Buffer.alloc(32);
  icmp.writeUInt8(136, 0); // neighbour advertisement, code 0
  icmp.writeUInt32BE(0x20000000, 4); // override; not a router's, not solicited
  ip.bytes.copy(icmp, 8); // target address
  icmp.writeUInt8(2, 24); // option: target link-layer address, 8 bytes
  icmp.writeUInt8(1, 25);
  lladdr.copy(icmp, 26);
  const pseudo = Buffer.alloc(40);
  ip.bytes.copy(pseudo, 0);
  ALL_NODES.copy(pseudo, 16);
  pseudo.writeUInt32BE(icmp.length, 32);
  pseudo.writeUInt8(ICMPV6, 39);
  icmp.writeUInt16BE(internetChecksum(pseudo, icmp), 2);
  const header = Buffer.alloc(40);
  header.writeUInt32BE(0x60000000, 0);
  header.writeUInt16BE(icmp.length, 4);
  header.writeUInt8(ICMPV6, 6);
  header.writeUInt8(255, 7); // hop limit: receivers drop neighbour discovery with any other
  ip.bytes.copy(header, 8);
  ALL_NODES.copy(header, 24);
  return ethernet(ALL_NODES_MAC, lladdr, 0x86dd, Buffer.concat([header, icmp]));
}
