/**
 * A read-only client of Docker's Engine API, read-only by construction: it sends GET and nothing
 * else (src/lib/unix-http.ts has no other method), and only to paths this module builds: a
 * network's verbose view (its swarm services, from the cluster's gossip, on managers and workers
 * alike) and the events stream. Every read is bounded (ENGINE_LIMITS); the events stream
 * reconnects with backoff until close().
 */
import { boundedGet, unixGetLines } from '../../lib/unix-http.js';

export const ENGINE_LIMITS = {
  /** A whole answer, connection included. */
  timeoutMs: 3000,
  maxBodyBytes: 8 * 1024 * 1024,
  /** One event of the events stream (Docker's are well under 4 KiB). */
  maxLineBytes: 64 * 1024,
  /** Reconnecting the events stream: the first wait, doubling to the last. */
  backoffFirstMs: 250,
  backoffMaxMs: 5000,
} as const;

/** A path this module built: the only kind get() takes. */
export type EnginePath = string & { readonly __enginePath: true };

/** Docker's network IDs (64 hex) and a swarm network's (swarmkit's 25 base-36 characters). */
const NETWORK_ID = /^(?:[0-9a-f]{64}|[0-9a-z]{25})$/;

/** `GET /networks/{id}?verbose=true`: the network with its swarm services (Services). */
export function networkVerbose(networkId: string): EnginePath {
  if (!NETWORK_ID.test(networkId)) throw new EngineError(`${JSON.stringify(networkId.slice(0, 80))} is not a Docker network ID`);
  return `/networks/${networkId}?verbose=true` as EnginePath;
}

/** The event types ovsnet follows. */
export type EngineEventType = 'network' | 'service' | 'container';
export interface EventFilters {
  readonly type: readonly EngineEventType[];
}

export class EngineError extends Error {
  /** The Engine's HTTP status, when it answered one. */
  readonly status: number | undefined;
  constructor(message: string, options?: { status?: number; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'EngineError';
    this.status = options?.status;
  }
}

export interface EventHandlers {
  /** One event, a JSON object (lines that are not one are dropped). */
  readonly onEvent: (event: Readonly<Record<string, unknown>>) => void;
  /** The stream (re)connected: events may have been missed before. */
  readonly onOpen?: () => void;
  /** The stream ended or failed; it reconnects after `retryMs`. */
  readonly onDrop?: (err: Error | undefined, retryMs: number) => void;
}

/** What the VIP follower asks of the Engine (a test fakes it). */
export interface EngineReader {
  /** The JSON answer of a 200; an EngineError (with `status` when the Engine answered) otherwise. Safe to repeat. */
  get(path: EnginePath): Promise<unknown>;
  /** Follows the events stream until the returned close() (idempotent). */
  events(filters: EventFilters, handlers: EventHandlers): { close(): void };
}

export class Engine implements EngineReader {
  constructor(
    private readonly socket: string,
    private readonly limits: typeof ENGINE_LIMITS | { [K in keyof typeof ENGINE_LIMITS]: number } = ENGINE_LIMITS,
  ) {}

  async get(path: EnginePath): Promise<unknown> {
    let res: { status: number; body: string };
    try {
      res = await boundedGet(this.socket, path, { timeoutMs: this.limits.timeoutMs, maxBytes: this.limits.maxBodyBytes });
    } catch (err) {
      throw new EngineError(err instanceof Error ? err.message : String(err), { cause: err });
    }
    if (res.status !== 200) {
      throw new EngineError(`GET ${path}: the Engine answered status ${res.status}`, { status: res.status });
    }
    try {
      return JSON.parse(res.body) as unknown;
    } catch (err) {
      throw new EngineError(`GET ${path}: the answer is not JSON (${err instanceof Error ? err.message : String(err)})`, {
        status: res.status,
        cause: err,
      });
    }
  }

  events(filters: EventFilters, handlers: EventHandlers): { close(): void } {
    const path = `/events?filters=${encodeURIComponent(JSON.stringify({ type: filters.type }))}`;
    let closed = false;
    let stream: { close(): void } | undefined;
    let retry: NodeJS.Timeout | undefined;
    let delay: number = this.limits.backoffFirstMs;
    const connect = () => {
      let events = 0;
      const openedAt = Date.now();
      stream = unixGetLines(this.socket, path, {
        connectTimeoutMs: this.limits.timeoutMs,
        maxLineBytes: this.limits.maxLineBytes,
        onOpen: () => handlers.onOpen?.(),
        onLine: (line) => {
          const event = parseEvent(line);
          if (event === undefined) return;
          events++;
          handlers.onEvent(event);
        },
        onEnd: (err) => {
          if (closed) return;
          // A stream that carried events or lasted is a good one: the next wait starts over.
          if (events > 0 || Date.now() - openedAt >= this.limits.backoffMaxMs) delay = this.limits.backoffFirstMs;
          const wait = delay;
          delay = Math.min(delay * 2, this.limits.backoffMaxMs);
          handlers.onDrop?.(err, wait);
          retry = setTimeout(connect, wait).unref();
        },
      });
    };
    connect();
    return {
      close: () => {
        closed = true;
        clearTimeout(retry);
        stream?.close();
      },
    };
  }
}

function parseEvent(line: string): Readonly<Record<string, unknown>> | undefined {
  if (line.trim() === '') return undefined;
  try {
    const v = JSON.parse(line) as unknown;
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
