/**
 * Every OVSNET_* setting: one defaults table, validated once, frozen. The README's settings
 * table and plugin/config.json list the same names (test/config.test.ts checks both).
 */
import path from 'node:path';
import { OvsnetError } from './errors.js';
import { CidrError, formatPrefix, parseCidr, type Prefix } from './cidr.js';
import { parseStore, type StoreConfig } from './config-store.js';

export type { StoreConfig };
import { checkSubnet, parseMinPrefix, type MinPrefix } from './subnets.js';

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export interface Config {
  readonly store: StoreConfig;
  readonly storeTimeoutMs: number;
  readonly logLevel: LogLevel;
  readonly socket: string;
  /** Where pools without --subnet come from: each range carved into subnets of `bits`. */
  readonly defaultPools: readonly DefaultPool[];
  /** The shortest prefix a subnet may have, per family. */
  readonly minPrefix: MinPrefix;
  readonly bridge: string;
  readonly datapath: 'auto' | 'system' | 'netdev';
  readonly ovsdb: string;
  /** This host in the registry: its name ('' = the hostname), tunnel address ('' = detect), lease TTL. */
  readonly host: { readonly name: string; readonly vtepIp: string; readonly ttlSeconds: number; readonly reclaimGraceSeconds: number };
  /** Where /metrics is served; undefined = off. */
  readonly metrics: { readonly host: string; readonly port: number } | undefined;
  /** File keeping IPAM changes the store did not confirm until they are settled; '' = memory only. */
  readonly journal: string;
}

export interface DefaultPool {
  readonly range: Prefix;
  readonly bits: number;
}

/** Name, default and valid form of each setting: the source of the README table. */
export const SETTINGS = {
  OVSNET_STORE: {
    default: 'sqlite:/var/lib/ovsnet/state.db',
    form: 'sqlite:/absolute/path.db or etcd://host:port[,host:port...]',
    doc: 'State store: the embedded SQLite file (single host) or etcd endpoints (hosts sharing networks).',
  },
  OVSNET_STORE_TIMEOUT_MS: {
    default: '3000',
    form: 'an integer from 100 to 10000',
    doc: 'Bound on every store call; a slower store fails the call as unavailable (Docker gives up after ~15 s).',
  },
  OVSNET_ETCD_CA: { default: '', form: 'path to a PEM file', doc: 'CA bundle: connect to etcd over TLS.' },
  OVSNET_ETCD_CERT: { default: '', form: 'path to a PEM file (with OVSNET_ETCD_KEY)', doc: 'Client certificate for etcd TLS.' },
  OVSNET_ETCD_KEY: { default: '', form: 'path to a PEM file (with OVSNET_ETCD_CERT)', doc: 'Client key for etcd TLS.' },
  OVSNET_ETCD_USERNAME: { default: '', form: 'an etcd user name (with OVSNET_ETCD_PASSWORD)', doc: 'etcd authentication user.' },
  OVSNET_ETCD_PASSWORD: {
    default: '',
    form: 'the password of OVSNET_ETCD_USERNAME (not with OVSNET_ETCD_PASSWORD_FILE)',
    doc: 'etcd authentication password. Shown by `docker plugin inspect`: prefer OVSNET_ETCD_PASSWORD_FILE.',
  },
  OVSNET_ETCD_PASSWORD_FILE: {
    default: '',
    form: 'absolute path to a file holding the password on one line (not with OVSNET_ETCD_PASSWORD)',
    doc: 'etcd authentication password, read from this file at start, so that it is in no environment (managed plugin: a file under /etc/ovsnet, the read-only secrets mount).',
  },
  OVSNET_ETCD_ALLOW_PLAINTEXT_CREDENTIALS: {
    default: 'false',
    form: 'true or false',
    doc: 'With a user and password but no OVSNET_ETCD_CA the password would cross the network in clear text, so ovsnet refuses to start; true accepts that risk (an etcd on a trusted link only).',
  },
  OVSNET_LOG_LEVEL: { default: 'info', form: LOG_LEVELS.join('|'), doc: 'Log level of the JSON logs on stdout.' },
  OVSNET_SOCKET: {
    default: '/run/docker/plugins/ovsnet.sock',
    form: 'an absolute path ending in .sock',
    doc: 'Plugin socket Docker finds the plugin by (the driver name is the file name without .sock).',
  },
  OVSNET_DEFAULT_POOLS: {
    default: '10.192.0.0/10:24,fd5e:0e00::/40:64',
    form: "comma-separated RANGE:LENGTH, e.g. 10.192.0.0/10:24,fd5e:e00::/40:64 (at least one IPv4 range; LENGTH at least the range's own)",
    doc: 'Ranges that networks created without --subnet get their pool from, and the pool size carved from each.',
  },
  OVSNET_MIN_PREFIX: {
    default: '8,32',
    form: 'IPV4,IPV6 prefix lengths, IPv4 1-30 and IPv6 1-124, e.g. 8,32',
    doc: 'The largest subnets (shortest prefixes) networks and pools may have; OVSNET_DEFAULT_POOLS must keep to them too.',
  },
  OVSNET_BRIDGE: {
    default: 'ovsnet0',
    form: 'an interface name of 1-15 letters, digits, "-", "_" or "."',
    doc: 'The Open vSwitch integration bridge every network is a VLAN segment of (created if missing).',
  },
  OVSNET_DATAPATH: {
    default: 'auto',
    form: 'auto|system|netdev',
    doc: 'OVS datapath of the bridge: system (kernel module), netdev (userspace), auto = system when the openvswitch module is loaded.',
  },
  OVSNET_OVSDB: {
    default: 'unix:/var/run/openvswitch/db.sock',
    form: 'unix:/absolute/path or tcp:host:port',
    doc: 'Where ovsdb-server listens; ovsnet speaks OVSDB JSON-RPC to it (no ovs-vsctl).',
  },
  OVSNET_HOST: {
    default: '',
    form: 'a host name of 1-63 letters, digits, "-", "_" or "." (default: the hostname)',
    doc: 'Name of this host in the host registry (hosts sharing a store must differ).',
  },
  OVSNET_VTEP_IP: {
    default: '',
    form: 'an IPv4 address of this host (default: the address of the interface holding the default route)',
    doc: 'Tunnel endpoint address other hosts reach this one at.',
  },
  OVSNET_HOST_TTL: {
    default: '10',
    form: 'seconds, an integer from 2 to 300',
    doc: 'Lease of the host registration: a host that stops is gone from its peers within this time (up to ~0.6 s more: etcd looks for expired leases every 500 ms).',
  },
  OVSNET_RECLAIM_GRACE: {
    default: '600',
    form: 'seconds, an integer from 0 to 86400',
    doc: "How long a dead host's address blocks and reservations in logical networks are kept (its containers may still run) before peers reclaim them.",
  },
  OVSNET_JOURNAL: {
    default: '/var/lib/ovsnet/unconfirmed.json',
    form: 'an absolute file path, or off (kept in memory only)',
    doc: 'Where IPAM changes the store did not confirm (a timeout: applied or not?) are kept until settled, so that a restart during a store outage leaks no address.',
  },
  OVSNET_METRICS_ADDR: {
    default: '',
    form: 'PORT (on 127.0.0.1) or HOST:PORT, e.g. 9477 or 127.0.0.1:9477',
    doc: 'Serve Prometheus metrics on GET /metrics there; off when empty.',
  },
} as const;

export type SettingName = keyof typeof SETTINGS;

type Env = Readonly<Record<string, string | undefined>>;

/** Validates every OVSNET_* variable; one error lists every problem, one per line. */
export function loadConfig(env: Env): Config {
  const problems: string[] = [];
  const value = (name: SettingName): string => {
    const v = env[name];
    return v === undefined || v.trim() === '' ? SETTINGS[name].default : v.trim();
  };
  const bad = (name: SettingName, got: string, why?: string) =>
    problems.push(`${name}=${JSON.stringify(got)} is not valid${why === undefined ? '' : ` (${why})`}: expected ${SETTINGS[name].form}`);

  for (const name of Object.keys(env)) {
    if (name.startsWith('OVSNET_') && !(name in SETTINGS)) {
      problems.push(`${name} is not a setting of ovsnet: valid ones are ${Object.keys(SETTINGS).join(', ')}`);
    }
  }

  const given = (name: SettingName): string | undefined => {
    const v = env[name]?.trim();
    return v === undefined || v === '' ? undefined : v;
  };
  const store = parseStore(value('OVSNET_STORE'), given, (why) => bad('OVSNET_STORE', value('OVSNET_STORE'), why), problems);
  const storeTimeoutMs = parseIntIn(value('OVSNET_STORE_TIMEOUT_MS'), 100, 10_000);
  if (storeTimeoutMs === undefined) bad('OVSNET_STORE_TIMEOUT_MS', value('OVSNET_STORE_TIMEOUT_MS'));

  const logLevel = value('OVSNET_LOG_LEVEL') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) bad('OVSNET_LOG_LEVEL', logLevel);

  const socket = value('OVSNET_SOCKET');
  if (!path.isAbsolute(socket) || !socket.endsWith('.sock') || path.basename(socket) === '.sock') {
    bad('OVSNET_SOCKET', socket);
  }

  const minPrefix = parseMinPrefix(value('OVSNET_MIN_PREFIX'));
  if (typeof minPrefix === 'string') bad('OVSNET_MIN_PREFIX', value('OVSNET_MIN_PREFIX'), minPrefix);
  const defaultPools = parseDefaultPools(value('OVSNET_DEFAULT_POOLS'), typeof minPrefix === 'string' ? undefined : minPrefix);
  if (typeof defaultPools === 'string') bad('OVSNET_DEFAULT_POOLS', value('OVSNET_DEFAULT_POOLS'), defaultPools);

  const bridge = value('OVSNET_BRIDGE');
  if (!/^[A-Za-z0-9_.-]{1,15}$/.test(bridge)) bad('OVSNET_BRIDGE', bridge);
  const datapath = value('OVSNET_DATAPATH') as Config['datapath'];
  if (!['auto', 'system', 'netdev'].includes(datapath)) bad('OVSNET_DATAPATH', datapath);
  const ovsdb = value('OVSNET_OVSDB');
  if (!/^unix:\/.+|^tcp:[A-Za-z0-9.-]+:\d{1,5}$/.test(ovsdb)) bad('OVSNET_OVSDB', ovsdb);

  const hostName = value('OVSNET_HOST');
  if (hostName !== '' && !/^[A-Za-z0-9_.-]{1,63}$/.test(hostName)) bad('OVSNET_HOST', hostName);
  const vtepIp = value('OVSNET_VTEP_IP');
  if (vtepIp !== '' && !/^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$/.test(vtepIp)) bad('OVSNET_VTEP_IP', vtepIp);
  const ttlSeconds = parseIntIn(value('OVSNET_HOST_TTL'), 2, 300);
  if (ttlSeconds === undefined) bad('OVSNET_HOST_TTL', value('OVSNET_HOST_TTL'));
  const reclaimGraceSeconds = parseIntIn(value('OVSNET_RECLAIM_GRACE'), 0, 86400);
  if (reclaimGraceSeconds === undefined) bad('OVSNET_RECLAIM_GRACE', value('OVSNET_RECLAIM_GRACE'));
  const journalRaw = value('OVSNET_JOURNAL');
  const journal = journalRaw === 'off' ? '' : journalRaw;
  if (journal !== '' && (!path.isAbsolute(journal) || journal.endsWith('/'))) bad('OVSNET_JOURNAL', journal);
  const metricsRaw = value('OVSNET_METRICS_ADDR');
  const m = /^(?:(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):)?(\d{1,5})$/.exec(metricsRaw);
  let metrics: Config['metrics'];
  if (metricsRaw !== '') {
    if (m === null || Number(m[2]) < 1 || Number(m[2]) > 65535) bad('OVSNET_METRICS_ADDR', metricsRaw);
    else metrics = { host: (m[1] ?? '127.0.0.1').replace(/^\[|\]$/g, ''), port: Number(m[2]) };
  }

  if (
    problems.length > 0 ||
    store === undefined ||
    storeTimeoutMs === undefined ||
    typeof defaultPools === 'string' ||
    typeof minPrefix === 'string'
  ) {
    throw new OvsnetError('CONFIG_INVALID', `invalid settings:\n  ${problems.join('\n  ')}`);
  }
  const host = { name: hostName, vtepIp, ttlSeconds: ttlSeconds ?? 10, reclaimGraceSeconds: reclaimGraceSeconds ?? 600 };
  return deepFreeze({ store, storeTimeoutMs, logLevel, socket, defaultPools, minPrefix, bridge, datapath, ovsdb, host, metrics, journal });
}

/** The pools, or why the value is wrong. */
function parseDefaultPools(raw: string, min: MinPrefix | undefined): DefaultPool[] | string {
  const pools: DefaultPool[] = [];
  for (const item of raw.split(',').map((x) => x.trim())) {
    const colon = item.lastIndexOf(':');
    const len = item.slice(colon + 1);
    if (colon < 0 || !item.slice(0, colon).includes('/') || !/^\d{1,3}$/.test(len)) return `${JSON.stringify(item)} is not RANGE:LENGTH`;
    let range: Prefix;
    try {
      range = parseCidr(item.slice(0, colon));
    } catch (err) {
      return err instanceof CidrError ? err.message : String(err);
    }
    const bits = Number(len);
    const max = range.family === 4 ? 30 : 126;
    if (bits < range.bits || bits > max) {
      return `pool length /${bits} of ${formatPrefix(range)} must be from /${range.bits} to /${max}`;
    }
    try {
      checkSubnet({ ...range, bits }, 'a pool of', min); // each pool carved from the range, and the range itself below
      checkSubnet({ family: range.family, base: range.base, bits: Math.max(range.bits, 1) }, 'range', { 4: 1, 6: 1 });
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
    pools.push({ range: { family: range.family, base: range.base, bits: range.bits }, bits });
  }
  if (!pools.some((p) => p.range.family === 4)) return 'at least one IPv4 range is needed';
  return pools;
}

function parseIntIn(raw: string, min: number, max: number): number | undefined {
  if (!/^\d+$/.test(raw)) return undefined;
  const n = Number(raw);
  return n >= min && n <= max ? n : undefined;
}

function deepFreeze<T>(o: T): T {
  if (o !== null && typeof o === 'object') {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}
