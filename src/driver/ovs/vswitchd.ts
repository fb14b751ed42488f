/**
 * ovs-vswitchd's control socket, the one `ovs-appctl` talks to: JSON-RPC like OVSDB, one short
 * connection per command (the socket's name carries the daemon's PID, so it changes when
 * ovs-vswitchd restarts). It sits beside the OVSDB socket: RUNDIR/ovs-vswitchd.pid names the
 * PID, RUNDIR/ovs-vswitchd.PID.ctl is the socket. Used for what OVSDB cannot ask for, without a
 * process per call.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { OvsnetError, messageOf } from '../../lib/errors.js';
import { JsonRpcClient } from './jsonrpc.js';

export class Vswitchd {
  /** `runDir`: the directory of ovs-vswitchd.pid and its control socket. */
  constructor(
    private readonly runDir: string,
    private readonly timeoutMs: number,
  ) {}

  /** The control socket beside a unix OVSDB socket; undefined for tcp: (another machine's). */
  static besideOvsdb(ovsdb: string, timeoutMs: number): Vswitchd | undefined {
    return ovsdb.startsWith('unix:') ? new Vswitchd(path.dirname(ovsdb.slice('unix:'.length)), timeoutMs) : undefined;
  }

  /** Runs one control command (as `ovs-appctl METHOD PARAMS...` would) and returns its reply. */
  async command(method: string, params: readonly string[] = []): Promise<string> {
    const pidFile = path.join(this.runDir, 'ovs-vswitchd.pid');
    let pid: string;
    try {
      pid = (await fs.readFile(pidFile, 'utf8')).trim();
    } catch (err) {
      throw new OvsnetError(
        'OVS_UNAVAILABLE',
        `cannot read ${pidFile}: ${messageOf(err)} (is ovs-vswitchd running? Its PID file sits beside the OVSDB socket that OVSNET_OVSDB names)`,
        { cause: err },
      );
    }
    const rpc = new JsonRpcClient({
      target: `unix:${path.join(this.runDir, `ovs-vswitchd.${pid}.ctl`)}`,
      timeoutMs: this.timeoutMs,
      peer: 'ovs-vswitchd',
      hint: `is ovs-vswitchd (PID ${pid} in ${pidFile}) running?`,
    });
    try {
      return String(await rpc.request(method, [...params]));
    } finally {
      rpc.close();
    }
  }

  /**
   * Drops every flow the userspace datapath has cached, so that the next packets are translated
   * against the ports OVS has now. Needed after adding a VXLAN port there: a flow cached while no
   * tunnel port listened (VXLAN from a peer delivered to the host's stack) can outlive the new
   * port as long as the peer keeps sending (an OVS revalidation race, seen in 3 of 10 trials).
   */
  async purgeFlows(): Promise<void> {
    await this.command('revalidator/purge');
  }
}
