/**
 * The logical networks as every host follows them (tunnels): the records and their members'
 * keys, each family by its own prefix, put together on reading. A member's join or leave
 * reaches each host as one event of one small key, and costs it O(1) here: members are kept by
 * network in objects changed in place, which the records' view shares (rebuilding 1,000 members
 * on every change cost more than a full tunnel sync). onChange hears the hosts whose membership
 * the events changed, so that only their tunnels are synced; undefined when anything may have
 * (a snapshot, a record's change: its VNI, its legacy members).
 *
 * Idempotency: start() once (it fails if the store cannot give the first snapshots: the caller
 * retries); stop() any number of times.
 */
import type { Logger } from '../../lib/log.js';
import { decodeOrSkip, skippedRecords } from '../../store/decode.js';
import { FollowedRecords, Follower } from '../../store/follow.js';
import { keys, unpart } from '../../store/keys.js';
import type { Store } from '../../store/types.js';
import type { LogicalMember, LogicalNetwork } from '../model/records.js';

/** A key part as written (unpart only when escaped: most names are not). */
const plain = (part: string) => (part.includes('%') ? unpart(part) : part);

interface MemberAt {
  readonly name: string;
  readonly host: string;
}

/** The network and host a member key names; undefined for a key of no member. */
function memberAt(key: string): MemberAt | undefined {
  const rest = key.slice(keys.allLogicalMembers.length);
  const slash = rest.indexOf('/');
  return slash < 0 ? undefined : { name: plain(rest.slice(0, slash)), host: plain(rest.slice(slash + 1)) };
}

export class FollowedLogical {
  private readonly networks: FollowedRecords<LogicalNetwork>;
  private readonly memberFollower: Follower;
  /** Members by network name, then host; each object changed in place by the events. */
  private readonly members = new Map<string, Record<string, LogicalMember>>();
  private membersLoaded = false;
  /** The records with their members, until a record changes (members change in place). */
  private view: Map<string, LogicalNetwork> | undefined;
  /** A record still holds layout 1's members: its view is a merged copy, rebuilt on every change. */
  private legacy = false;

  constructor(store: Store, log: Logger, onChange: (hosts: readonly string[] | undefined) => void) {
    this.networks = new FollowedRecords<LogicalNetwork>({
      store,
      prefix: keys.logicalNetworks,
      nameOf: unpart,
      log,
      what: 'logical networks',
      onChange: () => {
        this.view = undefined;
        onChange(undefined);
      },
    });
    this.memberFollower = new Follower({
      store,
      prefix: keys.allLogicalMembers,
      log,
      what: 'logical network members',
      onSnapshot: (kvs) => {
        this.members.clear();
        for (const kv of kvs) {
          const at = memberAt(kv.key);
          if (at !== undefined) this.apply(at, decodeOrSkip<LogicalMember>(kv.key, kv.value));
        }
        this.membersLoaded = true;
        this.view = undefined;
        onChange(undefined);
      },
      onEvents: (events) => {
        const hosts: string[] = [];
        for (const e of events) {
          if (e.type === 'delete') skippedRecords.cleared(e.kv.key);
          const member = e.type === 'put' ? decodeOrSkip<LogicalMember>(e.kv.key, e.kv.value) : undefined;
          const at = memberAt(e.kv.key);
          if (at === undefined) continue;
          hosts.push(at.host);
          if (this.apply(at, member) || this.legacy) this.view = undefined;
        }
        onChange(hosts);
      },
    });
  }

  /** Sets (or with undefined removes) the member `at`; true when the view must be rebuilt. */
  private apply({ name, host }: MemberAt, member: LogicalMember | undefined): boolean {
    const of = this.members.get(name);
    if (member === undefined) {
      if (of !== undefined) delete of[host];
      return false;
    }
    const m = { networkId: member.networkId, since: member.since };
    if (of !== undefined) of[host] = m;
    else this.members.set(name, { [host]: m });
    return of === undefined; // a new object: the view must point at it
  }

  /** True once both first snapshots are in. */
  get loaded(): boolean {
    return this.networks.loaded && this.membersLoaded;
  }

  /** Every logical network with its members, by name (a live view: members change in place). */
  get records(): ReadonlyMap<string, LogicalNetwork> {
    if (this.view !== undefined) return this.view;
    const view = new Map<string, LogicalNetwork>();
    this.legacy = false;
    for (const [name, record] of this.networks.records) {
      const keyed = this.members.get(name) ?? {};
      const old = record.members as LogicalNetwork['members'] | undefined;
      const oldForm = old !== undefined && Object.keys(old).length > 0;
      if (oldForm) this.legacy = true;
      view.set(name, { ...record, members: oldForm ? { ...old, ...keyed } : keyed });
    }
    return (this.view = view);
  }

  async start(): Promise<void> {
    await Promise.all([this.networks.start(), this.memberFollower.start()]);
  }

  async stop(): Promise<void> {
    await Promise.all([this.networks.stop(), this.memberFollower.stop()]);
  }
}
