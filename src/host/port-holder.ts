/**
 * Who listens on a TCP port, for the error that says the port is taken: the listening socket's
 * inode from /proc/net/tcp{,6} (this network namespace), then the process holding a descriptor
 * on it. A process in another PID namespace (ovsnet as a managed plugin sees only its own) is
 * not found: the answer then says only that something listens.
 */
import fs from 'node:fs';

/** TCP_LISTEN in /proc/net/tcp's `st` column. */
const LISTEN = '0A';

/** "pid 1234 (nc)", "a process ovsnet cannot see", or undefined when nothing listens on `port`. */
export function portHolder(port: number): string | undefined {
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = fs.readFileSync(table, 'utf8');
    } catch {
      continue; // no IPv6, or no /proc
    }
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      const f = line.trim().split(/\s+/);
      const local = f[1];
      if (local === undefined || f[3] !== LISTEN || f[9] === undefined) continue;
      if (parseInt(local.slice(local.lastIndexOf(':') + 1), 16) === port) inodes.add(f[9]);
    }
  }
  if (inodes.size === 0) return undefined;
  for (const pid of safeReaddir('/proc').filter((p) => /^\d+$/.test(p))) {
    for (const fd of safeReaddir(`/proc/${pid}/fd`)) {
      let link: string;
      try {
        link = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue; // closed meanwhile
      }
      const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
      if (inode !== undefined && inodes.has(inode)) {
        let comm = '';
        try {
          comm = fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
        } catch {
          // gone meanwhile: the pid alone
        }
        return comm === '' ? `pid ${pid}` : `pid ${pid} (${comm})`;
      }
    }
  }
  return 'a process ovsnet cannot see (another PID namespace)';
}

function safeReaddir(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}
