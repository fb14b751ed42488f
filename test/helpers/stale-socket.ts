/** A stale unix socket, as a daemon killed with SIGKILL leaves it: bound, nobody listening. */
import { spawnSync } from 'node:child_process';

export function staleSocket(socket: string): void {
  const script = `require('net').createServer().listen(${JSON.stringify(socket)}, () => process.kill(process.pid, 'SIGKILL'))`;
  spawnSync(process.execPath, ['-e', script], { timeout: 10_000 });
}
