/**
 * `ovsnet trace`'s reading of Open vSwitch's own trace (`ovs-appctl ofproto/trace`): the flows a
 * packet met, table by table, each put in words by the feature its cookie names (ovs/cookies.ts)
 * and the network its low bits name, and the verdict the datapath gave (its "Datapath actions").
 * Nothing here decides what happens to a packet: the switch did, this only says it. Pure.
 */
import type { EndpointRecord, NetworkRecord } from '../../driver/model/records.js';
import { FEATURE } from '../../driver/ovs/cookies.js';

/** One flow the packet met. */
export interface TraceStep {
  readonly table: number;
  readonly priority: number;
  readonly cookie: string;
  /** The flow's match as the trace prints it. */
  readonly match: string;
  readonly actions: readonly string[];
  /** What the flow is, in words, and the option it comes from. */
  readonly meaning: string;
}

/** The trace of one pass through the bridge (the recirculations after conntrack included). */
export interface BridgeTrace {
  readonly steps: readonly TraceStep[];
  /** The last stage's datapath actions, as printed (empty: dropped). */
  readonly datapathActions: string;
  /** Registers and conntrack fields of the last stage's flow, e.g. reg6=0xb. */
  readonly fields: Readonly<Record<string, string>>;
  /** The packet's Ethernet addresses as it left the bridge (the last `Final flow:`). */
  readonly leaving: { readonly dl_src?: string; readonly dl_dst?: string };
}

/** What the names of things on the bridge are, for the words. */
export interface TraceNames {
  /** A network's name (Docker's, else its short ID) by its local tag. */
  readonly networkOfTag: (tag: number) => string;
  /** The datapath port number's port name. */
  readonly portOfOdp: (odp: number) => string | undefined;
  /** A group on another host by the number a logical parent's plan gives it (reg4; group-remote.ts). */
  readonly remoteGroup?: (n: number) => { readonly name: string; readonly host: string } | undefined;
}

const STEP = /^\s*(\d+)\.\s+(.*?),?\s*priority (\d+)(?:, cookie (0x[0-9a-f]+))?\s*$/;

/** Splits ofproto/trace's text into the flows met and the last stage's result. */
export function parseTrace(text: string, names: TraceNames): BridgeTrace {
  const steps: TraceStep[] = [];
  let current: { table: number; priority: number; cookie: string; match: string; actions: string[] } | undefined;
  let datapathActions = '';
  let lastFlow = '';
  let finalFlow = '';
  // Registers the flows met since the last `Flow:` line loaded (e.g. a remote member's group in reg4).
  let loaded: Record<string, string> = {};
  const flush = () => {
    if (current === undefined) return;
    steps.push({ ...current, meaning: meaningOf(current, names, { ...fieldsOf(lastFlow), ...loaded }) });
    for (const a of current.actions.join(',').matchAll(/load:(0x[0-9a-f]+|\d+)->NXM_NX_(REG\d+)\[\]/gi))
      loaded[(a[2] ?? '').toLowerCase()] = a[1] ?? '';
    current = undefined;
  };
  for (const line of text.split('\n')) {
    const m = STEP.exec(line);
    if (m !== null) {
      flush();
      current = { table: Number(m[1]), match: m[2] ?? '', priority: Number(m[3]), cookie: m[4] ?? '0x0', actions: [] };
      continue;
    }
    if (/^(Final flow|Megaflow|Datapath actions|Flow):/.test(line) || line.startsWith('=====') || line.trim() === '') {
      flush();
      if (line.startsWith('Datapath actions:')) datapathActions = line.slice('Datapath actions:'.length).trim();
      if (line.startsWith('Final flow:')) finalFlow = line;
      if (line.startsWith('Flow:')) {
        lastFlow = line;
        loaded = {};
      }
      continue;
    }
    if (current !== undefined && /^\s{4}\S/.test(line) && !line.trim().startsWith('->')) current.actions.push(line.trim());
  }
  flush();
  const mac = (field: string) => new RegExp(`\\b${field}=([0-9a-f:]{17})\\b`).exec(finalFlow)?.[1];
  const [src, dst] = [mac('dl_src'), mac('dl_dst')];
  return {
    steps,
    datapathActions,
    fields: fieldsOf(lastFlow),
    leaving: { ...(src === undefined ? {} : { dl_src: src }), ...(dst === undefined ? {} : { dl_dst: dst }) },
  };
}

/** Registers and conntrack fields of a trace's `Flow:` line (or a flow's match). */
function fieldsOf(flow: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const m of flow.matchAll(/\b(reg\d+|ct_mark|ct_state|ct_zone|tp_dst)=([^,\s]+)/g)) fields[m[1] ?? ''] = m[2] ?? '';
  return fields;
}

function featureOf(cookie: string): { feature: bigint; low: number } {
  const c = BigInt(cookie);
  return { feature: c >> 48n, low: Number(c & 0xffffffffn) };
}

/**
 * Whether a flow drops the packet. After `ct(..., table=N)` the trace prints `drop` for the
 * original packet, whose copy goes on in table N: that is no drop.
 */
const dropping = (actions: readonly string[]) =>
  (actions.length === 0 || actions.at(-1) === 'drop') && !actions.some((a) => /^ct\(.*table=/.test(a));

/** Tables 44 and 45 in words: a connection to a member of a logical parent's family on another host. */
function remoteMeaning(
  step: { table: number; priority: number; actions: readonly string[] },
  c: {
    names: TraceNames;
    inMatch: Readonly<Record<string, string>>;
    stage: Readonly<Record<string, string>>;
    on: string;
    net: string;
    drops: boolean;
  },
): string {
  const number = c.inMatch.reg4 ?? c.stage.reg4;
  const remote = number === undefined ? undefined : c.names.remoteGroup?.(Number(number));
  const senderTag = c.inMatch.reg6 ?? c.stage.reg6;
  const sender = senderTag === undefined ? undefined : c.names.networkOfTag(Number(senderTag));
  const where = `endpoint groups of ${c.net}`;
  if (step.table === 45) {
    const port = step.actions.find((a) => a.startsWith('output:'))?.slice('output:'.length);
    return `routed by the bridge to the member's host${remote === undefined ? '' : ` ${remote.host}`}, through the tunnel${port === undefined ? '' : ` (port ${port})`} (${where})`;
  }
  if (step.priority === 30) return `allowed: a reply or a packet of a connection already allowed (${where})`;
  if (remote === undefined || sender === undefined)
    return c.drops ? `dropped: the receiving group on another host does not allow the sender's (${where})` : `allowed (${where})`;
  const option = `-o ovsnet.allow on network ${remote.name} of host ${remote.host}; ${where}`;
  if (c.drops) return `dropped: ${remote.name} does not allow ${sender} (${option})`;
  if (remote.name === sender) return `allowed: within group ${sender}, across hosts (${where})`;
  return `allowed: ${remote.name} allows ${sender}${c.on} (${option})`;
}

/** A flow in words, by its cookie. */
export function meaningOf(
  step: { cookie: string; table: number; priority: number; match?: string; actions: readonly string[] },
  names: TraceNames,
  stage: Readonly<Record<string, string>> = {},
): string {
  const { feature, low } = featureOf(step.cookie);
  // Endpoint groups: reg6 is the receiving member's group, ct_mark the sender's (group-tables.ts).
  const inMatch = fieldsOf(step.match ?? '');
  const group = (v: string | undefined) => (v === undefined ? undefined : names.networkOfTag(Number(v)));
  const receiver = group(inMatch.reg6 ?? stage.reg6);
  const sender = group(inMatch.ct_mark ?? stage.ct_mark);
  const proto = /\b(tcp6?|udp6?|sctp6?)\b/.exec(step.match ?? '')?.[1]?.replace('6', '');
  const on = inMatch.tp_dst === undefined || proto === undefined ? '' : ` on ${inMatch.tp_dst}/${proto}`;
  const net = () => `network ${names.networkOfTag(low)}`;
  const drops = dropping(step.actions);
  switch (feature) {
    case FEATURE.base:
      return "the bridge's own switching (MAC learning, the network's VLAN)";
    case FEATURE.qos:
      return "the endpoint's QoS (-o ovsnet.bandwidth / ovsnet.burst / ovsnet.dscp): metered and marked";
    case FEATURE.guardVni:
    case FEATURE.guardVlan:
      return drops
        ? "dropped: the gateway guard (each host's gateway answers for its own containers only, never across the tunnel)"
        : 'the gateway guard';
    case FEATURE.groups:
      if (step.table >= 44 && step.table <= 45) return remoteMeaning(step, { names, inMatch, stage, on, net: net(), drops });
      if (step.table === 43 && step.priority === 20) return `to a member of the family on another host (endpoint groups of ${net()})`;
      if (step.table === 0 && /\btun_id=/.test(step.match ?? ''))
        return drops
          ? `dropped: from another host, only what its bridge routed reaches a group's member (endpoint groups of ${net()})`
          : `routed from another host's bridge to a member here (endpoint groups of ${net()})`;
      if (step.table === 42 && drops) {
        return receiver !== undefined && sender !== undefined
          ? `dropped: ${receiver} does not allow ${sender} (-o ovsnet.allow on network ${receiver}; endpoint groups of ${net()})`
          : `dropped: the receiving endpoint group does not allow the sender's (-o ovsnet.allow, endpoint groups of ${net()})`;
      }
      if (step.table === 42 && step.priority === 20) {
        if (inMatch.ct_mark !== undefined && Number(inMatch.ct_mark) === 0)
          return `allowed: a new connection from outside the endpoint groups (endpoint groups of ${net()})`;
        if (inMatch.ct_mark !== undefined && Number(inMatch.ct_mark) === Number(inMatch.reg6))
          return `allowed: within group ${receiver ?? ''} (endpoint groups of ${net()})`;
        return receiver !== undefined && sender !== undefined
          ? `allowed: ${receiver} allows ${sender}${on} (-o ovsnet.allow on network ${receiver}; endpoint groups of ${net()})`
          : `allowed: a new connection the receiving group allows (-o ovsnet.allow, endpoint groups of ${net()})`;
      }
      if (step.table === 42) return `allowed: a reply or a packet of a connection already allowed (endpoint groups of ${net()})`;
      if (step.table === 43) return `to the gateway, the sender's group remembered in conntrack (endpoint groups of ${net()})`;
      if (step.table === 41) return `ARP between endpoint groups, answered by the gateway (endpoint groups of ${net()})`;
      return drops ? `dropped by the endpoint groups of ${net()}` : `endpoint groups of ${net()}`;
    case FEATURE.vip:
      if (step.actions.some((a) => a.startsWith('group:')))
        return `load-balanced: a new connection to a swarm service's VIP, one of its tasks picked (${net()})`;
      if (step.actions.some((a) => /^controller/i.test(a)))
        return `refused: the VIP's service has no task (ICMP port unreachable, ${net()})`;
      return `a swarm service VIP's conntrack (${net()})`;
    case 0x0f62n:
      return drops ? `dropped: enable_icc=false on ${net()}` : `enable_icc=false on ${net()}: to the gateway only`;
    case 0x0f63n:
      return drops
        ? `dropped: not among -o ovsnet.egress / ovsnet.ingress of ${net()}`
        : `allowed by -o ovsnet.egress / ovsnet.ingress of ${net()}`;
    default: {
      const whose =
        step.cookie === '0x0'
          ? "a flow without a cookie: not ovsnet's (another controller's, or added by hand)"
          : `a flow of cookie ${step.cookie}: not ovsnet's`;
      return drops ? `dropped by ${whose}` : whose;
    }
  }
}

/** Where the datapath sends the packet, in words; `kind` for the verdict's summary. */
export interface Outcome {
  readonly kind: 'delivered' | 'gateway' | 'tunnel' | 'dropped' | 'load-balanced' | 'refused' | 'other';
  readonly ports: readonly string[];
  readonly detail: string;
  /** The tunnel's far end (kind tunnel). */
  readonly remote?: string;
}

export function outcomeOf(trace: BridgeTrace, names: TraceNames): Outcome {
  const a = trace.datapathActions;
  if (a === '' || a === 'drop') {
    const why = [...trace.steps].reverse().find((s) => dropping(s.actions));
    return { kind: 'dropped', ports: [], detail: why?.meaning ?? 'dropped: no flow forwards it' };
  }
  if (/^hash\(/.test(a) || /\bhash\(/.test(a)) {
    return {
      kind: 'load-balanced',
      ports: [],
      detail: "load-balanced over the VIP's tasks (which one is picked by the connection's hash)",
    };
  }
  if (/userspace\(.*controller/.test(a) && trace.steps.some((s) => s.actions.some((x) => /^controller/i.test(x)))) {
    return { kind: 'refused', ports: [], detail: "refused: ovsnet answers ICMP port unreachable (the VIP's service has no task)" };
  }
  // The kernel datapath sets the tunnel and outputs to the VXLAN port; the userspace one pushes the header itself.
  const tunnel = /set\(tunnel\([^)]*dst=([0-9a-f.:]+)/.exec(a)?.[1] ?? /tnl_push\(.*?ipv[46]\(src=[^,]+,dst=([0-9a-f.:]+)/.exec(a)?.[1];
  const ports = [...a.replace(/set\([^)]*\)\)?/g, '').matchAll(/(?:^|,)(\d+)(?=,|$)/g)].map(
    (m) => names.portOfOdp(Number(m[1])) ?? `datapath port ${m[1]}`,
  );
  if (tunnel !== undefined) return { kind: 'tunnel', ports, detail: `leaves through the VXLAN tunnel to ${tunnel}`, remote: tunnel };
  if (ports.length === 0) return { kind: 'other', ports, detail: `datapath actions: ${a}` };
  return { kind: ports.some((p) => p.startsWith('ovg')) ? 'gateway' : 'delivered', ports, detail: '' };
}

/** The verdict in one line: the last decision's words and where the packet ends up. */
export function verdictOf(
  passes: readonly { readonly steps: readonly TraceStep[]; readonly outcome: Outcome }[],
  endpoints: readonly EndpointRecord[],
  network: NetworkRecord,
  self: string,
  note: string | undefined,
): string {
  const last = passes.at(-1)?.outcome;
  const reasons = passes.flatMap((p) =>
    p.steps.filter((s) => /^(allowed|dropped|refused|load-balanced)/.test(s.meaning)).map((s) => s.meaning),
  );
  // The peer's "from outside the groups" is the sender host's decision arriving: that one says why.
  const reason = reasons.filter((r) => !r.includes('from outside the endpoint groups')).at(-1) ?? reasons.at(-1);
  const why = reason === undefined ? '' : `${reason}; `;
  if (last === undefined) return 'no trace';
  switch (last.kind) {
    case 'dropped':
    case 'refused':
    case 'load-balanced':
      return last.detail;
    case 'tunnel':
      return `${why}${last.detail} (${note ?? "the rest of its way is the peer's: ovsnet trace there"})`;
    case 'gateway':
      return `${why}leaves through the gateway ${last.ports.join(' ')} to the host${network.masquerade === false ? '' : ' (masqueraded on the way out)'}`;
    case 'delivered': {
      const to = last.ports
        .map((p) => {
          const e = endpoints.find((x) => x.hostVeth === p);
          const where = e?.host === undefined || e.host === self ? '' : ` on host ${e.host}`;
          return e === undefined ? `port ${p}` : `port ${p} (endpoint ${e.endpointId.slice(0, 12)}${where})`;
        })
        .join(', ');
      return `${why}delivered to ${to}`;
    }
    case 'other':
      return last.detail;
  }
}
