/**
 * JSON-RPC 1.0 over a stream socket, as OVSDB speaks it (RFC 7047 §4): messages are JSON
 * values back to back with no framing, requests carry an id, the server may send its own
 * requests ("echo") that must be answered. Every request has a timeout; a lost connection fails
 * the requests in flight and is re-dialled with backoff on the next request.
 *
 * The same protocol serves ovs-vswitchd's control socket (the one ovs-appctl talks to).
 */
import net from 'node:net';
import { expireAfterIo } from '../../lib/timers.js';
import { OvsnetError, messageOf } from '../../lib/errors.js';

export interface RpcOptions {
  /** unix:/path or tcp:host:port */
  readonly target: string;
  readonly timeoutMs: number;
  /** Who answers, for messages ("OVSDB" unless said). */
  readonly peer?: string;
  /** What to check when the socket cannot be reached, for the message. */
  readonly hint?: string;
  /** Called with every request's method, outcome and duration (metrics). */
  readonly observe?: (method: string, ok: boolean, seconds: number) => void;
  /** Called when an open connection is lost (the server went away), not when close() ends it. */
  readonly onLost?: () => void;
}

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
  method: string;
}

/** The peer broke the protocol: the stream cannot be read further (ovsnet drops the connection). */
export class ProtocolError extends Error {}

/** Largest message accepted: a reply listing every port of a big bridge is a few MiB. */
const MAX_MESSAGE = 64 * 1024 * 1024;

/**
 * Splits a byte stream into complete top-level JSON values. Throws ProtocolError for bytes
 * that cannot be one (a value that does not parse, a close with nothing open, a message over
 * MAX_MESSAGE); the splitter is unusable after that.
 */
export class JsonSplitter {
  private buf = '';
  private depth = 0;
  private inString = false;
  private escaped = false;
  private start = 0;
  private scanned = 0;

  push(chunk: string): unknown[] {
    this.buf += chunk;
    const out: unknown[] = [];
    for (let i = this.scanned; i < this.buf.length; i++) {
      const c = this.buf[i];
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === '\\') this.escaped = true;
        else if (c === '"') this.inString = false;
        continue;
      }
      if (c === '"') this.inString = true;
      else if (c === '{' || c === '[') {
        if (this.depth === 0) this.start = i;
        this.depth++;
      } else if (c === '}' || c === ']') {
        if (this.depth === 0) throw new ProtocolError(`a stray ${JSON.stringify(c)} outside any message`);
        this.depth--;
        if (this.depth === 0) out.push(parse(this.buf.slice(this.start, i + 1)));
      }
    }
    if (this.depth > 0 && this.buf.length - this.start > MAX_MESSAGE) {
      throw new ProtocolError(`a message longer than ${MAX_MESSAGE} bytes`);
    }
    if (this.depth === 0) {
      this.buf = '';
      this.scanned = 0;
    } else {
      this.buf = this.buf.slice(this.start);
      this.scanned = this.buf.length;
      this.start = 0;
    }
    return out;
  }
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ProtocolError(`a message that is not JSON (${messageOf(err)}): ${JSON.stringify(text.slice(0, 80))}`);
  }
}

export class JsonRpcClient {
  private socket: net.Socket | undefined;
  private connecting: Promise<net.Socket> | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private backoffMs = 0;
  private closed = false;

  private readonly peer: string;

  constructor(private readonly options: RpcOptions) {
    this.peer = options.peer ?? 'OVSDB';
  }

  async request(method: string, params: unknown[]): Promise<unknown> {
    const observe = this.options.observe;
    if (observe === undefined) return this.send(method, params);
    const t0 = process.hrtime.bigint();
    const seconds = () => Number(process.hrtime.bigint() - t0) / 1e9;
    try {
      const result = await this.send(method, params);
      observe(method, true, seconds());
      return result;
    } catch (err) {
      observe(method, false, seconds());
      throw err;
    }
  }

  private async send(method: string, params: unknown[]): Promise<unknown> {
    const socket = await this.connect();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = expireAfterIo(this.options.timeoutMs, () => {
        if (!this.pending.delete(id)) return; // answered in time after all
        reject(
          new OvsnetError(
            'OVS_UNAVAILABLE',
            `${this.peer} at ${this.options.target} did not answer ${method} within ${this.options.timeoutMs} ms`,
          ),
        );
      });
      this.pending.set(id, { resolve, reject, timer, method });
      socket.write(JSON.stringify({ id, method, params }));
    });
  }

  close(): void {
    this.closed = true;
    this.socket?.destroy();
    this.failAll(new OvsnetError('OVS_UNAVAILABLE', `the ${this.peer} connection was closed`));
  }

  private connect(): Promise<net.Socket> {
    if (this.socket !== undefined) return Promise.resolve(this.socket);
    if (this.closed) return Promise.reject(new OvsnetError('OVS_UNAVAILABLE', `the ${this.peer} connection was closed`));
    this.connecting ??= this.dial().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  private async dial(): Promise<net.Socket> {
    if (this.backoffMs > 0) await new Promise((r) => setTimeout(r, this.backoffMs));
    const { target } = this.options;
    const socket = target.startsWith('unix:')
      ? net.connect(target.slice('unix:'.length))
      : net.connect(Number(target.split(':')[2]), target.split(':')[1]);
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('connect timed out')), this.options.timeoutMs);
        socket.once('connect', () => {
          clearTimeout(timer);
          resolve();
        });
        socket.once('error', (err) => {
          clearTimeout(timer);
          reject(err);
        });
      });
    } catch (err) {
      socket.destroy();
      this.backoffMs = Math.min(Math.max(this.backoffMs * 2, 50), 2000);
      throw new OvsnetError(
        'OVS_UNAVAILABLE',
        `cannot reach ${this.peer} at ${target}: ${messageOf(err)} (${this.options.hint ?? 'is ovsdb-server running? OVSNET_OVSDB names its socket'})`,
        { cause: err },
      );
    }
    this.backoffMs = 0;
    const splitter = new JsonSplitter();
    let gone = false;
    socket.setEncoding('utf8');
    // Nothing thrown here may escape: it would end the process. A peer that breaks the
    // protocol fails the requests in flight; the next request dials again.
    socket.on('data', (chunk: string) => {
      try {
        for (const msg of splitter.push(chunk)) this.dispatch(socket, msg);
      } catch (err) {
        gone = true; // a peer breaking the protocol is not a server gone: no onLost
        socket.destroy();
        if (this.socket === socket) this.socket = undefined;
        this.failAll(
          new OvsnetError(
            'OVS_FAILED',
            `${this.peer} at ${target} sent ${err instanceof ProtocolError ? err.message : `a reply ovsnet cannot read (${messageOf(err)})`}; the connection is dropped and dialled again on the next request`,
            { cause: err },
          ),
        );
      }
    });
    const lost = () => {
      if (this.socket === socket) this.socket = undefined;
      if (!gone && !this.closed) this.options.onLost?.();
      gone = true;
      this.failAll(new OvsnetError('OVS_UNAVAILABLE', `the ${this.peer} connection to ${target} was lost`));
    };
    socket.on('close', lost);
    socket.on('error', lost);
    this.socket = socket;
    return socket;
  }

  private dispatch(socket: net.Socket, value: unknown): void {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return; // not a JSON-RPC message
    const msg = value as Record<string, unknown>;
    if (msg.method === 'echo') {
      socket.write(JSON.stringify({ id: msg.id, result: msg.params, error: null }));
      return;
    }
    if (typeof msg.method === 'string') return; // a notification: ovsnet subscribes to none (no monitor)
    const p = typeof msg.id === 'number' ? this.pending.get(msg.id) : undefined;
    if (p === undefined) return;
    this.pending.delete(msg.id as number);
    clearTimeout(p.timer);
    if (msg.error !== null && msg.error !== undefined) {
      p.reject(
        new OvsnetError(
          'OVS_FAILED',
          `${this.peer} ${p.method} failed: ${typeof msg.error === 'string' ? msg.error.trim() : JSON.stringify(msg.error)}`,
        ),
      );
    } else p.resolve(msg.result);
  }

  private failAll(err: Error): void {
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(err);
      this.pending.delete(id);
    }
  }
}
