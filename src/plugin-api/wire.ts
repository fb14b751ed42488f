/**
 * Docker's remote plugin protocol, as Docker names it (moby libnetwork
 * ipams/remote/api/api.go, drivers/remote/api/api.go). Types only, with the validation that
 * turns an untrusted body into one of them; messages name the field and the expected form.
 */
import { OvsnetError } from '../errors.js';

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

type Body = Record<string, unknown>;

function invalid(method: string, message: string): OvsnetError {
  return new OvsnetError('REQUEST_INVALID', `${method}: ${message}`);
}

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
  if (typeof v !== 'string') throw invalid(method, `${field} must be a string, got ${JSON.stringify(v)}`);
  if (opts.required === true && v === '') throw invalid(method, `${field} is empty; expected a non-empty string`);
  return v;
}

export function bool(method: string, b: Body, field: string): boolean {
  const v = b[field];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw invalid(method, `${field} must be true or false, got ${JSON.stringify(v)}`);
  return v;
}

/** A map of string options; Docker sends null for none. Non-string values are refused. */
export function stringMap(method: string, b: Body, field: string): Record<string, string> {
  const v = b[field];
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw invalid(method, `${field} must be an object of strings`);
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v as Record<string, unknown>)) {
    if (typeof val !== 'string') throw invalid(method, `${field}.${k} must be a string, got ${JSON.stringify(val)}`);
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
