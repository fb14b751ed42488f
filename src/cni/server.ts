/**
 * buildCniServer(deps): the daemon's end of the CNI RPC (protocol.ts), a Fastify instance for
 * the CNI socket (OVSNET_CNI_SOCKET; daemon.ts listens). One route, POST /cni: the request's
 * RPC version is checked first (INCOMPATIBLE_API_VERSION naming both), then the command runs
 * (service.ts) and its answer, or its error as a CNI error object, goes back with 200. The
 * mapping of ovsnet's error codes to CNI's lives here and nowhere else: whatever is only
 * temporary (the store unreachable, the daemon starting, Open vSwitch down) is 11, try again
 * later, with the reason.
 *
 * Its limits (CNI_SOCKET_LIMITS): the socket is root's (0660), but a stuck or hostile client
 * must not hold the daemon's descriptors, so connections are capped and one with no request in
 * flight is closed after a short idle time; a command in flight is never cut (the plugin bounds
 * it at 120 s).
 */
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { isOvsnetError, messageOf, type ErrorCode } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import { requirePackage } from '../lib/packages.js';
import { RPC_VERSION, cniError, type CniCommand, type CniError, type CniErrorName, type RpcAnswer, type RpcRequest } from './protocol.js';
import { parseCall } from './request.js';
import type { CniService } from './service.js';

/** Largest request: a CNI configuration with its prevResult is a few kilobytes. */
const BODY_LIMIT = 1024 * 1024;

/** Bounds of the CNI socket: a runtime opens one connection per command and closes it. */
export const CNI_SOCKET_LIMITS = {
  /** Connections open at once; more are closed at once (a host runs a few CNI commands at a time). */
  maxConnections: 64,
  /** A connection with no request in flight and no traffic for this long is closed. */
  idleTimeoutMs: 10_000,
  /** The request's headers, and the whole request, must arrive within these. */
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 15_000,
} as const;

export type CniSocketLimits = { -readonly [K in keyof typeof CNI_SOCKET_LIMITS]: number };

/** ovsnet's error codes that have a CNI code of their own (others: by kind, below). */
const CNI_CODE_OF: Partial<Record<ErrorCode, CniErrorName>> = {
  CNI_ENV_INVALID: 'INVALID_ENVIRONMENT_VARIABLES',
  CNI_CONFIG_INVALID: 'INVALID_NETWORK_CONFIG',
  CNI_NETWORK_UNSUPPORTED: 'INVALID_NETWORK_CONFIG',
  NETWORK_NOT_FOUND: 'INVALID_NETWORK_CONFIG',
  CNI_ATTACHMENT_CONFLICT: 'INVALID_NETWORK_CONFIG',
  CNI_CONTAINER_UNKNOWN: 'UNKNOWN_CONTAINER',
  CNI_CHECK_FAILED: 'CHECK_INTERFACE_FAILURE',
  CNI_INTERFACE_FAILED: 'CONFIG_INTERFACE_FAILURE',
  LINK_FAILED: 'CONFIG_INTERFACE_FAILURE',
  OVS_FAILED: 'CONFIG_INTERFACE_FAILURE',
};

/** The CNI error for anything a command threw. */
export function cniErrorOf(err: unknown, command: CniCommand | undefined, cniVersion: string): CniError {
  if (!isOvsnetError(err)) return cniError(cniVersion, 'UNKNOWN_RPC_ERROR', `ovsnet failed: ${messageOf(err)}`);
  const text = `${err.message} (${err.code})`;
  // STATUS (CNI 1.1) says "not available" where other commands say "try again".
  if (err.retryable) return cniError(cniVersion, command === 'STATUS' ? 'PLUGIN_NOT_AVAILABLE' : 'TRY_AGAIN_LATER', text);
  const named = CNI_CODE_OF[err.code];
  if (named !== undefined) return cniError(cniVersion, named, text);
  if (err.code.startsWith('IPAM_')) return cniError(cniVersion, 'IPAM_FAILURE', text);
  return cniError(cniVersion, 'CONFIG_INTERFACE_FAILURE', text);
}

export function buildCniServer(service: CniService, log: Logger, given: Partial<CniSocketLimits> = {}): FastifyInstance {
  const limits = { ...CNI_SOCKET_LIMITS, ...given };
  const app = requirePackage('fastify').fastify({
    logger: false,
    bodyLimit: BODY_LIMIT,
    connectionTimeout: limits.idleTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.idleTimeoutMs,
  });
  app.server.maxConnections = limits.maxConnections;
  app.server.headersTimeout = limits.headersTimeoutMs;
  // With a 'timeout' listener Node leaves the socket to it: idle ones go, busy ones stay.
  const busy = new Map<Socket, number>();
  app.server.on('timeout', (socket: Socket) => {
    if ((busy.get(socket) ?? 0) === 0) socket.destroy();
  });
  app.addHook('onRequest', async (request, reply) => {
    const socket = request.raw.socket;
    busy.set(socket, (busy.get(socket) ?? 0) + 1);
    // The response's close: sent, or the connection gone (the request's fires once its body is read).
    reply.raw.once('close', () => {
      const left = (busy.get(socket) ?? 1) - 1;
      if (left <= 0) busy.delete(socket);
      else busy.set(socket, left);
    });
  });
  app.post('/cni', async (request): Promise<RpcAnswer> => {
    const req = (typeof request.body === 'object' && request.body !== null ? request.body : {}) as Partial<RpcRequest>;
    const asked = /"cniVersion"\s*:\s*"([0-9.]+)"/.exec(typeof req.config === 'string' ? req.config : '')?.[1] ?? '1.0.0';
    if (req.rpcVersion !== RPC_VERSION) {
      const why = `the plugin speaks ovsnet CNI RPC version ${JSON.stringify(req.rpcVersion ?? null)}, this daemon version ${RPC_VERSION}: install the plugin of this daemon's ovsnet`;
      return { rpcVersion: RPC_VERSION, error: cniError(asked, 'INCOMPATIBLE_API_VERSION', why) };
    }
    const started = performance.now();
    try {
      const call = parseCall(req);
      const result = await service.handle(call);
      log.debug({ command: call.command, containerId: call.containerId, ms: performance.now() - started }, 'CNI command done');
      return { rpcVersion: RPC_VERSION, ...(result === undefined ? {} : { result }) };
    } catch (err) {
      const error = cniErrorOf(err, req.command, asked);
      log.warn({ command: req.command, containerId: req.containerId, code: error.code }, `CNI ${String(req.command)} failed: ${error.msg}`);
      return { rpcVersion: RPC_VERSION, error };
    }
  });
  // A body that is not JSON, or too large: a CNI error too, never Fastify's own.
  app.setErrorHandler((err, _request, reply) => {
    const error = cniError('1.0.0', 'DECODING_FAILURE', `the CNI request is not one ovsnet reads: ${messageOf(err)}`);
    void reply.code(200).send({ rpcVersion: RPC_VERSION, error } satisfies RpcAnswer);
  });
  return app;
}
