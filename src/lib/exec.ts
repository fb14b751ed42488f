/**
 * The one place ovsnet runs a child process: iptables (ports/nat.ts), ovs-ofctl (ovs/openflow.ts),
 * ip (uplink/host-ip.ts, cni/netns.ts). A run never rejects: it answers the exit code (127 when
 * the command could not start, was killed at its timeout, 10 s unless said, or by a signal),
 * stdout, and stderr (why it could not start or was killed, when the command wrote none).
 * Callers that need a failure as an error take it from failed(), which names the program, its
 * arguments, the exit code and stderr.
 *
 * Its stdin is `input`: text through a pipe (iptables-restore's batch), or a file (`{ file }`)
 * for a program that reads only named files: ovs-ofctl diff-flows, given `/dev/stdin`. The
 * file has no name (O_TMPFILE under the system's temporary directory; where that filesystem
 * cannot, a file unlinked, with its directory, before the child starts), so nothing of it
 * outlives the run, not even a daemon killed during it.
 */
import { spawn as spawnChild } from 'node:child_process';
import { constants } from 'node:fs';
import { mkdtemp, open, rm, type FileHandle } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export const EXEC_TIMEOUT_MS = 10_000;
/** The most a child may write to stdout or to stderr: past it, it is killed. */
const MAX_OUTPUT = 64 * 1024 * 1024;

export interface ExecResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** A child's stdin: text through a pipe, or `{ file }`: the text in a file it can open again by /dev/stdin. */
export type Stdin = string | { readonly file: string };

/** The text of a child's stdin, whichever way it is given (for fakes of Run). */
export const stdinText = (input: Stdin | undefined): string => (typeof input === 'object' ? input.file : (input ?? ''));

/** How a child process is run; a fake in unit tests. */
export type Run = (cmd: string, args: readonly string[], input?: Stdin, timeoutMs?: number) => Promise<ExecResult>;

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
    const r = await run(cmd, args, input, timeoutMs);
    observe?.(cmd.split('/').pop() ?? cmd, r.code === 0, Number(process.hrtime.bigint() - started) / 1e9);
    return r;
  };
}

export const exec: Run = spawner();

async function run(cmd: string, args: readonly string[], input: Stdin | undefined, timeoutMs: number): Promise<ExecResult> {
  if (typeof input !== 'object') return child(cmd, args, input ?? '', timeoutMs);
  let file: FileHandle;
  try {
    file = await unnamedFile(input.file);
  } catch (e) {
    return { code: 127, stdout: '', stderr: `could not hold ${cmd}'s input in a file under ${os.tmpdir()}: ${(e as Error).message}` };
  }
  try {
    return await child(cmd, args, file.fd, timeoutMs);
  } finally {
    await file.close();
  }
}

/** Linux's O_TMPFILE: __O_TMPFILE with O_DIRECTORY (whose value differs between architectures). */
const O_TMPFILE = 0o20000000 | constants.O_DIRECTORY;

/**
 * `text` in a file with no name under `tmp`, open for reading (a child's open of /dev/stdin
 * starts at its beginning). `tmpfile` false: the fallback only (for its test).
 */
export async function unnamedFile(text: string, tmp = os.tmpdir(), tmpfile = true): Promise<FileHandle> {
  let file: FileHandle;
  try {
    if (!tmpfile) throw new Error('O_TMPFILE not tried');
    file = await open(tmp, O_TMPFILE | constants.O_RDWR, 0o600);
  } catch {
    // A filesystem without O_TMPFILE (EOPNOTSUPP, EISDIR on kernels that ignore it): a named
    // file in a directory of its own (mode 0700), both gone before the child starts.
    const dir = await mkdtemp(path.join(tmp, 'ovsnet-stdin-'));
    try {
      file = await open(path.join(dir, 'stdin'), 'wx+', 0o600);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
  try {
    await file.writeFile(text);
    return file;
  } catch (e) {
    await file.close();
    throw e;
  }
}

function child(cmd: string, args: readonly string[], stdin: string | number, timeoutMs: number): Promise<ExecResult> {
  return new Promise((resolve) => {
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let size = 0;
    let why: string | undefined;
    const p = spawnChild(cmd, args, { stdio: [typeof stdin === 'number' ? stdin : 'pipe', 'pipe', 'pipe'] });
    // As execFile did: its pipes closed too, so that a grandchild holding them cannot keep the run open.
    const kill = (reason: string) => {
      why ??= reason;
      p.stdout?.destroy();
      p.stderr?.destroy();
      p.kill('SIGTERM');
    };
    const timer = setTimeout(() => kill(`killed after ${timeoutMs} ms`), timeoutMs);
    const collect = (into: Buffer[]) => (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_OUTPUT) kill(`killed: it wrote over ${MAX_OUTPUT} bytes`);
      else into.push(chunk);
    };
    p.stdout?.on('data', collect(out));
    p.stderr?.on('data', collect(err));
    let started: Error | undefined;
    p.on('error', (e) => (started ??= e));
    p.on('close', (code, signal) => {
      clearTimeout(timer);
      const stdout = Buffer.concat(out).toString('utf8');
      const stderr = Buffer.concat(err).toString('utf8');
      if (started !== undefined) return resolve({ code: 127, stdout, stderr: stderr === '' ? started.message : stderr });
      if (why === undefined && code === 0) return resolve({ code: 0, stdout, stderr });
      const failure = why ?? (code === null ? `killed by ${signal ?? 'a signal'}` : `${cmd} exited ${code}`);
      resolve({
        code: why !== undefined || code === null ? 127 : code,
        stdout,
        stderr: stderr === '' ? `${failure} (${[cmd, ...args].join(' ')})` : stderr,
      });
    });
    if (typeof stdin === 'string') {
      // A command that could not start, or exits without reading, closes its stdin: no error.
      p.stdin?.on('error', () => undefined);
      p.stdin?.end(stdin);
    }
  });
}
