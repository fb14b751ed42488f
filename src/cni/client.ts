/**
 * The CNI plugin `ovsnet` (installed as /opt/cni/bin/ovsnet): a thin client, a second entry
 * point beside main.ts, and like it the reader of its own environment. It reads the CNI
 * environment and stdin, answers VERSION itself, and sends every other command as one request
 * to the ovsnet daemon over its CNI socket (protocol.ts); it prints the daemon's result or CNI
 * error and exits 0 or 1. All logic is in the daemon (src/cni/service.ts).
 *
 * A daemon it cannot reach (not running, starting, stopped mid-request) is CNI error 11, try
 * again later; an answer of another RPC version is INCOMPATIBLE_API_VERSION. Whatever happens,
 * the runtime gets a CNI error object, never a stack trace.
 */
import http from 'node:http';
import { CNI_VERSIONS, DEFAULT_CNI_SOCKET, RPC_VERSION, cniError, type CniCommand, type CniError, type RpcAnswer } from './protocol.js';

/** Bound on one command: the daemon bounds its own steps well below this. */
const TIMEOUT_MS = 120_000;
/** Largest answer read from the daemon. */
const MAX_ANSWER = 1 << 20;

const COMMANDS: readonly string[] = ['ADD', 'DEL', 'CHECK', 'GC', 'STATUS', 'VERSION'];

/** What the runtime gets: text for stdout and the exit status. */
interface Outcome {
  readonly out: string;
  readonly status: 0 | 1;
}

const failed = (e: CniError): Outcome => ({ out: JSON.stringify(e), status: 1 });

function readStdin(): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', (d: string) => (text += d));
    process.stdin.on('end', () => resolve(text));
    process.stdin.on('error', reject);
  });
}

/** The daemon's answer, or the CNI error that stands for not getting one. */
function ask(socketPath: string, body: string, cniVersion: string): Promise<RpcAnswer> {
  const tryAgain = (why: string): RpcAnswer => ({
    rpcVersion: RPC_VERSION,
    error: cniError(cniVersion, 'TRY_AGAIN_LATER', `the ovsnet daemon ${why}`),
  });
  return new Promise((resolve) => {
    const req = http.request({ socketPath, path: '/cni', method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        text += d;
        if (text.length > MAX_ANSWER) res.destroy(new Error(`its answer is over ${MAX_ANSWER} bytes`));
      });
      res.on('error', (err) => resolve(tryAgain(`stopped answering on ${socketPath} (${err.message})`)));
      res.on('end', () => {
        try {
          resolve(JSON.parse(text) as RpcAnswer);
        } catch {
          resolve({
            rpcVersion: RPC_VERSION,
            error: cniError(
              cniVersion,
              'UNKNOWN_RPC_ERROR',
              `the ovsnet daemon on ${socketPath} answered ${res.statusCode ?? 0} with no CNI answer: ${text.slice(0, 200)}`,
            ),
          });
        }
      });
    });
    req.setTimeout(TIMEOUT_MS, () => req.destroy(new Error(`no answer within ${TIMEOUT_MS / 1000} s`)));
    req.on('error', (err: NodeJS.ErrnoException) => {
      const why =
        err.code === 'ENOENT' || err.code === 'ECONNREFUSED'
          ? `is not answering on ${socketPath} (not running, or starting; ${err.code})`
          : `did not answer on ${socketPath} (${err.message})`;
      resolve(tryAgain(why));
    });
    req.end(body);
  });
}

async function run(env: NodeJS.ProcessEnv): Promise<Outcome> {
  const command = env.CNI_COMMAND ?? '';
  const stdin = await readStdin();
  let config: Record<string, unknown> = {};
  let parsed = true;
  try {
    const value: unknown = JSON.parse(stdin === '' ? '{}' : stdin);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) config = value as Record<string, unknown>;
    else parsed = false;
  } catch {
    parsed = false;
  }
  const asked = typeof config.cniVersion === 'string' ? config.cniVersion : '';
  const cniVersion = (CNI_VERSIONS as readonly string[]).includes(asked) ? asked : '1.0.0';
  if (!COMMANDS.includes(command)) {
    const why = `CNI_COMMAND is ${JSON.stringify(command)}: expected one of ${COMMANDS.join(', ')}`;
    return failed(cniError(cniVersion, 'INVALID_ENVIRONMENT_VARIABLES', why));
  }
  if (command === 'VERSION') return { out: JSON.stringify({ cniVersion, supportedVersions: CNI_VERSIONS }), status: 0 };
  if (!parsed)
    return failed(
      cniError(cniVersion, 'DECODING_FAILURE', `the network configuration on stdin is not a JSON object: ${stdin.slice(0, 200)}`),
    );
  if (asked !== cniVersion) {
    const why = `cniVersion ${JSON.stringify(config.cniVersion)} is not one ovsnet speaks: use one of ${CNI_VERSIONS.join(', ')}`;
    return failed(cniError(cniVersion, 'INCOMPATIBLE_CNI_VERSION', why));
  }
  const socketPath = typeof config.socket === 'string' ? config.socket : DEFAULT_CNI_SOCKET;
  const body = JSON.stringify({
    rpcVersion: RPC_VERSION,
    command: command as CniCommand,
    containerId: env.CNI_CONTAINERID ?? '',
    netns: env.CNI_NETNS ?? '',
    ifname: env.CNI_IFNAME ?? '',
    args: env.CNI_ARGS ?? '',
    path: env.CNI_PATH ?? '',
    config: stdin,
  });
  const answer = await ask(socketPath, body, cniVersion);
  if (answer.rpcVersion !== RPC_VERSION) {
    const why = `this plugin speaks ovsnet CNI RPC version ${RPC_VERSION}, the daemon on ${socketPath} version ${String(answer.rpcVersion)}: install the plugin of the daemon's ovsnet`;
    return failed(cniError(cniVersion, 'INCOMPATIBLE_API_VERSION', why));
  }
  if (answer.error !== undefined) return failed(answer.error);
  return { out: answer.result === undefined ? '' : JSON.stringify(answer.result), status: 0 };
}

run(process.env)
  .catch((err: unknown) =>
    failed(cniError('1.0.0', 'IO_FAILURE', `the ovsnet CNI plugin failed: ${err instanceof Error ? err.message : String(err)}`)),
  )
  .then(({ out, status }) => {
    if (out !== '') process.stdout.write(`${out}\n`);
    process.exitCode = status;
  })
  .catch(() => (process.exitCode = 1));
