/**
 * The RPC between the CNI plugin (client.ts, the `ovsnet` binary a runtime executes) and the
 * daemon (server.ts), and the CNI error codes both give. Shared by both sides and imports
 * nothing, so that the client stays a small file that starts fast.
 *
 * The client sends one JSON request per CNI command (POST /cni on the daemon's CNI socket,
 * OVSNET_CNI_SOCKET); the daemon answers 200 with the CNI result, or the CNI error object.
 * Both carry the RPC version: a daemon and client whose versions differ answer
 * INCOMPATIBLE_API_VERSION naming both (after Antrea's cniserver: a version the daemon does not
 * speak is never half understood).
 */

/** This RPC's version; any change to the request or answer shapes is a new one. */
export const RPC_VERSION = '1';

/** The CNI spec versions ovsnet's plugin speaks (VERSION's supportedVersions). */
export const CNI_VERSIONS = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;

/**
 * CNI error codes: 1-99 the spec's own (11: try again later), 100+ the plugin's, numbered as
 * Antrea's CNI RPC numbers them.
 */
export const CNI_ERRORS = {
  INCOMPATIBLE_CNI_VERSION: 1,
  UNSUPPORTED_FIELD: 2,
  UNKNOWN_CONTAINER: 3,
  INVALID_ENVIRONMENT_VARIABLES: 4,
  IO_FAILURE: 5,
  DECODING_FAILURE: 6,
  INVALID_NETWORK_CONFIG: 7,
  TRY_AGAIN_LATER: 11,
  /** STATUS (CNI 1.1): the plugin cannot serve ADD now. */
  PLUGIN_NOT_AVAILABLE: 50,
  IPAM_FAILURE: 101,
  CONFIG_INTERFACE_FAILURE: 102,
  CHECK_INTERFACE_FAILURE: 103,
  UNKNOWN_RPC_ERROR: 201,
  INCOMPATIBLE_API_VERSION: 202,
} as const;

export type CniErrorName = keyof typeof CNI_ERRORS;

/** The CNI error object a plugin prints on stdout (exit status 1). */
export interface CniError {
  readonly cniVersion: string;
  readonly code: number;
  /** Starts with the code's name (e.g. "TRY_AGAIN_LATER: ..."): the runtime shows only msg. */
  readonly msg: string;
  readonly details?: string;
}

export type CniCommand = 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'STATUS';

/** One CNI command as the runtime gave it: its environment, and stdin unparsed. */
export interface RpcRequest {
  readonly rpcVersion: string;
  readonly command: CniCommand;
  readonly containerId: string;
  readonly netns: string;
  readonly ifname: string;
  /** CNI_ARGS as given (KEY=VALUE;...). */
  readonly args: string;
  readonly path: string;
  /** The network configuration, as read from stdin. */
  readonly config: string;
}

/** The daemon's answer: `result` to print (absent for DEL, GC, STATUS) or `error`. */
export interface RpcAnswer {
  readonly rpcVersion: string;
  readonly result?: Record<string, unknown>;
  readonly error?: CniError;
}

/** A CNI error with its code's name leading the message. */
export function cniError(cniVersion: string, name: CniErrorName, msg: string, details?: string): CniError {
  return { cniVersion, code: CNI_ERRORS[name], msg: `${name}: ${msg}`, ...(details === undefined ? {} : { details }) };
}

/** The daemon's CNI socket unless the configuration names one: beside the plugin socket. */
export const DEFAULT_CNI_SOCKET = '/run/docker/plugins/ovsnet.cni';
