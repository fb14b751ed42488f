/**
 * Docker's bridge-driver options (`-o com.docker.network.bridge.*`), which users copy over to
 * ovsnet networks. Honoured where ovsnet has the same thing: enable_ip_masquerade=false (no
 * masquerade out of the network, IPv4 nor IPv6: the outside must route the subnets back), host_binding_ipv4 (the
 * host address published ports take when -p names none), enable_icc=true|false (false: the
 * network's containers cannot reach each other at all, only the gateway and through it the host
 * and the outside: network/icc-flows.ts). Every other one is refused, naming what ovsnet has
 * instead: silently ignoring it would leave a network not doing what its creator asked.
 */
import { OvsnetError } from '../../lib/errors.js';

const PREFIX = 'com.docker.network.bridge.';

export interface BridgeOptions {
  /** false: no MASQUERADE rule for the network's subnets, IPv4 or IPv6. */
  readonly masquerade: boolean;
  /** Host address of published ports without one; undefined = every address. */
  readonly hostBinding: string | undefined;
  /** false: no traffic between the network's containers (enable_icc=false); true by default. */
  readonly icc: boolean;
}

/** What ovsnet has instead of each bridge option it does not honour. */
const INSTEAD: Readonly<Record<string, string>> = {
  name: 'every ovsnet network is a VLAN of one Open vSwitch bridge, named by the OVSNET_BRIDGE setting; -o ovsnet.tag=N chooses the VLAN',
  default_bridge: "ovsnet networks are never Docker's default bridge",
  inhibit_ipv4: 'ovsnet gives the gateway address to its gateway port; leave the gateway out with --internal',
  gateway_mode_ipv4: 'use com.docker.network.bridge.enable_ip_masquerade=false for a routed (not NATed) network',
  gateway_mode_ipv6:
    'ovsnet masquerades IPv6 as it does IPv4 (NAT66, as Docker does by default); use com.docker.network.bridge.enable_ip_masquerade=false for a routed (not NATed) network, both families',
  container_iface_prefix: "Docker names the container's interfaces; ovsnet names only the host ends",
  trusted_host_interfaces: 'ovsnet networks are isolated from every other network on the host',
};

const HONOURED = 'enable_ip_masquerade=true|false, host_binding_ipv4=an IPv4 address of the host, enable_icc=true|false';

const invalid = (message: string) => new OvsnetError('NETWORK_OPTION_INVALID', message);

const IPV4 = /^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$/;

export function parseBridgeOptions(text: (key: string) => string | undefined, keys: readonly string[]): BridgeOptions {
  for (const key of keys) {
    if (!key.startsWith(PREFIX)) continue;
    const name = key.slice(PREFIX.length);
    if (name === 'enable_ip_masquerade' || name === 'host_binding_ipv4' || name === 'enable_icc') continue;
    const instead = INSTEAD[name] ?? `ovsnet has no such option (it honours ${HONOURED})`;
    throw invalid(
      `-o ${key}${text(key) === undefined ? '' : `=${text(key) ?? ''}`} is a bridge-driver option ovsnet does not honour: ${instead}`,
    );
  }
  const masq = text(`${PREFIX}enable_ip_masquerade`);
  if (masq !== undefined && masq !== 'true' && masq !== 'false')
    throw invalid(`-o ${PREFIX}enable_ip_masquerade=${masq} is not valid: expected true or false`);
  const icc = text(`${PREFIX}enable_icc`);
  if (icc !== undefined && icc !== 'true' && icc !== 'false')
    throw invalid(`-o ${PREFIX}enable_icc=${icc} is not valid: expected true or false`);
  const binding = text(`${PREFIX}host_binding_ipv4`);
  if (binding !== undefined && !IPV4.test(binding))
    throw invalid(
      `-o ${PREFIX}host_binding_ipv4=${binding} is not valid: expected an IPv4 address of this host, e.g. 192.0.2.10 (0.0.0.0 = every address)`,
    );
  return {
    masquerade: masq !== 'false',
    hostBinding: binding === undefined || binding === '0.0.0.0' ? undefined : binding,
    icc: icc !== 'false',
  };
}
