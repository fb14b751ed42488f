/**
 * The internet checksum (RFC 1071): the ones' complement of the ones' complement sum of 16-bit
 * words, over `parts` read as one run of bytes (every part but the last of even length: a
 * pseudo-header, then the message). IPv4 headers, ICMP and ICMPv6 use it. Pure.
 */
export function internetChecksum(...parts: readonly Buffer[]): number {
  let sum = 0;
  for (const b of parts) {
    for (let i = 0; i + 1 < b.length; i += 2) sum += b.readUInt16BE(i);
    if (b.length % 2 === 1) sum += (b[b.length - 1] ?? 0) << 8;
  }
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return ~sum & 0xffff;
}
