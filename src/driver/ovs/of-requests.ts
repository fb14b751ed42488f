/**
 * OpenFlow 1.3 requests on short connections of their own to the bridge's management socket
 * (RUNDIR/BRIDGE.mgmt), where an ovs-ofctl process each would cost a process start.
 *
 * Meters: after ovs-vswitchd restarted, every QoS endpoint's meter must come back at once, and
 * one ovs-ofctl process per meter took seconds at a thousand endpoints. One connection carries
 * every METER_MOD, then a BARRIER: the barrier's reply says all are applied, and the errors that
 * came before it name the meters refused. Only ovsnet's meter specs (qos-flows.ts's meterSpec)
 * are encoded: kbps, burst and stats, one drop band.
 *
 * Reads, for the periodic flow check: every meter (METER_CONFIG, decoded into dump-meters' shape)
 * and the IDs of the bridge's groups (GROUP_DESC, the IDs only: whether any of ovsnet's is held
 * when it wants none).
 */
import net from 'node:net';
import { OvsnetError, messageOf } from '../../lib/errors.js';
import { meterShape } from './flow-diff.js';
import { answerTo, splitMessages } from './of-watch.js';

const OF13 = 0x04;
const OFPT_HELLO = 0;
const OFPT_ERROR = 1;
const OFPT_ECHO_REQUEST = 2;
const OFPT_BARRIER_REQUEST = 20;
const OFPT_BARRIER_REPLY = 21;
const OFPT_METER_MOD = 29;
const OFPT_MULTIPART_REQUEST = 18;
const OFPT_MULTIPART_REPLY = 19;
const OFPMP_GROUP_DESC = 7;
const OFPMP_METER_CONFIG = 10;
const OFPMPF_REPLY_MORE = 1;
const OFPM_ALL = 0xffffffff;
const COMMANDS = { add: 0, modify: 1, delete: 2 } as const;
const OFPMF_KBPS = 1;
const OFPMF_PKTPS = 2;
const OFPMF_BURST = 4;
const OFPMF_STATS = 8;
/** ovsnet's meters' flags. */
const FLAGS = OFPMF_KBPS | OFPMF_BURST | OFPMF_STATS;
/** The flags and band types as ovs-ofctl names them. */
const FLAG_NAMES: readonly (readonly [number, string])[] = [
  [OFPMF_KBPS, 'kbps'],
  [OFPMF_PKTPS, 'pktps'],
  [OFPMF_BURST, 'burst'],
  [OFPMF_STATS, 'stats'],
];
const OFPMBT_DROP = 1;
const OFPMBT_DSCP_REMARK = 2;
const BAND_NAMES: Readonly<Record<number, string>> = { [OFPMBT_DROP]: 'drop', [OFPMBT_DSCP_REMARK]: 'dscp_remark' };

export interface MeterMod {
  readonly command: keyof typeof COMMANDS;
  readonly id: number;
  /** add-meter's spec (qos-flows.ts's meterSpec); unused for delete. */
  readonly spec?: string;
}

function header(type: number, length: number, xid: number): Buffer {
  const b = Buffer.alloc(length);
  b.writeUInt8(OF13, 0);
  b.writeUInt8(type, 1);
  b.writeUInt16BE(length, 2);
  b.writeUInt32BE(xid >>> 0, 4);
  return b;
}

/** One METER_MOD as OpenFlow 1.3 sends it. Pure; throws on a spec that is not ovsnet's form. */
export function meterModMessage(mod: MeterMod, xid: number): Buffer {
  if (mod.command === 'delete') {
    const b = header(OFPT_METER_MOD, 16, xid);
    b.writeUInt16BE(COMMANDS.delete, 8);
    b.writeUInt32BE(mod.id >>> 0, 12);
    return b;
  }
  const rate = /(?:^|,)rate=(\d+)/.exec(mod.spec ?? '')?.[1];
  const burst = /(?:^|,)burst_size=(\d+)/.exec(mod.spec ?? '')?.[1];
  if (rate === undefined || burst === undefined || !/(?:^|,)kbps,burst,stats,bands=type=drop,/.test(mod.spec ?? '')) {
    throw new Error(`not an ovsnet meter spec: ${mod.spec ?? '(none)'}`);
  }
  const b = header(OFPT_METER_MOD, 32, xid);
  b.writeUInt16BE(COMMANDS[mod.command], 8);
  b.writeUInt16BE(FLAGS, 10);
  b.writeUInt32BE(mod.id >>> 0, 12);
  b.writeUInt16BE(OFPMBT_DROP, 16);
  b.writeUInt16BE(16, 18);
  b.writeUInt32BE(Number(rate) >>> 0, 20);
  b.writeUInt32BE(Number(burst) >>> 0, 24);
  return b;
}

/** The switch's answer ends the conversation with `value`; undefined: more is to come. */
type Turn<T> = { readonly value: T } | undefined;

/**
 * One OpenFlow 1.3 conversation on the bridge's management socket: HELLO and `messages` sent at
 * once, echo requests answered, every other message handed to `onMessage` until it returns a
 * value or throws. `what` completes "did not ... within" and "closed the connection before ...".
 * Bounded by `timeoutMs`.
 */
function converse<T>(socketPath: string, messages: Buffer, timeoutMs: number, what: string, onMessage: (m: Buffer) => Turn<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(socketPath);
    let buffered: Buffer = Buffer.alloc(0);
    let done = false;
    const finish = (outcome: { value: T } | Error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      if (outcome instanceof Error) reject(outcome);
      else resolve(outcome.value);
    };
    const timer = setTimeout(
      () => finish(new OvsnetError('OVS_UNAVAILABLE', `ovs-vswitchd at ${socketPath} did not ${what} within ${timeoutMs} ms`)),
      timeoutMs,
    );
    socket.on('connect', () => {
      socket.write(header(OFPT_HELLO, 8, 1));
      socket.write(messages);
    });
    socket.on('data', (chunk: Buffer) => {
      const split = splitMessages(Buffer.concat([buffered, chunk]));
      buffered = split.rest;
      try {
        for (const m of split.messages) {
          if (m.readUInt8(1) === OFPT_ECHO_REQUEST) socket.write(answerTo(m) ?? Buffer.alloc(0));
          else {
            const turn = onMessage(m);
            if (turn !== undefined) return finish(turn);
          }
        }
      } catch (err) {
        return finish(err instanceof Error ? err : new Error(String(err)));
      }
      if (split.bad) finish(new OvsnetError('OVS_FAILED', `ovs-vswitchd at ${socketPath} sent a message that is not OpenFlow`));
    });
    socket.on('error', (err) =>
      finish(new OvsnetError('OVS_UNAVAILABLE', `cannot reach ovs-vswitchd at ${socketPath}: ${messageOf(err)}`)),
    );
    socket.on('close', () =>
      finish(new OvsnetError('OVS_UNAVAILABLE', `ovs-vswitchd at ${socketPath} closed the connection before it could ${what}`)),
    );
  });
}

const refusedConnection = (socketPath: string) =>
  new OvsnetError('OVS_FAILED', `ovs-vswitchd at ${socketPath} refused the OpenFlow 1.3 connection: does the bridge allow OpenFlow13?`);

/**
 * Sends every mod, then a barrier, on one connection; resolves once the barrier is answered with
 * no error before it, or fails naming the meters OVS refused (the others are applied). Bounded
 * by `timeoutMs`.
 */
export async function sendMeterMods(socketPath: string, mods: readonly MeterMod[], timeoutMs: number): Promise<void> {
  if (mods.length === 0) return;
  const barrierXid = mods.length + 2;
  const messages = Buffer.concat([...mods.map((m, i) => meterModMessage(m, i + 2)), header(OFPT_BARRIER_REQUEST, 8, barrierXid)]);
  const refused: string[] = [];
  await converse(socketPath, messages, timeoutMs, `confirm ${mods.length} meter changes`, (m): Turn<void> => {
    const type = m.readUInt8(1);
    const xid = m.readUInt32BE(4);
    if (type === OFPT_ERROR) {
      const mod = mods[xid - 2];
      if (mod === undefined) throw refusedConnection(socketPath);
      refused.push(`meter ${mod.id} (${mod.command})`);
    } else if (type === OFPT_BARRIER_REPLY && xid === barrierXid) {
      if (refused.length > 0) throw new OvsnetError('OVS_FAILED', `ovs-vswitchd refused ${refused.join(', ')}`);
      return { value: undefined };
    }
    return undefined;
  });
}

/** METER_CONFIG's multipart request for every meter (OFPM_ALL), in OpenFlow 1.3. Pure. */
export function meterConfigRequest(xid: number): Buffer {
  const b = header(OFPT_MULTIPART_REQUEST, 24, xid);
  b.writeUInt16BE(OFPMP_METER_CONFIG, 8);
  b.writeUInt32BE(OFPM_ALL, 16);
  return b;
}

/** GROUP_DESC's multipart request (every group; no body in OpenFlow 1.3). Pure. */
export function groupDescRequest(xid: number): Buffer {
  const b = header(OFPT_MULTIPART_REQUEST, 16, xid);
  b.writeUInt16BE(OFPMP_GROUP_DESC, 8);
  return b;
}

const malformed = (what: string, why: string) => new OvsnetError('OVS_FAILED', `ovs-vswitchd sent a malformed ${what} reply: ${why}`);

/** The group IDs of one GROUP_DESC reply's body (each entry: length, type, pad, ID, buckets). Pure; OVS_FAILED on lengths that do not add up. */
export function parseGroupIds(body: Buffer): number[] {
  const ids: number[] = [];
  for (let at = 0; at < body.length; ) {
    if (body.length - at < 8) throw malformed('group', `${body.length - at} bytes left, under a group's 8`);
    const length = body.readUInt16BE(at);
    if (length < 8 || at + length > body.length) throw malformed('group', `a group of ${length} bytes at ${at} of ${body.length}`);
    ids.push(body.readUInt32BE(at + 4));
    at += length;
  }
  return ids;
}

/**
 * The meters of one METER_CONFIG reply's body, each as `ovs-ofctl dump-meters` prints it (so that
 * flow-diff.ts's meterShape compares them with add-meter's specs), by ID. Pure; OVS_FAILED on a
 * body whose lengths do not add up.
 */
export function parseMeterConfigs(body: Buffer): Map<number, string> {
  const meters = new Map<number, string>();
  const bad = (why: string) => malformed('meter', why);
  for (let at = 0; at < body.length; ) {
    if (body.length - at < 8) throw bad(`${body.length - at} bytes left, under a meter's 8`);
    const length = body.readUInt16BE(at);
    if (length < 8 || at + length > body.length) throw bad(`a meter of ${length} bytes at ${at} of ${body.length}`);
    const flags = body.readUInt16BE(at + 2);
    const id = body.readUInt32BE(at + 4);
    const bands: string[] = [];
    for (let b = at + 8; b < at + length; ) {
      const len = at + length - b >= 16 ? body.readUInt16BE(b + 2) : 0;
      if (len < 16 || b + len > at + length) throw bad(`a band of meter ${id} of ${len} bytes`);
      const type = body.readUInt16BE(b);
      const burst = flags & OFPMF_BURST ? ` burst_size=${body.readUInt32BE(b + 8)}` : '';
      const prec = type === OFPMBT_DSCP_REMARK ? ` prec_level=${body.readUInt8(b + 12)}` : '';
      bands.push(`type=${BAND_NAMES[type] ?? type} rate=${body.readUInt32BE(b + 4)}${burst}${prec}`);
      b += len;
    }
    const named = FLAG_NAMES.filter(([bit]) => flags & bit).map(([, name]) => `${name} `);
    meters.set(id, meterShape(`meter=${id} ${named.join('')}bands=\n${bands.join('\n')}`));
    at += length;
  }
  return meters;
}

/**
 * One multipart request's replies on a connection of its own: each part's body to `take`, done
 * when a part says no more follows. Bounded by `timeoutMs`.
 */
function multipart(socketPath: string, request: Buffer, timeoutMs: number, what: string, take: (body: Buffer) => void): Promise<void> {
  const xid = request.readUInt32BE(4);
  return converse(socketPath, request, timeoutMs, what, (m): Turn<void> => {
    const type = m.readUInt8(1);
    // An error to the HELLO (no version in common) or to the request: nothing else was sent.
    if (type === OFPT_ERROR) throw refusedConnection(socketPath);
    if (type !== OFPT_MULTIPART_REPLY || m.readUInt32BE(4) !== xid || m.length < 16) return undefined;
    take(m.subarray(16));
    return (m.readUInt16BE(10) & OFPMPF_REPLY_MORE) === 0 ? { value: undefined } : undefined;
  });
}

/**
 * Every meter of the bridge, each in flow-diff.ts's shape, by ID: what `ovs-ofctl dump-meters`
 * gives, over one connection instead of a process. Bounded by `timeoutMs`.
 */
export async function readMeters(socketPath: string, timeoutMs: number): Promise<Map<number, string>> {
  const meters = new Map<number, string>();
  await multipart(socketPath, meterConfigRequest(2), timeoutMs, 'answer the meter read', (body) => {
    for (const [id, shape] of parseMeterConfigs(body)) meters.set(id, shape);
  });
  return meters;
}

/** The ID of every group of the bridge, over one connection instead of an ovs-ofctl process. Bounded by `timeoutMs`. */
export async function readGroupIds(socketPath: string, timeoutMs: number): Promise<number[]> {
  const ids: number[] = [];
  await multipart(socketPath, groupDescRequest(2), timeoutMs, 'answer the group read', (body) => ids.push(...parseGroupIds(body)));
  return ids;
}
