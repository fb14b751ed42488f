/**
 * Every OVSNET_* setting: one defaults table, validated once, frozen. docs/settings.md's table
 * and plugin/config.json list the same names (test/config/config.test.ts checks both).
 */
import os from 'node:os';
import path from 'node:path';
import { OvsnetError } from '../lib/errors.js';
import { CidrError, formatPrefix, parseCidr, type Prefix } from '../lib/cidr.js';
import { parseStore, type StoreConfig } from './config-store.js';

export type { StoreConfig };
import { checkSubnet, parseMinPrefix, type MinPrefix } from '../lib/subnets.js';

export interface Config {
  readonly store: StoreConfig;
  readonly storeTimeoutMs: number;
  readonly logLevel: LogLevel;
  readonly socket: string;
  /** The CNI front end's socket (src/cni/); '' = off. */
  readonly cniSocket: string;
  /** Where pools without --subnet come from: each range carved into subnets of `bits`. */
  readonly defaultPools: readonly DefaultPool[];
  /** The shortest prefix a subnet may have, per family. */
  readonly minPrefix: MinPrefix;
  readonly bridge: string;
  readonly datapath: 'auto' | 'system' | 'netdev';
  readonly ovsdb: string;
  /** The interface trunking VLAN networks onto the physical network ('' = none). */
  readonly uplink: string;
  /** This host in the registry: its name ('' = the hostname), tunnel address ('' = detect), lease TTL. */
  readonly host: { readonly name: string; readonly vtepIp: string; readonly ttlSeconds: number; readonly reclaimGraceSeconds: number };
  /** Where /metrics is served; undefined = off. */
  readonly metrics: { readonly host: string; readonly port: number } | undefined;
  /** File keeping IPAM changes the store did not confirm until they are settled; '' = memory only. */
  readonly journal: string;
  /** OVSNET_REAP_GRACE: how long a reservation whose holder is gone is kept (recovery/orphan-reaper.ts). */
  readonly reapGraceSeconds: number;
  /** Released veth pairs kept for reuse (driver/endpoint/spares.ts); 0 = none. */
  readonly spareVeths: number;
  /** The driver's scope: 'global' serves Docker swarm networks (swarm.ts). */
  readonly scope: 'local' | 'global';
  /** UDP port of ovsnet's VXLAN tunnels (the same on every host). */
  readonly vxlanPort: number;
  /** OVSNET_DOCKER_HOST: the Engine socket read for swarm services' VIPs (driver/vip/); '' = off. */
  readonly dockerSocket: string;
  /** OVSNET_NICE: the scheduling priority given at start (daemon/priority.ts), or left as started. */
  readonly nice: number | 'inherit';
}

export interface DefaultPool {
  readonly range: Prefix;
  readonly bits: number;
}

import { LOG_LEVELS, SETTINGS, type LogLevel, type SettingName } from './settings.js';

export { SETTINGS, type LogLevel, type SettingName };

type Env = Readonly<Record<string, string | undefined>>;

/** Validates every OVSNET_* variable; one error lists every problem, one per line. */
/** This host's name in the registry and its records: OVSNET_HOST, else the hostname. */
export const hostNameOf = (config: Pick<Config, 'host'>): string => (config.host.name === '' ? os.hostname() : config.host.name);

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
  const sharedDir = value('OVSNET_STATE_DIR_SHARED');
  if (sharedDir !== 'true' && sharedDir !== 'false') bad('OVSNET_STATE_DIR_SHARED', sharedDir);
  const storeTimeoutMs = parseIntIn(value('OVSNET_STORE_TIMEOUT_MS'), 100, 10_000);
  if (storeTimeoutMs === undefined) bad('OVSNET_STORE_TIMEOUT_MS', value('OVSNET_STORE_TIMEOUT_MS'));

  const logLevel = value('OVSNET_LOG_LEVEL') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) bad('OVSNET_LOG_LEVEL', logLevel);

  const socket = value('OVSNET_SOCKET');
  if (!path.isAbsolute(socket) || !socket.endsWith('.sock') || path.basename(socket) === '.sock') {
    bad('OVSNET_SOCKET', socket);
  }

  const cniRaw = value('OVSNET_CNI_SOCKET');
  const cniSocket = cniRaw === 'off' ? '' : cniRaw === '' ? socket.replace(/\.sock$/, '.cni') : cniRaw;
  if (cniSocket !== '' && (!path.isAbsolute(cniSocket) || cniSocket.endsWith('/') || cniSocket === socket))
    bad('OVSNET_CNI_SOCKET', cniRaw);

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
  const uplink = value('OVSNET_UPLINK');
  if (uplink !== '' && !/^[A-Za-z0-9_.:@-]{1,15}$/.test(uplink)) bad('OVSNET_UPLINK', uplink);
  const ttlSeconds = parseIntIn(value('OVSNET_HOST_TTL'), 2, 300);
  if (ttlSeconds === undefined) bad('OVSNET_HOST_TTL', value('OVSNET_HOST_TTL'));
  const reclaimGraceSeconds = parseIntIn(value('OVSNET_RECLAIM_GRACE'), 0, 86400);
  if (reclaimGraceSeconds === undefined) bad('OVSNET_RECLAIM_GRACE', value('OVSNET_RECLAIM_GRACE'));
  const reapGraceSeconds = parseIntIn(value('OVSNET_REAP_GRACE'), 1, 86400);
  if (reapGraceSeconds === undefined) bad('OVSNET_REAP_GRACE', value('OVSNET_REAP_GRACE'));
  const spareVeths = parseIntIn(value('OVSNET_SPARE_VETHS'), 0, 256);
  if (spareVeths === undefined) bad('OVSNET_SPARE_VETHS', value('OVSNET_SPARE_VETHS'));
  const journalRaw = value('OVSNET_JOURNAL');
  const journal = journalRaw === 'off' ? '' : journalRaw;
  if (journal !== '' && (!path.isAbsolute(journal) || journal.endsWith('/'))) bad('OVSNET_JOURNAL', journal);
  const scope = value('OVSNET_SCOPE') as Config['scope'];
  if (scope !== 'local' && scope !== 'global') bad('OVSNET_SCOPE', scope);
  else if (scope === 'global' && store?.kind !== 'etcd') {
    bad(
      'OVSNET_SCOPE',
      scope,
      'a swarm network spans hosts, and its VNI and members are kept in the store every node shares: set OVSNET_STORE=etcd://... on every node',
    );
  }
  const vxlanPort = parseIntIn(value('OVSNET_VXLAN_PORT'), 1, 65535);
  if (vxlanPort === undefined) bad('OVSNET_VXLAN_PORT', value('OVSNET_VXLAN_PORT'));
  const dockerHost = value('OVSNET_DOCKER_HOST');
  const dockerSocket = dockerHost === 'off' ? '' : parseDockerHost(dockerHost);
  if (dockerSocket === undefined) bad('OVSNET_DOCKER_HOST', dockerHost);
  const niceRaw = value('OVSNET_NICE');
  const nice = niceRaw === 'inherit' ? niceRaw : parseIntIn(niceRaw, -20, 19);
  if (nice === undefined) bad('OVSNET_NICE', niceRaw);
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
  const vxlan = vxlanPort ?? 4789;
  return deepFreeze({
    store: store.kind === 'sqlite' && sharedDir === 'true' ? { ...store, sharedDir: true } : store,
    storeTimeoutMs,
    logLevel,
    socket,
    cniSocket,
    defaultPools,
    minPrefix,
    bridge,
    datapath,
    ovsdb,
    uplink,
    host,
    metrics,
    journal,
    reapGraceSeconds: reapGraceSeconds ?? 60,
    spareVeths: spareVeths ?? 16,
    scope,
    vxlanPort: vxlan,
    dockerSocket: dockerSocket ?? '',
    nice: nice ?? 'inherit',
  });
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

/** The socket path of unix:///absolute/path: no ".." segment, no control character, at most 4096 characters. */
function parseDockerHost(raw: string): string | undefined {
  const p = raw.startsWith('unix://') ? raw.slice('unix://'.length) : '';
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  const clean = p.startsWith('/') && p.length <= 4096 && !p.split('/').includes('..') && !/[\0-\x1f\x7f-\x9f]/.test(p);
  return clean ? p : undefined;
}

/** An integer from min to max; a minus sign only where min is below 0. */
function parseIntIn(raw: string, min: number, max: number): number | undefined {
  if (!(min < 0 ? /^-?\d{1,10}$/ : /^\d+$/).test(raw)) return undefined;
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
