/**
 * `ovsnet ipam adopt`: takes over the addresses another allocator handed out, so that ovsnet
 * never hands them out again and their holders keep them when they move to ovsnet.
 * `host-local NAME`: the CNI host-local IPAM's files under /var/lib/cni/networks/NAME (one per
 * address, holding the container ID and, since CNI plugins 0.8, the interface name on a second
 * line), each held by `cni/<containerID>/<ifname>` so that ovsnet's CNI ADD gets the same
 * address. `docker NETWORK`: the running containers' addresses (`docker network inspect`), held
 * by `adopted/docker/<containerID>` until `docker network connect --ip` takes it over. Each goes
 * into the ovsnet pool of this host holding it (create-if-absent: an address someone else holds
 * is reported, never given twice). Adopting again changes nothing.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { parseAddress } from '../lib/cidr.js';
import { OvsnetError, messageOf } from '../lib/errors.js';
import { containerIdProblem, ifnameProblem, quoted } from '../cni/names.js';
import { holders } from '../ipam-driver/state/holder-keys.js';
import type { Ipam } from '../ipam-driver/ipam.js';
import { describeHolder } from '../ipam-driver/state/records.js';

/** One address another allocator handed out, and to whom. */
export interface Foreign {
  readonly address: string;
  readonly holder: string;
  readonly name?: string;
  /** Something the operator should know about this one. */
  readonly note?: string;
  /** Why this one is not adopted (an unsafe or malformed source): reported, nothing done. */
  readonly refused?: string;
}

export interface AdoptRow {
  address: string;
  holder: string;
  outcome: 'adopted' | 'held' | 'taken' | 'no pool' | 'refused';
  detail: string;
}

export const HOST_LOCAL_DIR = '/var/lib/cni/networks';

/** Largest reservation file read: host-local writes a container ID and an interface name. */
const HOST_LOCAL_FILE_MAX = 1024;

/**
 * One host-local reservation file, read without following a link and without blocking (a FIFO
 * named like an address), a regular file of at most HOST_LOCAL_FILE_MAX bytes: its container
 * ID and interface name, or why it is refused.
 */
function readReservation(file: string): { id: string; ifname?: string } | { refused: string } {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK | fs.constants.O_NOCTTY);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { refused: code === 'ELOOP' ? 'a symbolic link' : `cannot be opened (${code ?? messageOf(err)})` };
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) return { refused: 'not a regular file' };
    if (st.size > HOST_LOCAL_FILE_MAX) return { refused: `${st.size} bytes, more than a reservation's ${HOST_LOCAL_FILE_MAX}` };
    const buf = Buffer.alloc(HOST_LOCAL_FILE_MAX + 1);
    const n = fs.readSync(fd, buf, 0, buf.length, 0);
    if (n > HOST_LOCAL_FILE_MAX) return { refused: `more than a reservation's ${HOST_LOCAL_FILE_MAX} bytes` };
    const [id = '', ifname] = buf
      .toString('utf8', 0, n)
      .split(/\r?\n/)
      .map((l) => l.trim());
    return { id, ...(ifname === undefined || ifname === '' ? {} : { ifname }) };
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The host-local IPAM's reservations of network `name` under `dir` (the store's layout,
 * disk/backend.go). `name` is one directory under `dir` (a CNI network name: no "/", not ".."); a
 * file named like an address that is not a plain reservation (a link, a FIFO, too large, or
 * holding a container ID or interface name the CNI spec does not allow) is reported as refused
 * and adopts nothing.
 */
export function readHostLocal(dir: string, name: string): Foreign[] {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(name)) {
    throw new OvsnetError(
      'IPAM_ADOPT_SOURCE_INVALID',
      `${quoted(name)} is not a host-local network name: a CNI network name (a letter or digit, then letters, digits, "_", "." or "-"), the name of a directory under ${dir}`,
    );
  }
  const where = path.join(dir, name);
  const st = fs.lstatSync(where, { throwIfNoEntry: false });
  if (st === undefined) {
    throw new OvsnetError(
      'IPAM_ADOPT_SOURCE_INVALID',
      `no host-local network ${name}: ${where} does not exist; give the name of a directory under ${dir}`,
    );
  }
  if (!st.isDirectory()) {
    throw new OvsnetError(
      'IPAM_ADOPT_SOURCE_INVALID',
      `${where} is not a directory (a link or a file): give the name of a directory under ${dir}`,
    );
  }
  const found: Foreign[] = [];
  for (const file of fs.readdirSync(where).sort()) {
    try {
      parseAddress(file);
    } catch {
      continue; // lock, last_reserved_ip.N: not reservations
    }
    const read = readReservation(path.join(where, file));
    const refuse = (why: string) => found.push({ address: file, holder: '', refused: `${path.join(where, file)}: ${why}: not adopted` });
    if ('refused' in read) {
      refuse(read.refused);
      continue;
    }
    if (read.id === '') continue;
    const ifname = read.ifname ?? 'eth0';
    const bad = containerIdProblem(read.id) ?? (read.ifname === undefined ? undefined : ifnameProblem(read.ifname));
    if (bad !== undefined) {
      refuse(`holds ${quoted(read.ifname === undefined ? read.id : `${read.id} ${read.ifname}`, 60)}, whose name ${bad}`);
      continue;
    }
    found.push({
      address: file,
      holder: holders.cni(read.id, ifname),
      ...(read.ifname === undefined ? { note: 'no interface name in the file (host-local before 0.8): eth0 assumed' } : {}),
    });
  }
  return found;
}

interface DockerNetwork {
  Name?: string;
  Containers?: Record<string, { Name?: string; IPv4Address?: string; IPv6Address?: string }>;
}

/** The running containers of a Docker network and their addresses (GET /networks/NAME). */
export async function readDocker(dockerSocket: string, network: string): Promise<Foreign[]> {
  const { status, body } = await dockerGet(dockerSocket, `/networks/${encodeURIComponent(network)}`);
  if (status === 404)
    throw new OvsnetError('IPAM_ADOPT_SOURCE_INVALID', `Docker has no network ${network}: give a name or ID from docker network ls`);
  if (status !== 200)
    throw new OvsnetError('IPAM_ADOPT_SOURCE_INVALID', `Docker answered ${status} for network ${network}: ${body.slice(0, 200)}`);
  let net: DockerNetwork;
  try {
    net = JSON.parse(body) as DockerNetwork;
  } catch {
    throw new OvsnetError('IPAM_ADOPT_SOURCE_INVALID', `Docker's answer for network ${network} is not JSON: ${body.slice(0, 200)}`);
  }
  const found: Foreign[] = [];
  const containers = net !== null && typeof net === 'object' && typeof net.Containers === 'object' ? net.Containers : undefined;
  for (const [id, c] of Object.entries(containers ?? {})) {
    // Only what Docker itself would answer becomes a holder: a container's 64-hex ID, string
    // addresses, a name without control characters; anything else is not a container of Docker's.
    if (!DOCKER_ID.test(id) || c === null || typeof c !== 'object') continue;
    const name = typeof c.Name === 'string' && CONTAINER_NAME.test(c.Name) ? { name: c.Name } : {};
    for (const a of [c.IPv4Address, c.IPv6Address]) {
      if (typeof a !== 'string' || a === '') continue;
      found.push({ address: a.split('/')[0] ?? '', holder: holders.adoptedDocker(id), ...name });
    }
  }
  return found;
}

const DOCKER_ID = /^[0-9a-f]{64}$/;
// Docker's container names: [a-zA-Z0-9][a-zA-Z0-9_.-]+, with or without its leading "/".
const CONTAINER_NAME = /^\/?[a-zA-Z0-9][a-zA-Z0-9_.-]{0,254}$/;
// Docker's answer for one network is small; a bigger one is not Docker's.
const MAX_ANSWER = 16 * 1024 * 1024;

function dockerGet(socket: string, url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: socket, path: url, method: 'GET', timeout: 5000 }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => {
        body += d.toString();
        if (body.length > MAX_ANSWER) req.destroy(new Error(`an answer over ${MAX_ANSWER} bytes`));
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', (err) =>
      reject(
        new OvsnetError('IPAM_ADOPT_SOURCE_INVALID', `Docker is not reachable at ${socket} (${messageOf(err)}): start dockerd`, {
          cause: err,
        }),
      ),
    );
    req.on('timeout', () => req.destroy(new Error('no answer within 5 s')));
    req.end();
  });
}

/** Adopts each address into this host's ovsnet pool holding it. */
export async function adopt(ipam: Ipam, from: string, foreign: readonly Foreign[]): Promise<AdoptRow[]> {
  const rows: AdoptRow[] = [];
  for (const f of foreign) {
    if (f.refused !== undefined) {
      rows.push({ address: f.address, holder: f.holder, outcome: 'refused', detail: f.refused });
      continue;
    }
    const res = await ipam.adopt(f.address, f.holder, from, f.name);
    const note = f.note === undefined ? '' : `; ${f.note}`;
    rows.push({
      address: f.address,
      holder: f.holder,
      outcome: res.outcome,
      detail:
        res.outcome === 'no pool'
          ? `no ovsnet pool of this host holds it: create the ovsnet network of this subnet first (--ipam-driver ovsnet --subnet ...)`
          : res.outcome === 'taken'
            ? `in pool ${res.pool}, already reserved by ${describeHolder(res.by)}: not adopted`
            : `pool ${res.pool}${note}`,
    });
  }
  return rows;
}
