/** The CNI plugin binary (dist/src/cni/client.js) run as a runtime runs it: environment and stdin. */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { CID, NETNS } from './cni.js';

const CLIENT = fileURLToPath(new URL('../../src/cni/client.js', import.meta.url));

export interface Ran {
  status: number | null;
  out: string;
  err: string;
  json: Record<string, unknown>;
  ms: number;
}

/** Runs the plugin as a runtime does. */
export function plugin(command: string, config: Record<string, unknown> | string, env: Record<string, string> = {}): Promise<Ran> {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLIENT], {
      env: {
        PATH: process.env.PATH ?? '',
        CNI_COMMAND: command,
        CNI_CONTAINERID: CID,
        CNI_NETNS: NETNS,
        CNI_IFNAME: 'eth0',
        CNI_PATH: '/opt/cni/bin',
        ...env,
      },
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('close', (status) => {
      let json: Record<string, unknown> = {};
      try {
        json = out.trim() === '' ? {} : (JSON.parse(out) as Record<string, unknown>);
      } catch {
        json = { unparsed: out };
      }
      resolve({ status, out, err, json, ms: performance.now() - started });
    });
    child.stdin.end(typeof config === 'string' ? config : JSON.stringify(config));
  });
}
