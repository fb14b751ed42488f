/**
 * The one place ovsnet runs a child process: iptables (nat.ts) and ovs-ofctl (ovs/flows.ts),
 * never on the Join path. It never rejects: it answers the exit code (127 when the command
 * could not start, or was killed at the timeout, 10 s unless said), stdout, and stderr (the
 * spawn error's message when the command wrote none); callers make their coded error from it,
 * naming the command and its stderr. `input` goes to its stdin (iptables-restore's batch).
 */
import { execFile } from 'node:child_process';

export interface ExecResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export function exec(cmd: string, args: readonly string[], timeoutMs = 10_000, input?: string): Promise<ExecResult> {
  return new Promise((resolve) => {
    const child = execFile(cmd, args, { timeout: timeoutMs, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? Number((err as { code: number }).code) : 127;
      resolve({ code, stdout, stderr: err !== null && stderr === '' ? err.message : stderr });
    });
    // A command that could not start, or exits without reading, closes its stdin: no error.
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(input ?? '');
  });
}
