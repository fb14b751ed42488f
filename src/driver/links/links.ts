/**
 * Kernel links, for the driver: veth pairs, offloads, addresses. Every operation is sent to
 * link-worker.ts's thread, which talks netlink (netlink-ops.ts); this thread only waits for
 * the answer, so a request stuck on the kernel's RTNL lock never stalls other Docker calls.
 * The worker starts on first use (the plugin socket must answer Docker first) and is started
 * again if it dies; a request it was holding then fails.
 *
 * Every request is bounded (timeoutMs): one the worker has not answered by then fails with
 * LINK_FAILED naming the operation. The worker is left running (terminating it mid-call would
 * abort the process, see close()); the kernel finishes the call eventually, its late answer
 * is dropped, and whatever it made is found and tidied by reconcile like any leftover.
 */
import { Worker } from 'node:worker_threads';
import { OvsnetError, messageOf } from '../../lib/errors.js';
import { LinkError } from './link-error.js';
import type { LinkOp, LinkOps, LinkReply, LinkRequest } from './link-worker.js';
import type { VethSpec } from './netlink-ops.js';
import type { SpareNames } from './spare-ops.js';

export type { VethSpec } from './netlink-ops.js';

type Pending = (reply: LinkReply) => void;

/** Bound on a link request: RTNL waits under load are tens of ms, a Docker call's own budget seconds. */
const LINK_TIMEOUT_MS = 10_000;

/**
 * The worker's own V8 heap, kept small: it holds one request and its netlink messages at a time.
 * Its young generation is what it would otherwise commit (Node's default lets each isolate's
 * grow to 3 x 16 MiB); 2 MiB is scavenged more often, each time cheaply. The old generation is
 * bounded far above anything it keeps (a dump of every link, aliased(), is some hundreds of
 * bytes per link): a worker over it ends with ERR_WORKER_OUT_OF_MEMORY, its request fails, and
 * the next request starts a new one (thread()).
 */
export const LINK_WORKER_LIMITS = { maxYoungGenerationSizeMb: 2, maxOldGenerationSizeMb: 128 } as const;

export interface LinksOptions {
  /** Bound on each request (LINK_TIMEOUT_MS unless said). */
  readonly timeoutMs?: number;
  /** The worker's module (link-worker.js unless said; tests give a stand-in). */
  readonly worker?: URL;
}

export class Links {
  private worker: { thread: Worker; pending: Map<number, Pending>; nextId: number } | undefined;
  private closed = false;

  constructor(private readonly options: LinksOptions = {}) {}

  /** Lets the worker close its sockets and end (terminating it would abort the process). */
  async close(): Promise<void> {
    this.closed = true;
    const w = this.worker;
    this.worker = undefined;
    if (w === undefined) return;
    const ended = new Promise((r) => w.thread.once('exit', r));
    w.thread.ref();
    w.thread.postMessage('close');
    await ended;
  }

  /**
   * Both ends with their MTU (and the container end's MAC), the host end up; optionally a
   * leftover of the same name deleted first and transmit checksum offload off: one message.
   */
  async createVeth(spec: VethSpec): Promise<void> {
    await this.request('createVeth', [spec]);
  }

  /** Deletes a link by name (its veth peer goes with it); a missing link is success. */
  async deleteLink(name: string): Promise<void> {
    await this.request('deleteLink', [name]);
  }

  /** Parks a released pair as the spare `spare` (spare-ops.ts); false when the two are not a pair. */
  parkVeth(host: string, container: string, spare: SpareNames, alias: string): Promise<boolean> {
    return this.request('parkVeth', [host, container, spare, alias]);
  }

  /** As createVeth, from the parked spare `spare` (spare-ops.ts); a failure leaves neither pair. */
  async adoptVeth(spare: SpareNames, spec: VethSpec): Promise<void> {
    await this.request('adoptVeth', [spare, spec]);
  }

  async exists(name: string): Promise<boolean> {
    return (await this.request('index', [name])) !== undefined;
  }

  /** The link's alias ('' for none); undefined when no link has that name. */
  alias(name: string): Promise<string | undefined> {
    return this.request('alias', [name]);
  }

  /** The host's links whose alias starts with `prefix`. */
  aliased(prefix: string): Promise<{ name: string; alias: string }[]> {
    return this.request('aliased', [prefix]);
  }

  /** Sets MTU and up, and gives the link `address`/`prefixLength`; idempotent. */
  async configureAddress(name: string, family: 4 | 6, address: Buffer, prefixLength: number, mtu: number): Promise<void> {
    await this.request('configureAddress', [name, family, address, prefixLength, mtu]);
  }

  private request<K extends LinkOp>(op: K, args: LinkOps[K]['args']): Promise<LinkOps[K]['result']> {
    if (this.closed) return Promise.reject(new OvsnetError('LINK_FAILED', `cannot ${op}: ovsnet is stopping`));
    const w = this.thread();
    const id = w.nextId++;
    w.thread.ref();
    const timeoutMs = this.options.timeoutMs ?? LINK_TIMEOUT_MS;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        if (!w.pending.delete(id)) return;
        if (w.pending.size === 0) w.thread.unref();
        reject(
          new OvsnetError(
            'LINK_FAILED',
            `cannot ${op}: the link worker did not answer within ${timeoutMs} ms (the kernel's RTNL lock held long by another process?); the change may still happen, and reconcile removes what it leaves`,
          ),
        );
      }, timeoutMs);
      w.pending.set(id, (reply) => {
        clearTimeout(timer);
        if (reply.error === undefined) resolve(reply.result as LinkOps[K]['result']);
        else reject(new LinkError(reply.error.what, reply.error.detail));
      });
      w.thread.postMessage({ id, op, args } satisfies LinkRequest<K>);
    });
  }

  private thread() {
    if (this.worker !== undefined) return this.worker;
    const thread = new Worker(this.options.worker ?? new URL('./link-worker.js', import.meta.url), { resourceLimits: LINK_WORKER_LIMITS });
    const w = { thread, pending: new Map<number, Pending>(), nextId: 1 };
    thread.on('message', (reply: LinkReply) => {
      w.pending.get(reply.id)?.(reply);
      w.pending.delete(reply.id);
      if (w.pending.size === 0) thread.unref(); // an idle worker keeps no process alive
    });
    const fail = (why: string) => {
      if (this.worker === w) this.worker = undefined; // the next request starts a new one
      for (const [id, done] of w.pending) done({ id, error: { what: 'reach the link worker', detail: why } });
      w.pending.clear();
    };
    thread.on('error', (err) => fail(`it failed: ${messageOf(err)}`));
    thread.on('exit', (code) => fail(`it exited (${code})`));
    this.worker = w;
    return w;
  }
}
