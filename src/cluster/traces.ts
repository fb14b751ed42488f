/**
 * `ovsnet trace` across hosts: the half of a packet's way on a peer's bridge. A packet that
 * leaves through a VXLAN tunnel is traced on this host up to the tunnel; the CLI then asks the
 * peer's ovsnet to trace what arrives there, through the store both share:
 *
 * - the CLI grants a lease (30 s) and puts a request under the peer's prefix
 *   (`traces/requests/PEER/ID`: the packet as ofproto/trace's flow syntax, who asks);
 * - the peer's daemon (TraceAnswerer) follows its prefix, checks the flow field by field
 *   (checkTraceFlow: only the fields ovsnet's trace writes, each value of its own form), runs
 *   ofproto/trace on its bridge, which only simulates (no packet is sent, nothing changes), and
 *   puts the answer (`traces/answers/ID`) under the request's lease, beside the port listing
 *   (dpif/show) that names the datapath's ports;
 * - the CLI reads the answer and revokes the lease: both keys go (with the lease if it dies).
 *
 * This module owns the `traces/` keys. Bounds: a request of at most 1 KiB, 5 answered a second
 * (more are left to expire, logged once a minute), an answer of at most 256 KiB.
 */
import { randomUUID } from 'node:crypto';
import { formatAddress, parseAddress } from '../lib/cidr.js';
import { OvsnetError, messageOf } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import { Follower } from '../store/follow.js';
import { keys, part } from '../store/keys.js';
import { del, modRevisionIs, put, type KeyValue, type Store } from '../store/types.js';

const requests = keys.traceRequests;
const answer = keys.traceAnswer;

export const MAX_REQUEST = 1024;
export const MAX_ANSWER = 256 * 1024;
const PER_SECOND = 5;
const LEASE_SECONDS = 30;
/** ofproto/trace resumes conntrack this many times, each as a new connection (as on this host). */
export const CT_NEXT = Array.from({ length: 8 }, () => ['--ct-next', 'trk,new']).flat();

export interface TraceAnswer {
  /** ofproto/trace's text. */
  readonly trace: string;
  /** dpif/show's text: the datapath's port numbers by name. */
  readonly ports: string;
  readonly bridge: string;
}

const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;
const PORT_NAME = /^[A-Za-z0-9_.-]{1,15}$/;
const WORDS = new Set(['ip', 'ipv6', 'tcp', 'udp', 'icmp', 'tcp6', 'udp6', 'icmp6']);
const int = (max: number) => (v: string) => /^\d{1,10}$/.test(v) && Number(v) <= max;
const address = (family: 4 | 6) => (v: string) => {
  try {
    const a = parseAddress(v);
    return a.family === family && formatAddress(a.family, a.value) === v;
  } catch {
    return false;
  }
};
/** Every field ovsnet's trace may send a peer, with the form of its value. */
const FIELDS: Readonly<Record<string, (v: string) => boolean>> = {
  in_port: (v) => PORT_NAME.test(v),
  tun_id: int(0xffffff),
  tun_src: address(4),
  tun_dst: address(4),
  dl_src: (v) => MAC.test(v),
  dl_dst: (v) => MAC.test(v),
  nw_src: address(4),
  nw_dst: address(4),
  ipv6_src: address(6),
  ipv6_dst: address(6),
  tp_src: int(65535),
  tp_dst: int(65535),
  icmp_type: int(255),
  icmp_code: int(255),
  tcp_flags: (v) => v === 'syn',
};

/** The flow if every part of it is one ovsnet's trace writes; refused naming the part otherwise. */
export function checkTraceFlow(flow: unknown): string {
  const refuse = (why: string) =>
    new OvsnetError(
      'TRACE_REQUEST_INVALID',
      `trace request refused: ${why}; expected comma-separated fields (${[...WORDS].join(', ')}, ${Object.keys(FIELDS).join(', ')}) with their values`,
    );
  if (typeof flow !== 'string' || flow === '') throw refuse('no flow');
  if (flow.length > MAX_REQUEST) throw refuse(`a flow of ${flow.length} characters (at most ${MAX_REQUEST})`);
  const seen = new Set<string>();
  for (const item of flow.split(',')) {
    const eq = item.indexOf('=');
    const key = eq < 0 ? item : item.slice(0, eq);
    const ok = eq < 0 ? WORDS.has(item) : FIELDS[key]?.(item.slice(eq + 1)) === true;
    if (!ok || seen.has(key)) throw refuse(`${JSON.stringify(item.slice(0, 64))} is not one of its fields, or not of its form`);
    seen.add(key);
  }
  return flow;
}

/** CLI side: asks `peer`'s ovsnet to trace `flow` on its bridge; its answer, or why there is none. */
export async function tracePeer(store: Store, peer: string, from: string, flow: string, timeoutMs = 5000): Promise<TraceAnswer> {
  checkTraceFlow(flow);
  const id = randomUUID();
  const lease = await store.grantLease(LEASE_SECONDS);
  try {
    await store.txn({ compares: [], success: [put(`${requests(peer)}${part(id)}`, JSON.stringify({ flow, from }), lease)] });
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      const kv = await store.get(answer(id));
      if (kv !== undefined) return parseAnswer(kv.value);
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new OvsnetError(
      'TRACE_PEER_SILENT',
      `host ${peer}'s ovsnet did not trace its half within ${timeoutMs / 1000} s (not running, older than this one, or without ovs-vswitchd's control socket): run ovsnet trace on ${peer}`,
    );
  } finally {
    await store.revokeLease(lease).catch(() => undefined);
  }
}

function parseAnswer(text: string): TraceAnswer {
  const a = JSON.parse(text) as Partial<TraceAnswer> & { error?: string };
  if (typeof a.error === 'string') throw new OvsnetError('TRACE_PEER_FAILED', `the peer could not trace: ${a.error.slice(0, 500)}`);
  if (typeof a.trace !== 'string' || typeof a.ports !== 'string' || typeof a.bridge !== 'string')
    throw new OvsnetError('TRACE_PEER_FAILED', "the peer's answer is not a trace");
  return { trace: a.trace, ports: a.ports, bridge: a.bridge };
}

export interface TraceAnswererDeps {
  readonly store: Store;
  readonly log: Logger;
  readonly self: string;
  readonly bridge: string;
  /** An ovs-vswitchd control command (ofproto/trace, dpif/show). */
  readonly command: (method: string, params: readonly string[]) => Promise<string>;
}

/** Daemon side: answers the trace requests put under this host's prefix. */
export class TraceAnswerer {
  private readonly follower: Follower;
  private readonly recent: number[] = [];
  private lastRefusal = 0;
  private queue: Promise<void> = Promise.resolve();

  constructor(private readonly deps: TraceAnswererDeps) {
    this.follower = new Follower({
      store: deps.store,
      prefix: requests(deps.self),
      log: deps.log,
      what: 'trace requests',
      onSnapshot: () => undefined, // requests made before this start are left to expire
      onEvents: (events) => {
        for (const e of events) if (e.type === 'put') this.queue = this.queue.then(() => this.answer(e.kv));
      },
    });
  }

  start(): Promise<void> {
    return this.follower.start();
  }

  async stop(): Promise<void> {
    await this.follower.stop();
    await this.queue;
  }

  private async answer(kv: KeyValue): Promise<void> {
    const id = kv.key.slice(requests(this.deps.self).length);
    const now = Date.now();
    while (this.recent.length > 0 && (this.recent[0] ?? 0) < now - 1000) this.recent.shift();
    if (this.recent.length >= PER_SECOND) {
      if (now - this.lastRefusal > 60_000) this.deps.log.warn(`more than ${PER_SECOND} trace requests a second: the rest left to expire`);
      this.lastRefusal = now;
      return;
    }
    this.recent.push(now);
    let body: string;
    try {
      if (kv.value.length > MAX_REQUEST * 2) throw new OvsnetError('TRACE_REQUEST_INVALID', 'trace request refused: too long');
      const req = JSON.parse(kv.value) as { flow?: unknown; from?: unknown };
      const flow = checkTraceFlow(req.flow);
      const [trace, ports] = await Promise.all([
        this.deps.command('ofproto/trace', [this.deps.bridge, flow, ...CT_NEXT]),
        this.deps.command('dpif/show', []),
      ]);
      body = JSON.stringify({ trace: trace.slice(0, MAX_ANSWER / 2), ports: ports.slice(0, MAX_ANSWER / 4), bridge: this.deps.bridge });
      this.deps.log.info({ from: typeof req.from === 'string' ? req.from.slice(0, 64) : undefined }, 'traced a packet for a peer');
    } catch (err) {
      body = JSON.stringify({ error: messageOf(err).slice(0, 1000) });
      this.deps.log.info({ err }, `trace request not answered: ${messageOf(err)}`);
    }
    // Under the request's lease, only while the request is there (it goes with the asker's lease).
    const res = await this.deps.store
      .txn({ compares: [modRevisionIs(kv.key, kv.modRevision)], success: [put(answer(id), body, kv.lease), del(kv.key)] })
      .catch((err: unknown) => this.deps.log.warn({ err }, `cannot put a trace answer: ${messageOf(err)}`));
    if (res !== undefined && !res.succeeded) this.deps.log.debug({ id }, 'a trace request went before its answer');
  }
}
