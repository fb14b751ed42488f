/**
 * The operator's commands, as a table (dispatch.ts parses and runs it): each with its summary,
 * options and run. They read the store the running daemon reads (session.ts), so they work while
 * it runs; Docker's names are asked of Docker by the CLI itself.
 */
import { chooseDatapath } from '../host/host-info.js';
import { describeStore } from '../store/open.js';
import { EXIT, UsageError, type CommandSpec, type CommandTable, type Invocation, type OptionSpec } from './dispatch.js';
import { doctor } from './doctor/doctor.js';
import { dockerNames } from './docker-api.js';
import { endpointsView } from './endpoints-view.js';
import { hosts, networks, pools } from './inspect.js';
import { adoptCommand, RESERVATIONS_OPTION, reservationsView } from './ipam-more.js';
import { networksShown } from './networks-view.js';
import { render, type Shown } from './output.js';
import { located, withSession, type CliContext, type Session } from './session.js';
import { versionRows } from './version-view.js';
import { parseDestination } from './trace/destination.js';
import { trace } from './trace/trace.js';

/** Every command reading the daemon's settings takes this. */
export const ENV_FILE_OPTION: Readonly<Record<string, OptionSpec>> = {
  'settings-file': {
    type: 'string',
    value: 'FILE',
    help: 'the systemd environment file read when no daemon answers (default /etc/default/ovsnet)',
  },
};

const envFile = (inv: Invocation) => (typeof inv.values['settings-file'] === 'string' ? inv.values['settings-file'] : undefined);

/** A command that opens the daemon's store, prints what `show` returns and exits `status`. */
function reader(
  summary: string,
  show: (s: Session, inv: Invocation, ctx: CliContext) => Promise<Shown & { status?: number; silent?: boolean }>,
  extra: Partial<CommandSpec<CliContext>> = {},
): CommandSpec<CliContext> {
  return {
    summary,
    output: true,
    ...extra,
    options: { ...ENV_FILE_OPTION, ...extra.options },
    run: (inv, ctx) =>
      withSession(ctx, envFile(inv), async (s) => {
        const shown = await show(s, inv, ctx);
        if (shown.silent !== true) ctx.out(render(shown, inv.format));
        return shown.status ?? EXIT.ok;
      }),
  };
}

const networksView = async (s: Session): Promise<Shown> => networksShown(await networks(s.store), await dockerNames(s.dockerSocket));

const ipamView = async (s: Session): Promise<Shown> => {
  const rows = await pools(s.store);
  const shared = rows.some((r) => r.logical !== '');
  const row = (r: (typeof rows)[number], all: boolean) => ({
    pool: r.pool,
    range: r.range,
    used: r.used,
    usable: r.usable,
    use: r.percent,
    hosts: r.byHost,
    ...(shared || all ? { logical: r.logical || '-', blocks: r.blocks } : {}),
  });
  return { data: rows, table: rows.map((r) => row(r, false)), wide: rows.map((r) => row(r, true)) };
};

const checkRows = (checks: readonly { check: string; ok: boolean; detail: string; fix?: string }[], fix: boolean) =>
  checks.map((c) => ({ check: c.check, ok: c.ok ? 'ok' : 'FAIL', detail: c.detail, ...(fix ? { fix: c.fix ?? '' } : {}) }));

/** The settings' origin as a check: failed where the CLI and the daemon disagree on the store. */
const settingsCheck = (s: Session) => ({
  check: 'settings',
  ok: s.location.notes.length === 0,
  detail: [`from ${s.location.source}; store ${describeStore(s.config.store)}`, ...s.location.notes].join('; '),
  ...(s.location.notes.length === 0
    ? {}
    : { fix: 'run the command with the settings the daemon runs with (unset OVSNET_STORE), or restart the daemon' }),
});

/** The daemon check, with the version, uptime and store health it reports of itself. */
function daemonDetail(s: Session, answers: boolean): string {
  const d = s.location.daemon;
  if (!answers || d === undefined) return `nothing answers on ${s.config.socket}`;
  const i = d.info;
  if (i === undefined) return `an ovsnet older than 0.2 answers on ${d.socket} (${d.via}): it has no admin endpoint`;
  const store = i.store.ok ? `ok (revision ${i.store.revision ?? '?'}, ${i.store.ms} ms)` : `FAILING: ${i.store.error ?? ''}`;
  return `ovsnet ${i.version} answers on ${d.socket} (${d.via}), pid ${i.pid}, up ${i.uptimeSeconds} s; its store ${i.store.store} ${store}`;
}

const statusView = async (s: Session): Promise<Shown & { status: number }> => {
  const datapath = chooseDatapath(s.config.datapath);
  const checks = (await doctor(s.config, s.store, s.ovs, datapath, s.dockerSocket)).filter((c) =>
    ['store', 'openvswitch', 'datapath', 'daemon', 'docker'].includes(c.check),
  );
  const daemon = checks.find((c) => c.check === 'daemon');
  if (daemon !== undefined) daemon.detail = daemonDetail(s, daemon.ok);
  const healthy = s.location.daemon?.info?.store.ok ?? true;
  checks.unshift(settingsCheck(s));
  const registered = await hosts(s.store).catch(() => [] as string[]);
  checks.push({
    check: 'hosts',
    ok: true,
    detail: registered.length === 0 ? 'single host (no host registered in the store)' : registered.join(', '),
  });
  const d = s.location.daemon;
  const data = {
    store: describeStore(s.config.store),
    settingsFrom: s.location.source,
    notes: s.location.notes,
    bridge: s.config.bridge,
    datapath,
    socket: s.config.socket,
    daemon: {
      answers: daemon?.ok ?? false,
      ...(d === undefined
        ? {}
        : {
            socket: d.socket,
            via: d.via,
            ...(d.info === undefined ? {} : { version: d.info.version, uptimeSeconds: d.info.uptimeSeconds, store: d.info.store }),
          }),
    },
    hosts: registered,
    checks,
  };
  const rows = checkRows(checks, false);
  return { data, table: rows, wide: checkRows(checks, true), status: checks.every((c) => c.ok) && healthy ? EXIT.ok : EXIT.problem };
};

const doctorView = async (s: Session): Promise<Shown & { status: number }> => {
  const checks = [
    settingsCheck(s),
    ...(await doctor(s.config, s.store, s.ovs, chooseDatapath(s.config.datapath), s.dockerSocket, s.location.daemon?.info)),
  ];
  const daemon = checks.find((c) => c.check === 'daemon');
  if (daemon !== undefined) daemon.detail = daemonDetail(s, daemon.ok);
  return { data: checks, table: checkRows(checks, true), status: checks.every((c) => c.ok) ? EXIT.ok : EXIT.problem };
};

export const COMMANDS: CommandTable<CliContext> = {
  status: reader('store, Open vSwitch, datapath and daemon health; where the settings come from', statusView),
  networks: reader(
    'ovsnet networks with their Docker names: VLAN tag, subnets, gateway, endpoints; endpoint groups under their parent',
    networksView,
  ),
  endpoints: reader(
    'endpoints with their containers: address, MAC, OVS port; -o wide: packets and bytes sent and received, policy drops',
    endpointsView,
  ),
  ipam: reader(
    'pool usage per network and per host; with --reservations, each reservation and its holder',
    (s, inv, ctx) => {
      if (inv.values.reservations === true) return reservationsView(s, inv, ctx);
      if (inv.args.length > 0) throw new UsageError(`ipam takes a POOL only with --reservations, not ${inv.args.join(' ')}`, 'ipam');
      return ipamView(s);
    },
    {
      args: '[POOL]',
      maxArgs: 1,
      options: RESERVATIONS_OPTION,
      subcommands: { adopt: adoptCommand((inv, ctx, fn) => withSession(ctx, envFile(inv), fn)) },
    },
  ),
  doctor: reader('checks, each failed one with its fix', doctorView),
  trace: reader(
    "why a container's packet goes where it goes: Open vSwitch's own trace, each rule it meets in words with its option",
    async (s, inv) => {
      const [container, dest] = inv.args;
      if (container === undefined || dest === undefined) throw new UsageError('trace takes CONTAINER and DEST', 'trace');
      const r = await trace(s, container, parseDestination(dest));
      const packet = `${r.to.proto} ${r.from.address} -> ${r.to.address}${r.to.port === undefined ? '' : `:${r.to.port}`} from ${r.from.container} (port ${r.from.port}, network ${r.from.network})`;
      const rows = (wide: boolean) => [
        { pass: 'packet', table: '', priority: '', rule: packet, ...(wide ? { cookie: '', actions: '' } : {}) },
        ...r.passes.flatMap((p, i) => [
          ...(i === 0
            ? []
            : [
                {
                  pass: String(i + 1),
                  table: '',
                  priority: '',
                  rule: `traced again from ${p.from}`,
                  ...(wide ? { cookie: '', actions: '' } : {}),
                },
              ]),
          ...p.steps.map((st) => ({
            pass: String(i + 1),
            table: String(st.table),
            priority: String(st.priority),
            rule: st.meaning,
            ...(wide ? { cookie: st.cookie, actions: st.actions.join(' ') } : {}),
          })),
        ]),
        { pass: 'verdict', table: '', priority: '', rule: r.verdict, ...(wide ? { cookie: '', actions: '' } : {}) },
      ];
      return { data: r, table: rows(false), wide: rows(true) };
    },
    {
      args: 'CONTAINER DEST[:PORT][/tcp|udp|icmp]',
      maxArgs: 2,
      details:
        "CONTAINER: a name or ID Docker knows, on an ovsnet network of this host. DEST: an address ([IPv6] with a port), a container name or a swarm service name; tcp and udp need a PORT, icmp (the default without one) has none. The verdict is the datapath's own (ofproto/trace); nothing changes.",
    },
  ),
  version: {
    summary: "this ovsnet's version and the running daemon's",
    output: true,
    options: ENV_FILE_OPTION,
    details: 'Exit status 1 when no daemon answers (as `docker version`); `ovsnet --version` prints this one only.',
    run: async (inv, ctx) => {
      const { location } = await located(ctx, envFile(inv));
      const shown = versionRows(location.daemon);
      ctx.out(render(shown, inv.format));
      return location.daemon === undefined ? EXIT.problem : EXIT.ok;
    },
  },
};
