/**
 * The one place ovsnet runs a child process: iptables (ports/nat.ts), ovs-ofctl (ovs/openflow.ts),
 * ip (uplink/host-ip.ts, cni/netns.ts). A run never rejects: it answers the exit code (127 when
 * the command could not start, or was killed at its timeout, 10 s unless said), stdout, and
 * stderr (why it could not start or was killed, when the command wrote none). Callers that need
 * a failure as an error take it from failed(), which names the program, its arguments, the exit
 * code and stderr. `input` goes to its stdin (iptables-restore's batch).
 */
import { execFile } from 'node:child_process';

export const EXEC_TIMEOUT_MS = 10_000;

export interface ExecResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** How a child process is run; a fake in unit tests. */
export type Run = (cmd: string, args: readonly string[], input?: string, timeoutMs?: number) => Promise<ExecResult>;

/** Each run, for the metrics: the program (its base name), whether it exited 0, its seconds. */
export type ExecObserver = (program: string, ok: boolean, seconds: number) => void;

/** A failed run, as an error: what ran, how it ended, and what it said. */
export class ExecError extends Error {
  constructor(
    readonly program: string,
    readonly args: readonly string[],
    readonly code: number,
    readonly stderr: string,
  ) {
    super(`${[program, ...args].join(' ')} failed (${code}): ${stderr.trim()}`);
    this.name = 'ExecError';
  }
}

/** The run's failure as an error, or undefined when it exited 0. */
export function failed(cmd: string, args: readonly string[], r: ExecResult): ExecError | undefined {
  return r.code === 0 ? undefined : new ExecError(cmd, args, r.code, r.stderr);
}

/** A Run that tells `observe` of each run (the daemon's metrics); `exec` is the one that tells nobody. */
export function spawner(observe?: ExecObserver): Run {
  return async (cmd, args, input, timeoutMs = EXEC_TIMEOUT_MS) => {
    const started = process.hrtime.bigint();
    const r = await spawn(cmd, args, input, timeoutMs);
    observe?.(cmd.split('/').pop() ?? cmd, r.code === 0, Number(process.hrtime.bigint() - started) / 1e9);
    return r;
  };
}

export const exec: Run = spawner();

function spawn(cmd: string, args: readonly string[], input: string | undefined, timeoutMs: number): Promise<ExecResult> {
  return new Promise((resolve) => {
    const child = execFile(cmd, args, { timeout: timeoutMs, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err === null) return resolve({ code: 0, stdout, stderr });
      const code = typeof err.code === 'number' ? err.code : 127;
      const why = err.killed === true && typeof err.code !== 'number' ? `killed after ${timeoutMs} ms (${err.message})` : err.message;
      resolve({ code, stdout, stderr: stderr === '' ? why : stderr });
    });
    // A command that could not start, or exits without reading, closes its stdin: no error.
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(input ?? '');
  });
}
