/**
 * Timers for bounds on round trips. A loop turn runs timers before I/O: after the process was
 * busy (or starved of CPU) past a bound, the bound's timer and the answer are both due, and a
 * plain setTimeout would report a timeout for an answer already waiting in the socket. The
 * callback here runs after that turn's I/O (setImmediate), so an answer that came in time wins.
 */
export function expireAfterIo(ms: number, expire: () => void): NodeJS.Timeout {
  return setTimeout(() => setImmediate(expire), ms);
}
