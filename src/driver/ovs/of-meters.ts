/**
 * Meters over OpenFlow itself: after ovs-vswitchd restarted, every QoS endpoint's meter must come
 * back at once, and one ovs-ofctl process per meter took seconds at a thousand endpoints. One
 * connection to the bridge's management socket (RUNDIR/BRIDGE.mgmt) carries every OpenFlow 1.3
 * METER_MOD, then a BARRIER: the barrier's reply says all are applied, and the errors that came
 * before it name the meters refused. Only ovsnet's meter specs (qos-flows.ts's meterSpec) are
 * encoded: kbps, burst and stats, one drop band.
 */
import net from 'node:net';
import { OvsnetError, messageOf } from '../../lib/errors.js';
import { answerTo, splitMessages } from './of-watch.js';

const OF13 = 0x04;
const OFPT_HELLO = 0;
const OFPT_ERROR = 1;
const OFPT_ECHO_REQUEST = 2;
const OFPT_BARRIER_REQUEST = 20;
const OFPT_BARRIER_REPLY = 21;
const OFPT_METER_MOD = 29;
const COMMANDS = { add: 0, modify: 1, delete: 2 } as const;
/** OFPMF_KBPS | OFPMF_BURST | OFPMF_STATS. */
const FLAGS = 1 | 4 | 8;
const OFPMBT_DROP = 1;

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

/**
 * Sends every mod, then a barrier, on one connection; resolves once the barrier is answered with
 * no error before it, or fails naming the meters OVS refused (the others are applied). Bounded
 * by `timeoutMs`.
 */
export function sendMeterMods(socketPath: string, mods: readonly MeterMod[], timeoutMs: number): Promise<void> {
  if (mods.length === 0) return Promise.resolve();
  const messages = mods.map((m, i) => meterModMessage(m, i + 2));
  const barrierXid = mods.length + 2;
  return new Promise((resolve, reject) => {
    const socket = net.connect(socketPath);
    const refused: string[] = [];
    let buffered: Buffer = Buffer.alloc(0);
    let done = false;
    const finish = (err?: Error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      if (err !== undefined) reject(err);
      else resolve();
    };
    const timer = setTimeout(
      () =>
        finish(
          new OvsnetError(
            'OVS_UNAVAILABLE',
            `ovs-vswitchd at ${socketPath} did not confirm ${mods.length} meter changes within ${timeoutMs} ms`,
          ),
        ),
      timeoutMs,
    );
    socket.on('connect', () => {
      socket.write(header(OFPT_HELLO, 8, 1));
      socket.write(Buffer.concat([...messages, header(OFPT_BARRIER_REQUEST, 8, barrierXid)]));
    });
    socket.on('data', (chunk: Buffer) => {
      const split = splitMessages(Buffer.concat([buffered, chunk]));
      buffered = split.rest;
      for (const m of split.messages) {
        const type = m.readUInt8(1);
        const xid = m.readUInt32BE(4);
        if (type === OFPT_ECHO_REQUEST) socket.write(answerTo(m) ?? Buffer.alloc(0));
        else if (type === OFPT_ERROR) {
          const mod = mods[xid - 2];
          refused.push(
            mod === undefined ? `message ${xid} (type ${m.length >= 10 ? m.readUInt16BE(8) : '?'})` : `meter ${mod.id} (${mod.command})`,
          );
          if (mod === undefined)
            return finish(
              new OvsnetError(
                'OVS_FAILED',
                `ovs-vswitchd at ${socketPath} refused the OpenFlow 1.3 connection: does the bridge allow OpenFlow13?`,
              ),
            );
        } else if (type === OFPT_BARRIER_REPLY && xid === barrierXid) {
          return finish(refused.length === 0 ? undefined : new OvsnetError('OVS_FAILED', `ovs-vswitchd refused ${refused.join(', ')}`));
        }
      }
      if (split.bad) finish(new OvsnetError('OVS_FAILED', `ovs-vswitchd at ${socketPath} sent a message that is not OpenFlow`));
    });
    socket.on('error', (err) =>
      finish(new OvsnetError('OVS_UNAVAILABLE', `cannot reach ovs-vswitchd at ${socketPath}: ${messageOf(err)}`)),
    );
    socket.on('close', () =>
      finish(new OvsnetError('OVS_UNAVAILABLE', `ovs-vswitchd at ${socketPath} closed the connection before confirming the meters`)),
    );
  });
}
