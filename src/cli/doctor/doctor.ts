/**
 * `ovsnet doctor`: health checks of this host as the daemon sees it (store, Open vSwitch, the
 * daemon's socket, Docker, orphans, MTU, the cluster), each with the fix when it fails. Pure
 * reads; nothing here changes state.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { Config } from '../../config/config.js';
import { messageOf } from '../../lib/errors.js';
import { listEndpoints, listNetworks } from '../../driver/records/driver-records.js';
import { countLogical } from '../../driver/records/logical-records.js';
import { countProblems, listReservations } from '../../ipam-driver/state/ipam-reads.js';
import { recordProblem } from '../../store/decode.js';
import { FAMILIES } from '../../store/shapes.js';
import type { Store } from '../../store/types.js';
import type { Ovsdb } from '../../driver/ovs/ovsdb.js';
import { endpointOf } from '../../driver/ovs/external-ids.js';
import { defaultRouteAddress, interfaceOf, ovsKernelModuleLoaded } from '../../host/host-info.js';
import { registeredHosts } from '../../cluster/hosts.js';
import { endpoints, networks, pools } from '../inspect.js';
import { DOCKER_SOCKET, dockerNetworkPlugins } from '../docker-api.js';
import { openflowCheck } from './openflow.js';
import type { AdminInfo, SwarmVipsInfo } from '../../plugin-api/admin-routes.js';
import type { Check } from '../output.js';
export type { Check } from '../output.js';

/**
 * Does the daemon answer on its socket? Asked with IpamDriver.GetCapabilities, which every
 * ovsnet serves and which changes nothing (Plugin.Activate would start a reconcile).
 */
export function daemonAnswers(socket: string): Promise<boolean> {
  return new Promise((resolve) => {
    if (!fs.existsSync(socket)) {
      resolve(false);
      return;
    }
    const req = http.request({ socketPath: socket, path: '/IpamDriver.GetCapabilities', method: 'POST', timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

/** Swarm VIPs (OVSNET_SCOPE=global): can the daemon read the local Engine, and what it programs. */
export function swarmVipsCheck(v: SwarmVipsInfo): Check {
  const check = 'swarm VIPs';
  const networks = Object.values(v.networks ?? {});
  const services = networks.reduce((n, s) => n + s.length, 0);
  if (v.socket === '') {
    return {
      check,
      ok: false,
      detail: 'OVSNET_DOCKER_HOST=off: services in the default endpoint mode (VIP) get no load balancing; --endpoint-mode dnsrr works',
      fix: "docker plugin set ovsnet OVSNET_DOCKER_HOST=unix:///var/run/docker.sock (the plugin mounts the host's socket there)",
    };
  }
  if (!v.reachable) {
    return {
      check,
      ok: false,
      detail: `the daemon cannot read Docker's Engine at ${v.socket}${v.lastError === undefined ? '' : ` (${v.lastError})`}: services in VIP mode get no load balancing (dnsrr works)${services === 0 ? '' : `; the last ${services} VIPs read stay programmed`}`,
      fix: "check that dockerd runs and that its socket is what OVSNET_DOCKER_HOST names (the managed plugin mounts the host's /var/run/docker.sock: docker plugin set ovsnet docker.source=PATH)",
    };
  }
  return { check, ok: true, detail: `${services} services with a VIP on ${networks.length} networks of this node, read from ${v.socket}` };
}

/** Health checks, each with the fix when it fails. */
export async function doctor(
  config: Config,
  store: Store,
  ovs: Ovsdb,
  datapath: string,
  dockerSocket: string = DOCKER_SOCKET,
  info?: AdminInfo,
): Promise<Check[]> {
  const checks: Check[] = [];
  const t0 = Date.now();
  try {
    const rev = await store.revision();
    checks.push({ check: 'store', ok: true, detail: `${config.store.kind} reachable, revision ${rev}, ${Date.now() - t0} ms` });
  } catch (err) {
    checks.push({
      check: 'store',
      ok: false,
      detail: messageOf(err),
      fix: 'check OVSNET_STORE and that etcd (or the state directory) is reachable',
    });
  }
  try {
    const exists = await ovs.bridgeExists(config.bridge);
    checks.push({
      check: 'openvswitch',
      ok: true,
      detail: `OVSDB reachable at ${config.ovsdb}; bridge ${config.bridge} ${exists ? 'exists' : 'not created yet (made with the first network)'}`,
    });
  } catch (err) {
    checks.push({
      check: 'openvswitch',
      ok: false,
      detail: messageOf(err),
      fix: 'install openvswitch-switch and start it (ovs-ctl start), or set OVSNET_OVSDB',
    });
  }
  const kernel = ovsKernelModuleLoaded();
  checks.push({
    check: 'datapath',
    ok: true,
    detail: `${datapath}${kernel ? ' (openvswitch kernel module loaded)' : ' (no openvswitch kernel module: userspace datapath, transmit checksum offload turned off per container)'}`,
  });
  const up = await daemonAnswers(config.socket);
  checks.push({
    check: 'daemon',
    ok: up,
    detail: up ? `answers on ${config.socket}` : `nothing answers on ${config.socket}`,
    ...(up ? {} : { fix: 'start it: `ovsnet serve` (or `npm start`); Docker finds it by that socket' }),
  });
  try {
    const nets = await networks(store);
    const eps = new Set((await endpoints(store)).map((e) => e.port));
    const orphanPorts = (await ovs.ownPorts()).filter((p) => endpointOf(p) !== undefined && !eps.has(p.name)).map((p) => p.name);
    checks.push({
      check: 'orphan ports',
      ok: orphanPorts.length === 0,
      detail: orphanPorts.length === 0 ? `none (${nets.length} networks, ${eps.size} endpoints)` : orphanPorts.join(' '),
      ...(orphanPorts.length === 0 ? {} : { fix: 'restart ovsnet: reconcile at start removes ports of endpoints that no longer exist' }),
    });
    checks.push(await openflowCheck(config, store, ovs, info?.swarmVips?.networks));
  } catch {
    // store or OVS unreachable: already reported above
  }
  if (info?.swarmVips !== undefined) checks.push(swarmVipsCheck(info.swarmVips));
  const name = path.basename(config.socket, '.sock');
  const docker = await dockerNetworkPlugins(dockerSocket);
  // A managed plugin is listed by its reference: ovsnet:latest, ovsnet:0.2.
  const listed = docker?.find((d) => d === name || d.startsWith(`${name}:`));
  checks.push(
    docker === undefined
      ? { check: 'docker', ok: false, detail: `Docker is not reachable at ${dockerSocket}`, fix: 'start dockerd (or set DOCKER_HOST)' }
      : listed !== undefined
        ? { check: 'docker', ok: true, detail: `Docker lists ${listed} among its network drivers` }
        : {
            check: 'docker',
            ok: false,
            detail: `Docker does not list ${name} (drivers: ${docker.join(', ')})`,
            fix: `Docker activates a plugin on first use: docker network create -d ${name} ...; it finds it at /run/docker/plugins/${name}.sock`,
          },
  );
  try {
    const nets = await listNetworks(store);
    const bad: string[] = [];
    for (const n of nets) {
      if (n.gatewayPort === undefined) continue;
      const file = `/sys/class/net/${n.gatewayPort}/mtu`;
      const mtu = fs.existsSync(file) ? Number(fs.readFileSync(file, 'utf8')) : undefined;
      if (mtu !== undefined && mtu !== n.mtu)
        bad.push(`${n.networkId.slice(0, 12)}: ${n.gatewayPort} has MTU ${mtu}, the network ${n.mtu}`);
    }
    checks.push({
      check: 'mtu',
      ok: bad.length === 0,
      detail: bad.length === 0 ? `gateway ports match their networks' MTU` : bad.join('; '),
      ...(bad.length === 0 ? {} : { fix: 'restart ovsnet: reconcile at start sets each gateway port to its network MTU' }),
    });
    const endpointIds = new Set((await listEndpoints(store)).map((e) => e.endpointId));
    const orphans = (await listReservations(store)).filter(
      (r) => r.endpoint !== undefined && !endpointIds.has(r.endpoint) && nets.length > 0,
    );
    checks.push({
      check: 'orphan reservations',
      ok: orphans.length === 0,
      detail:
        orphans.length === 0
          ? 'every reservation bound to an endpoint has it'
          : orphans.map((r) => `${r.address} (endpoint ${r.endpoint?.slice(0, 12) ?? ''})`).join(' '),
      ...(orphans.length === 0
        ? {}
        : {
            fix: "Docker's release after DeleteEndpoint was lost (ovsnet was down): the running daemon releases such reservations itself within about twice OVSNET_REAP_GRACE (ovsnet_ipam_reaped_total counts them); if one stays, start the daemon",
          }),
    });
  } catch {
    // the store is unreachable: reported above
  }
  try {
    checks.push(await recordsCheck(store));
  } catch {
    // the store is unreachable: reported above
  }
  try {
    checks.push(...(await clusterChecks(config, store, ovs, datapath)));
  } catch {
    // the store or OVS is unreachable: reported above
  }
  checks.push({
    check: 'checksum offload',
    ok: true,
    detail:
      datapath === 'netdev'
        ? 'userspace datapath: ovsnet turns transmit checksum offload off on every container end (TCP fails otherwise)'
        : 'kernel datapath: offloads left as they are',
  });
  try {
    const all = await pools(store);
    checks.push({
      check: 'reservations',
      ok: true,
      detail: `${all.reduce((a, p) => a + p.used, 0)} addresses reserved in ${all.length} pools`,
    });
  } catch {
    // the store is unreachable: reported above
  }
  return checks;
}

/** Several hosts: peers' tunnel MTUs agree; on the userspace datapath, the VTEP is on OVS. */
async function clusterChecks(config: Config, store: Store, ovs: Ovsdb, datapath: string): Promise<Check[]> {
  const peers = await registeredHosts(store);
  const logical = await countLogical(store);
  if (peers.length <= 1 && logical === 0) return [];
  const checks: Check[] = [];
  const mtus = new Set(peers.flatMap((p) => (p.tunnelMtu === undefined ? [] : [p.tunnelMtu])));
  checks.push({
    check: 'hosts',
    ok: mtus.size <= 1,
    detail: peers.map((p) => `${p.name} (${p.vtepIp}${p.tunnelMtu === undefined ? '' : `, MTU ${p.tunnelMtu}`})`).join(', '),
    ...(mtus.size <= 1
      ? {}
      : {
          fix: "give every host's tunnel interface one MTU (VXLAN networks default to it minus 50), or create logical networks with -o com.docker.network.driver.mtu",
        }),
  });
  const vtep = config.host.vtepIp === '' ? defaultRouteAddress() : config.host.vtepIp;
  const iface = vtep === undefined ? undefined : interfaceOf(vtep);
  if (datapath === 'netdev' && logical > 0) {
    const onOvs = (await ovs.interfaceType(iface ?? '')) === 'internal';
    checks.push({
      check: 'vxlan',
      ok: onOvs,
      detail: onOvs
        ? `tunnel address ${vtep ?? ''} is on OVS bridge port ${iface ?? ''} (native tunnelling)`
        : `tunnel address ${vtep ?? '(none)'} is on ${iface ?? 'no interface'}, not on an OVS bridge`,
      ...(onOvs
        ? {}
        : {
            fix: 'on the userspace datapath VXLAN needs the tunnel address on an OVS bridge that owns the underlay interface: ovs-vsctl add-br br-phy -- set bridge br-phy datapath_type=netdev -- add-port br-phy <underlay>; move the address to br-phy',
          }),
    });
  }
  return checks;
}

/** Bad keys listed at most (the check names how many more). */
const BAD_KEYS_SHOWN = 20;

/**
 * Records no ovsnet writes (shapes.ts: a value that is not JSON, a field of the wrong type, a
 * CIDR that does not parse; a pool count that is not a number): the daemon skips them, this
 * names them.
 */
export async function recordsCheck(store: Store): Promise<Check> {
  const bad: string[] = [];
  let read = 0;
  for (const f of FAMILIES) {
    for (const kv of (await store.list(f.prefix)).kvs) {
      read++;
      const problem = recordProblem(kv.key, kv.value);
      if (problem !== undefined) bad.push(`${kv.key} (${problem})`);
    }
  }
  const counts = await countProblems(store);
  read += counts.read;
  bad.push(...counts.bad);
  if (bad.length === 0) return { check: 'store records', ok: true, detail: `${read} records, all well-formed` };
  const more = bad.length > BAD_KEYS_SHOWN ? ` and ${bad.length - BAD_KEYS_SHOWN} more` : '';
  return {
    check: 'store records',
    ok: false,
    detail: `${bad.length} of ${read} records malformed, skipped by ovsnet: ${bad.slice(0, BAD_KEYS_SHOWN).join('; ')}${more}`,
    fix: 'delete or rewrite each key named (etcdctl del KEY on etcd); ovsnet never writes such a record, so someone or something else did',
  };
}
