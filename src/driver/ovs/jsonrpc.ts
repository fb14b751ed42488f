/**
 * JSON-RPC 1.0 over a stream socket, as OVSDB speaks it (RFC 7047 §4): messages are JSON
 * values back to back with no framing, requests carry an id, the server may send its own
 * requests ("echo") that must be answered. Every request has a timeout; a lost connection fails
 * the requests in flight and is re-dialled with backoff on the next request.
 *
 * The same protocol serves ovs-vswitchd's control socket (the one ovs-appctl talks to).
 */
import net from 'node:net';
import { expireAfterIo } from '../../deadline.js';
import { OvsnetError, messageOf } from '../../errors.js';

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
}

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
  method: string;
}

/** Splits a byte stream into complete top-level JSON values. */
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
        this.depth--;
        if (this.depth === 0) out.push(JSON.parse(this.buf.slice(this.start, i + 1)));
      }
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
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      for (const msg of splitter.push(chunk)) this.dispatch(socket, msg as Record<string, unknown>);
    });
    const lost = () => {
      if (this.socket === socket) this.socket = undefined;
      this.failAll(new OvsnetError('OVS_UNAVAILABLE', `the ${this.peer} connection to ${target} was lost`));
    };
    socket.on('close', lost);
    socket.on('error', lost);
    this.socket = socket;
    return socket;
  }

  private dispatch(socket: net.Socket, msg: Record<string, unknown>): void {
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
