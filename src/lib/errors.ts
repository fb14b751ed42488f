/**
 * The one error catalogue. Every error a user can meet has a stable code, a kind and a
 * message naming the bad value and what would be valid. Kinds map to HTTP status in exactly
 * one place (src/plugin-api); foreign errors are converted where they enter, kept as `cause`.
 */

export type ErrorKind = 'InvalidParameter' | 'NotFound' | 'Conflict' | 'Unavailable' | 'Forbidden' | 'System';

export const ERROR_CODES = {
  CONFIG_INVALID: 'InvalidParameter',
  STORE_URL_INVALID: 'InvalidParameter',
  STORE_UNAVAILABLE: 'Unavailable',
  STORE_TIMEOUT: 'Unavailable',
  STORE_COMPACTED: 'Conflict',
  STORE_LEASE_NOT_FOUND: 'NotFound',
  STORE_CLOSED: 'Unavailable',
  STORE_FORBIDDEN: 'Forbidden',
  STORE_CORRUPT: 'System',
  STORE_RECORD_INVALID: 'System',
  STORE_LAYOUT_NEWER: 'System',
  STORE_INVALID_REQUEST: 'InvalidParameter',
  REQUEST_INVALID: 'InvalidParameter',
  NOT_READY: 'Unavailable',
  IPAM_ADDRESS_SPACE_INVALID: 'InvalidParameter',
  IPAM_POOL_INVALID: 'InvalidParameter',
  IPAM_POOL_OVERLAP: 'Conflict',
  IPAM_POOL_NOT_FOUND: 'NotFound',
  IPAM_GROUP_NO_PARENT: 'NotFound',
  IPAM_NO_FREE_POOL: 'Conflict',
  IPAM_OPTION_INVALID: 'InvalidParameter',
  IPAM_ADDRESS_INVALID: 'InvalidParameter',
  IPAM_ADDRESS_TAKEN: 'Conflict',
  IPAM_POOL_EXHAUSTED: 'Conflict',
  IPAM_ADOPT_SOURCE_INVALID: 'InvalidParameter',
  SUBNET_INVALID: 'InvalidParameter',
  SUBNET_HOST_OVERLAP: 'Conflict',
  OVS_UNAVAILABLE: 'Unavailable',
  OVS_FAILED: 'System',
  LINK_FAILED: 'System',
  NAT_FAILED: 'System',
  PORT_IN_USE: 'Conflict',
  PORT_UNSUPPORTED: 'InvalidParameter',
  NETWORK_OPTION_INVALID: 'InvalidParameter',
  NETWORK_NOT_FOUND: 'NotFound',
  NETWORK_GROUP_EXISTS: 'Conflict',
  NETWORK_EXISTS: 'Conflict',
  ENDPOINT_NOT_FOUND: 'NotFound',
  ENDPOINT_INVALID: 'InvalidParameter',
  TAG_TAKEN: 'Conflict',
  TAGS_EXHAUSTED: 'Conflict',
  HOST_NAME_TAKEN: 'Conflict',
  LOGICAL_NETWORK_MISMATCH: 'Conflict',
  LOGICAL_NETWORK_INVALID: 'InvalidParameter',
  SWARM_UNSUPPORTED: 'InvalidParameter',
  SWARM_NOT_ALLOCATED: 'NotFound',
  CNI_ENV_INVALID: 'InvalidParameter',
  CNI_CONFIG_INVALID: 'InvalidParameter',
  CNI_API_VERSION: 'InvalidParameter',
  CNI_NETWORK_UNSUPPORTED: 'InvalidParameter',
  CNI_ATTACHMENT_CONFLICT: 'Conflict',
  CNI_CONTAINER_UNKNOWN: 'NotFound',
  CNI_INTERFACE_FAILED: 'System',
  CNI_CHECK_FAILED: 'System',
  UPLINK_INVALID: 'InvalidParameter',
  SOCKET_PATH_INVALID: 'InvalidParameter',
  STATE_FILE_UNSAFE: 'InvalidParameter',
  TRACE_TARGET_NOT_FOUND: 'NotFound',
  TRACE_REQUEST_INVALID: 'InvalidParameter',
  TRACE_PEER_SILENT: 'Unavailable',
  TRACE_PEER_FAILED: 'System',
} as const satisfies Record<string, ErrorKind>;

export type ErrorCode = keyof typeof ERROR_CODES;

export class OvsnetError extends Error {
  readonly code: ErrorCode;
  readonly kind: ErrorKind;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'OvsnetError';
    this.code = code;
    this.kind = ERROR_CODES[code];
  }

  /** Transient failures a caller may retry (Antrea's TRY_AGAIN_LATER). */
  get retryable(): boolean {
    return this.kind === 'Unavailable';
  }
}

export function isOvsnetError(err: unknown, code?: ErrorCode): err is OvsnetError {
  return err instanceof OvsnetError && (code === undefined || err.code === code);
}

/** A readable message from anything thrown. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
