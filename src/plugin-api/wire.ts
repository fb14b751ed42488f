/**
 * Docker's remote plugin protocol, as Docker names it (moby libnetwork
 * ipams/remote/api/api.go, drivers/remote/api/api.go). Types only, with the validation that
 * turns an untrusted body into one of them; messages name the field and the expected form.
 */
import { isIP } from 'node:net';
import { checkAddress, checkIfname, invalid, shown, type Body } from './forms.js';

export const PLUGIN_ACCEPT = 'application/vnd.docker.plugins.v1.2+json';

/** Plugin.Activate */
export interface ActivateResponse {
  Implements: ('NetworkDriver' | 'IpamDriver')[];
}

/** IpamDriver.GetCapabilities */
export interface IpamCapabilitiesResponse {
  RequiresMACAddress: boolean;
  RequiresRequestReplay: boolean;
}

/** IpamDriver.GetDefaultAddressSpaces */
export interface DefaultAddressSpacesResponse {
  LocalDefaultAddressSpace: string;
  GlobalDefaultAddressSpace: string;
}

/** IpamDriver.RequestPool: Pool "" means "you choose"; Options are --ipam-opt. */
export interface RequestPoolRequest {
  AddressSpace: string;
  Pool: string;
  SubPool: string;
  Options: Record<string, string>;
  V6: boolean;
}
export interface RequestPoolResponse {
  PoolID: string;
  Pool: string;
  Data: Record<string, string>;
}

/** IpamDriver.ReleasePool */
export interface ReleasePoolRequest {
  PoolID: string;
}

/** IpamDriver.RequestAddress: Address "" means "you choose". */
export interface RequestAddressRequest {
  PoolID: string;
  Address: string;
  Options: Record<string, string>;
}
export interface RequestAddressResponse {
  /** CIDR form: "10.10.0.9/16". */
  Address: string;
  Data: Record<string, string>;
}

/** IpamDriver.ReleaseAddress */
export interface ReleaseAddressRequest {
  PoolID: string;
  Address: string;
}

/** Docker's option keys that IPAM reads. */
export const REQUEST_ADDRESS_TYPE = 'RequestAddressType';
export const GATEWAY_ADDRESS_TYPE = 'com.docker.network.gateway';
export const ENDPOINT_NAME = 'com.docker.network.endpoint.name';

// --- validation ----------------------------------------------------------------------------

/** The body as an object; `mutating` calls refuse an empty one (a retried request may be). */
export function bodyOf(method: string, body: unknown, mutating: boolean): Body {
  if (body === undefined || body === null || body === '') {
    if (mutating) throw invalid(method, 'the request body is empty; expected a JSON object');
    return {};
  }
  if (typeof body !== 'object' || Array.isArray(body)) throw invalid(method, 'the request body must be a JSON object');
  return body as Body;
}

export function str(method: string, b: Body, field: string, opts: { required?: boolean } = {}): string {
  const v = b[field];
  if (v === undefined || v === null) {
    if (opts.required === true) throw invalid(method, `${field} is missing; expected a non-empty string`);
    return '';
  }
  if (typeof v !== 'string') throw invalid(method, `${field} must be a string, got ${shown(v)}`);
  if (opts.required === true && v === '') throw invalid(method, `${field} is empty; expected a non-empty string`);
  return v;
}

export function bool(method: string, b: Body, field: string): boolean {
  const v = b[field];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw invalid(method, `${field} must be true or false, got ${shown(v)}`);
  return v;
}

/** A map of string options; Docker sends null for none. Non-string values are refused. */
export function stringMap(method: string, b: Body, field: string): Record<string, string> {
  const v = b[field];
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw invalid(method, `${field} must be an object of strings`);
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v as Record<string, unknown>)) {
    if (typeof val !== 'string') throw invalid(method, `${field}.${k} must be a string, got ${shown(val)}`);
    out[k] = val;
  }
  return out;
}

/** An object of any values (NetworkDriver options mix strings, booleans and objects). */
export function objectOf(method: string, b: Body, field: string): Record<string, unknown> {
  const v = b[field];
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw invalid(method, `${field} must be an object`);
  return v as Record<string, unknown>;
}

// --- NetworkDriver --------------------------------------------------------------------------

/** NetworkDriver.GetCapabilities */
export interface NetworkCapabilitiesResponse {
  Scope: 'local' | 'global';
  ConnectivityScope: 'local' | 'global';
  /** Engine 28+ (moby#49372) then sends GwAllocCheck before allocating a network's addresses; older engines ignore it. */
  GwAllocChecker: boolean;
}

/**
 * NetworkDriver.GwAllocCheck's answer (Engine 28+): true when Docker need not reserve a gateway
 * address of that family (it still reserves one given with --gateway). Request: {Options}, of
 * CreateNetwork's form.
 */
export interface GwAllocCheckResponse {
  SkipIPv4: boolean;
  SkipIPv6: boolean;
}

/** One IPv4Data / IPv6Data entry of CreateNetwork: CIDR strings; Gateway may be absent. */
export interface IPAMData {
  AddressSpace: string;
  Pool: string;
  Gateway?: string;
  AuxAddresses?: Record<string, string>;
}

/** CreateEndpoint's Interface: fields Docker already set must never be echoed back. */
export interface EndpointInterface {
  Address: string;
  AddressIPv6: string;
  MacAddress: string;
}

/**
 * Join's answer. DstName (the exact name in the container) is in moby's remote API, but no engine
 * up to 29 reads it from a remote driver (drivers/remote/driver.go passes "" for it): DstPrefix
 * stays, so that the container gets DstPrefix + index wherever DstName is not honoured.
 */
export interface JoinResponse {
  InterfaceName: { SrcName: string; DstPrefix: string; DstName?: string };
  Gateway: string;
  GatewayIPv6: string;
  StaticRoutes: { Destination: string; RouteType: number; NextHop: string }[];
  DisableGatewayService: boolean;
}

/** Options key of port mappings in CreateEndpoint, Join and ProgramExternalConnectivity. */
export const PORTMAP = 'com.docker.network.portmap';
/** CreateEndpoint's option of the interface name asked for (Engine 28+, moby#49155; compose interface_name). */
export const ENDPOINT_IFNAME = 'com.docker.network.endpoint.ifname';
/** CreateNetwork's (and GwAllocCheck's) flag: false for an IPv6-only network (Engine 28+, moby#48271). */
export const ENABLE_IPV4 = 'com.docker.network.enable_ipv4';

/** The endpoint's interface name asked for in CreateEndpoint's Options, or undefined. */
export function ifnameOf(method: string, options: Record<string, unknown>): string | undefined {
  const v = options[ENDPOINT_IFNAME];
  return v === undefined || v === null ? undefined : checkIfname(method, `Options.${ENDPOINT_IFNAME}`, v);
}

/**
 * Whether the network has IPv4 (Docker sends the flag from Engine 28; absent means true). An
 * IPv6-only network comes without IPv4Data: one with both is refused.
 */
export function ipv4Enabled(method: string, options: Record<string, unknown>, ipv4Data: number): boolean {
  const v = options[ENABLE_IPV4];
  if (v === undefined || v === null) return true;
  if (typeof v !== 'boolean') throw invalid(method, `Options.${ENABLE_IPV4} must be true or false, got ${shown(v)}`);
  if (!v && ipv4Data > 0) {
    throw invalid(
      method,
      `Options.${ENABLE_IPV4} is false but IPv4Data has ${ipv4Data} entries; expected no IPv4Data for an IPv6-only network`,
    );
  }
  return v;
}

export function ipamData(method: string, b: Body, field: string): IPAMData[] {
  const v = b[field];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw invalid(method, `${field} must be an array`);
  return v.map((item: unknown, i) => {
    if (item === null || typeof item !== 'object') throw invalid(method, `${field}[${i}] must be an object`);
    const o = item as Body;
    const at = `${field}[${i}].`;
    const gateway = checkAddress(method, `${at}Gateway`, str(method, o, 'Gateway'), 'CIDR', true);
    // Aux addresses are IPAM's business (a driver only sees them); their form is still checked.
    for (const [name, aux] of Object.entries(stringMap(method, o, 'AuxAddresses'))) {
      checkAddress(method, `${at}AuxAddresses.${name}`, aux, 'CIDR', false);
    }
    return {
      AddressSpace: str(method, o, 'AddressSpace'),
      Pool: checkAddress(method, `${at}Pool`, str(method, o, 'Pool', { required: true }), 'CIDR', false),
      ...(gateway === '' ? {} : { Gateway: gateway }),
    };
  });
}

const PROTOS: Record<number, 'tcp' | 'udp' | 'sctp'> = { 6: 'tcp', 17: 'udp', 132: 'sctp' };

/**
 * Docker's PortBinding list ({Proto: 6, Port, HostIP, HostPort, HostPortEnd}), every field
 * checked: Docker sends HostPort 0 for `-p 80` (any free port) and HostPort..HostPortEnd for
 * `-p 8000-8010:80` (one free port of the range). HostPortEnd 0 means HostPort alone.
 */
export function portmapOf(
  method: string,
  options: Record<string, unknown>,
): { proto: 'tcp' | 'udp' | 'sctp'; containerPort: number; hostIp: string; hostPort: number; hostPortEnd: number }[] {
  const v = options[PORTMAP];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw invalid(method, `Options.${PORTMAP} must be an array of port bindings`);
  return v.map((item: unknown, i) => {
    const at = `Options.${PORTMAP}[${i}]`;
    if (item === null || typeof item !== 'object' || Array.isArray(item)) throw invalid(method, `${at} must be an object`);
    const o = item as Body;
    const proto = typeof o.Proto === 'number' ? PROTOS[o.Proto] : undefined;
    if (proto === undefined) throw invalid(method, `${at}.Proto must be 6 (tcp), 17 (udp) or 132 (sctp), got ${shown(o.Proto)}`);
    const port = portNumber(method, `${at}.Port`, o.Port, 1);
    const hostPort = o.HostPort === undefined || o.HostPort === null ? 0 : portNumber(method, `${at}.HostPort`, o.HostPort, 0);
    const rawEnd = o.HostPortEnd === undefined || o.HostPortEnd === null ? 0 : portNumber(method, `${at}.HostPortEnd`, o.HostPortEnd, 0);
    if (hostPort === 0 && rawEnd !== 0) {
      throw invalid(method, `${at}.HostPortEnd is ${rawEnd} with HostPort 0; expected HostPortEnd 0 (any free port) or a HostPort from 1`);
    }
    const hostPortEnd = rawEnd === 0 ? hostPort : rawEnd;
    if (hostPortEnd < hostPort) {
      throw invalid(
        method,
        `${at}.HostPortEnd ${hostPortEnd} is below HostPort ${hostPort}; expected a range HostPort-HostPortEnd, low to high`,
      );
    }
    return { proto, containerPort: port, hostIp: hostIpOf(method, `${at}.HostIP`, o.HostIP), hostPort, hostPortEnd };
  });
}

function portNumber(method: string, field: string, v: unknown, min: 0 | 1): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > 65535) {
    throw invalid(method, `${field} must be an integer from ${min} to 65535, got ${shown(v)}`);
  }
  return v;
}

/** "" (every address), or one IPv4 or IPv6 address literal: never a name, list or zone. */
function hostIpOf(method: string, field: string, v: unknown): string {
  if (v === undefined || v === null || v === '') return '';
  if (typeof v !== 'string' || isIP(v) === 0 || v.includes('%')) {
    throw invalid(method, `${field} must be an IPv4 or IPv6 address (or empty for every address), got ${shown(v)}`);
  }
  return v;
}
