/**
 * IPv6 on a gateway port. A host with `net.ipv6.conf.default.disable_ipv6=1` (a common
 * hardening) creates every new interface with IPv6 off, and the kernel then refuses the port's
 * IPv6 address with a bare EACCES. As Docker's bridge driver does for its bridge, ovsnet turns
 * IPv6 on for that one port through /proc/sys; where /proc/sys is read-only (a managed plugin's),
 * the refusal names the setting to change.
 */
import fs from 'node:fs';

/** disable_ipv6=0 on `dev` if it was 1; false where that could not be written. */
export function enableIpv6(dev: string, procSys = '/proc/sys'): boolean {
  const file = `${procSys}/net/ipv6/conf/${dev}/disable_ipv6`;
  try {
    if (fs.readFileSync(file, 'utf8').trim() !== '0') fs.writeFileSync(file, '0');
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EROFS' && code !== 'EACCES' && code !== 'EPERM' && code !== 'ENOENT') throw err;
    return false;
  }
}

/** Why the kernel refused an IPv6 address on `dev` with EACCES, and what would do. */
export function ipv6OffReason(dev: string, enabled: boolean): string {
  return (
    `IPv6 is disabled on ${dev} (net.ipv6.conf.${dev}.disable_ipv6=1, which new interfaces take from ` +
    `net.ipv6.conf.default.disable_ipv6)${enabled ? '' : ' and ovsnet cannot change it here (/proc/sys is read-only)'}: ` +
    'set net.ipv6.conf.default.disable_ipv6=0 on the host (sysctl -w), or create the network without --ipv6'
  );
}
