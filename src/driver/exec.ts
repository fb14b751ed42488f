/**
 * The one place ovsnet runs a child process (iptables, for NAT: nothing on the Join path),
 * with a timeout, and errors that carry the command and its stderr.
 */
import { execFile } from 'node:child_process';

export interface ExecResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export function exec(cmd: string, args: readonly string[], timeoutMs = 10_000): Promise<ExecResult> {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: timeoutMs, encoding: 'utf8' }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? Number((err as { code: number }).code) : 127;
      resolve({ code, stdout, stderr: err !== null && stderr === '' ? err.message : stderr });
    });
  });
}
