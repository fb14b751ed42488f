/**
 * The operator's commands: `ovsnet status|networks|endpoints|ipam|doctor [--json]`. Human
 * tables by default, JSON with --json. They read the daemon's store, so they work while it runs.
 */
import type { Config } from '../config.js';
import { Ovsdb } from '../driver/ovs/ovsdb.js';
import { chooseDatapath } from '../host-info.js';
import { describeStore, openStore } from '../store/open.js';
import { daemonAnswers, doctor } from './doctor.js';
import { endpoints, hosts, networks, pools } from './inspect.js';

export const COMMANDS = {
  status: 'store, Open vSwitch, datapath and daemon health',
  networks: 'ovsnet networks: VLAN tag, subnets, gateway, endpoints',
  endpoints: 'endpoints: address, MAC, OVS port',
  ipam: 'pool usage per network and per host',
  doctor: 'checks, each failed one with its fix',
} as const;

export type Command = keyof typeof COMMANDS;

export function isCommand(c: string): c is Command {
  return c in COMMANDS;
}

function table(rows: readonly Record<string, unknown>[]): string {
  if (rows.length === 0) return '(none)';
  const cols = Object.keys(rows[0] ?? {});
  const cell = (v: unknown) =>
    Array.isArray(v)
      ? v.join(',')
      : typeof v === 'object' && v !== null
        ? Object.entries(v)
            .map(([k, n]) => `${k}:${String(n)}`)
            .join(',')
        : String(v);
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(cols.map((c) => c.toUpperCase())), ...rows.map((r) => line(cols.map((c) => cell(r[c]))))].join('\n');
}

/** Runs one command; returns the exit status (1 when doctor or status finds a problem). */
export async function runCommand(command: Command, json: boolean, config: Config): Promise<number> {
  const store = openStore(config.store, Math.min(config.storeTimeoutMs, 3000));
  const ovs = new Ovsdb(config.ovsdb, 2000);
  const datapath = chooseDatapath(config.datapath);
  const print = (human: string, data: unknown) => process.stdout.write(`${json ? JSON.stringify(data, null, 2) : human}\n`);
  try {
    switch (command) {
      case 'networks': {
        const rows = await networks(store);
        // Host and logical network columns only where several hosts share the store.
        const cluster = rows.some((r) => r.logical !== '' || (r.host !== '' && r.host !== rows[0]?.host));
        print(
          table(
            rows.map((r) => ({
              network: r.network,
              ...(cluster ? { host: r.host, logical: r.logical } : {}),
              tag: r.tag,
              subnets: r.subnets,
              gateway: r.gateway,
              mtu: r.mtu,
              endpoints: r.endpoints,
            })),
          ),
          rows,
        );
        return 0;
      }
      case 'endpoints': {
        const rows = await endpoints(store);
        print(table(rows as unknown as Record<string, unknown>[]), rows);
        return 0;
      }
      case 'ipam': {
        const rows = await pools(store);
        const shared = rows.some((r) => r.logical !== '');
        print(
          table(
            rows.map((r) => ({
              pool: r.pool,
              range: r.range,
              used: r.used,
              usable: r.usable,
              use: r.percent,
              hosts: r.byHost,
              ...(shared ? { logical: r.logical || '-', blocks: r.blocks } : {}),
            })),
          ),
          rows,
        );
        return 0;
      }
      case 'status': {
        const checks = (await doctor(config, store, ovs, datapath)).filter((c) =>
          ['store', 'openvswitch', 'datapath', 'daemon', 'docker'].includes(c.check),
        );
        const registered = await hosts(store).catch(() => [] as string[]);
        checks.push({
          check: 'hosts',
          ok: true,
          detail: registered.length === 0 ? 'single host (no host registered in the store)' : registered.join(', '),
        });
        const data = {
          store: describeStore(config.store),
          bridge: config.bridge,
          datapath,
          socket: config.socket,
          daemon: await daemonAnswers(config.socket),
          hosts: registered,
          checks,
        };
        print(table(checks.map((c) => ({ check: c.check, ok: c.ok ? 'ok' : 'FAIL', detail: c.detail }))), data);
        return checks.every((c) => c.ok) ? 0 : 1;
      }
      case 'doctor': {
        const checks = await doctor(config, store, ovs, datapath);
        print(table(checks.map((c) => ({ check: c.check, ok: c.ok ? 'ok' : 'FAIL', detail: c.detail, fix: c.fix ?? '' }))), checks);
        return checks.every((c) => c.ok) ? 0 : 1;
      }
    }
  } finally {
    ovs.close();
    await store.close();
  }
}
