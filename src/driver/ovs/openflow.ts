/**
 * The one way ovsnet speaks OpenFlow to ovs-vswitchd: ovs-ofctl, for the gateway guard
 * (flows.ts), endpoint groups (group-flows.ts) and endpoint QoS (qos-flows.ts). Every run goes
 * through the daemon's spawner (its timeout, its metric per program); a failure reads the same
 * whoever ran it; and a command that is safe to repeat is tried once more, after a short wait,
 * when ovs-ofctl could not reach ovs-vswitchd (it restarts now and then, and comes back).
 */
import { setTimeout as delay } from 'node:timers/promises';
import { OvsnetError } from '../../lib/errors.js';
import { exec, type ExecResult, type Run, type Stdin } from '../../lib/exec.js';

const OF13 = ['-O', 'OpenFlow13'];

/** ovs-ofctl's words when the switch was not there to answer, or the run was killed at its timeout. */
const UNREACHED = /failed to connect to socket|connection refused|connection reset|timed out|killed after/i;

export interface OfctlCall {
  /** `-O OpenFlow13` first: meters, conntrack and registers need it. */
  readonly of13?: boolean;
  /** stdin: add-flows' batch; diff-flows' wanted flows as a file (`/dev/stdin`). */
  readonly input?: Stdin;
  /** Whether running it twice does what running it once does (reads, replacing adds, deletes); true unless said. */
  readonly repeatable?: boolean;
  /** The run's timeout (the spawner's 10 s unless said): a caller bound in time (a metrics scrape) says less. */
  readonly timeoutMs?: number;
}

export class OpenFlow {
  constructor(
    private readonly run: Run = exec,
    private readonly retryDelayMs = 250,
  ) {}

  /** ovs-ofctl's answer as is: for a caller that reads a refusal (add-meter's METER_EXISTS). */
  async answer(args: readonly string[], call: OfctlCall = {}): Promise<ExecResult> {
    const full = call.of13 === true ? [...OF13, ...args] : args;
    const r = await this.run('ovs-ofctl', full, call.input, call.timeoutMs);
    if (r.code === 0 || call.repeatable === false || !UNREACHED.test(r.stderr)) return r;
    await delay(this.retryDelayMs);
    return this.run('ovs-ofctl', full, call.input, call.timeoutMs);
  }

  /** ovs-ofctl's stdout; OVS_FAILED (error()) when it fails. */
  async ofctl(args: readonly string[], call: OfctlCall = {}): Promise<string> {
    const r = await this.answer(args, call);
    if (r.code !== 0) throw this.error(args, r, call);
    return r.stdout;
  }

  /** The one text of a failed ovs-ofctl: the command, its exit code and stderr, what to check. */
  error(args: readonly string[], r: ExecResult, call: OfctlCall = {}): OvsnetError {
    const command = ['ovs-ofctl', ...(call.of13 === true ? OF13 : []), ...args].join(' ');
    const of13 =
      call.of13 === true
        ? ', and does the bridge allow OpenFlow13 (ovs-vsctl get bridge BRIDGE protocols: [] or one listing OpenFlow13)'
        : '';
    return new OvsnetError(
      'OVS_FAILED',
      `${command} failed (${r.code}): ${r.stderr.trim()}; is ovs-vswitchd running${of13}, and ovs-ofctl installed (openvswitch-switch)?`,
    );
  }
}
