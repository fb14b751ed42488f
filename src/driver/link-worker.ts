/**
 * Deletes links on a thread of its own. rtnetlink handles a request inside the sending syscall,
 * and deleting a veth waits there for an RCU grace period (~20 ms here): sent from the main
 * thread, that stalled every other call ovsnet was answering. Messages: {id, name} in,
 * {id, error?} out, where error is the netlink error text ("Request rejected: ENODEV", ...).
 */
import { parentPort } from 'node:worker_threads';

type NetlinkModule = typeof import('netlink');

const port = parentPort;
if (port !== null) {
  const nl = await import('netlink').then((m) => ((m as { default?: NetlinkModule }).default ?? m));
  const rtnl = nl.createRtNetlink();
  port.on('message', (msg: { id: number; name: string }) => {
    rtnl.delLink({}, { ifname: msg.name }).then(
      () => port.postMessage({ id: msg.id }),
      (err: unknown) => port.postMessage({ id: msg.id, error: err instanceof Error ? err.message : String(err) }),
    );
  });
}
