/**
 * Notices at once when ovs-vswitchd goes and comes back: ovsnet holds one OpenFlow connection to
 * its bridge's management socket (RUNDIR/BRIDGE.mgmt, which ovs-vswitchd serves for every bridge
 * and closes when it exits) and only answers its echo requests. The connection dropping is the
 * restart's first sign (onLost); connecting again, the moment ovs-vswitchd serves the bridge
 * anew (onBack), is when ovsnet programs the bridge again. It changes no flow, meter or port.
 * While the socket is missing (no bridge yet, or ovs-vswitchd down) it is tried again every
 * `retryMs`, at most once a second when it has been missing for long.
 *
 * With `onMessage` it also asks for the switch's asynchronous messages (SET_CONFIG with a miss
 * send length: a management connection gets none otherwise) and hands each message to it, sending
 * back what it answers: ovsnet's VIP refusals (vip/refusal.ts). OpenFlow 1.3 and later send no
 * PACKET_IN on a table miss, so only flows with a `controller` action reach it.
 *
 * `send` writes messages of ovsnet's on it (PACKET_OUTs: endpoint/announce.ts), in the version
 * the switch's HELLO settled.
 */
import net from 'node:net';

const OFPT_HELLO = 0;
const OFPT_ECHO_REQUEST = 2;
const OFPT_ECHO_REPLY = 3;
const OFPT_SET_CONFIG = 9;
const HEADER = 8;

/** SET_CONFIG in `version`: normal fragment handling, whole packets to the controller. */
export function setConfigMessage(version: number, xid: number): Buffer {
  const b = Buffer.alloc(12);
  b.writeUInt8(version, 0);
  b.writeUInt8(OFPT_SET_CONFIG, 1);
  b.writeUInt16BE(12, 2);
  b.writeUInt32BE(xid >>> 0, 4);
  b.writeUInt16BE(0xffff, 10);
  return b;
}

/** HELLO offering OpenFlow 1.0-1.5 (a version bitmap): whatever versions the bridge allows, one is common. */
export function helloMessage(xid: number): Buffer {
  const b = Buffer.alloc(16);
  b.writeUInt8(0x06, 0); // OpenFlow 1.5, the highest offered
  b.writeUInt8(OFPT_HELLO, 1);
  b.writeUInt16BE(16, 2);
  b.writeUInt32BE(xid >>> 0, 4);
  b.writeUInt16BE(1, 8); // OFPHET_VERSIONBITMAP
  b.writeUInt16BE(8, 10);
  b.writeUInt32BE(0b1111110, 12); // versions 1 to 6 (wire numbers of OpenFlow 1.0 to 1.5)
  return b;
}

/**
 * Splits what arrived into whole OpenFlow messages; the rest waits for more bytes. A length
 * under the header's is not OpenFlow: `bad` is then true and the connection is to be dropped.
 * Pure. (Lengths are 16 bits: no message is over 64 KiB, so nothing grows without bound.)
 */
export function splitMessages(buffer: Buffer): { messages: Buffer[]; rest: Buffer; bad: boolean } {
  const messages: Buffer[] = [];
  let at = 0;
  while (buffer.length - at >= HEADER) {
    const length = buffer.readUInt16BE(at + 2);
    if (length < HEADER) return { messages, rest: Buffer.alloc(0), bad: true };
    if (buffer.length - at < length) break;
    messages.push(buffer.subarray(at, at + length));
    at += length;
  }
  return { messages, rest: buffer.subarray(at), bad: false };
}

/** The answer to a message ovsnet must answer (an echo request: the same body back); undefined otherwise. Pure. */
export function answerTo(message: Buffer): Buffer | undefined {
  if (message.readUInt8(1) !== OFPT_ECHO_REQUEST) return undefined;
  const reply = Buffer.from(message);
  reply.writeUInt8(OFPT_ECHO_REPLY, 1);
  return reply;
}

export interface OfWatchOptions {
  /** The bridge's management socket (RUNDIR/BRIDGE.mgmt). */
  readonly socket: string;
  /** ovs-vswitchd closed the connection (it stopped, or the bridge was deleted). */
  readonly onLost: () => void;
  /** Connected again after a loss: ovs-vswitchd serves the bridge again. */
  readonly onBack: () => void;
  readonly retryMs?: number;
  /** After this long without the socket, tried once a second. */
  readonly patienceMs?: number;
  /** Every message the switch sends; what it returns is sent back (see the header). */
  readonly onMessage?: (message: Buffer) => Buffer | undefined;
}

export class OpenFlowWatch {
  private socket: net.Socket | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private everConnected = false;
  private lostAt = 0;
  private negotiated: number | undefined;

  constructor(private readonly options: OfWatchOptions) {}

  /** Whether the connection is up now. */
  get connected(): boolean {
    return this.socket !== undefined;
  }

  /** The OpenFlow version of the connection (the wire number: 4 is 1.3); undefined while it is down or before the switch's HELLO. */
  get version(): number | undefined {
    return this.socket === undefined ? undefined : this.negotiated;
  }

  /** Writes the messages on the connection; false (nothing written) while it is down. */
  send(messages: readonly Buffer[]): boolean {
    if (this.socket === undefined || this.negotiated === undefined) return false;
    for (const m of messages) this.socket.write(m);
    return true;
  }

  start(): void {
    this.stopped = false;
    this.dial();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.socket?.destroy();
    this.socket = undefined;
  }

  private dial(): void {
    if (this.stopped) return;
    const socket = net.connect(this.options.socket);
    let up = false;
    let buffered: Buffer = Buffer.alloc(0);
    this.negotiated = undefined;
    socket.on('connect', () => {
      up = true;
      this.socket = socket;
      socket.write(helloMessage(1));
      const back = this.everConnected;
      this.everConnected = true;
      if (back) this.options.onBack();
    });
    socket.on('data', (chunk: Buffer) => {
      const { messages, rest, bad } = splitMessages(Buffer.concat([buffered, chunk]));
      buffered = rest;
      for (const m of messages) {
        // The switch's HELLO: the version is the highest both offer (ours is 1.5).
        if (m.readUInt8(1) === OFPT_HELLO) this.negotiated = Math.min(m.readUInt8(0), 0x06);
        const answer = answerTo(m) ?? this.reply(m);
        if (answer !== undefined) socket.write(answer);
      }
      if (bad) socket.destroy();
    });
    socket.on('error', () => socket.destroy());
    socket.on('close', () => {
      if (this.socket === socket) this.socket = undefined;
      if (this.stopped) return;
      if (up) {
        this.lostAt = Date.now();
        this.options.onLost();
      }
      this.retry();
    });
  }

  private reply(message: Buffer): Buffer | undefined {
    const onMessage = this.options.onMessage;
    if (onMessage === undefined) return undefined;
    if (message.readUInt8(1) === OFPT_HELLO) return setConfigMessage(this.negotiated ?? message.readUInt8(0), 2);
    try {
      return onMessage(message);
    } catch {
      return undefined; // a message it cannot read gets no answer
    }
  }

  private retry(): void {
    const retryMs = this.options.retryMs ?? 50;
    const missingFor = Date.now() - this.lostAt;
    const wait = this.everConnected && missingFor < (this.options.patienceMs ?? 60_000) ? retryMs : Math.max(retryMs, 1000);
    this.timer = setTimeout(() => this.dial(), wait);
    this.timer.unref();
  }
}
