/**
 * The logical networks as every host follows them (tunnels): the records and their members'
 * keys, each family by its own prefix, put together on reading. A member's join or leave
 * reaches each host as one event of one small key.
 *
 * Idempotency: start() once (it fails if the store cannot give the first snapshots: the caller
 * retries); stop() any number of times.
 */
import type { Logger } from '../../lib/log.js';
import { FollowedRecords } from '../../store/follow.js';
import { keys, unpart } from '../../store/keys.js';
import type { Store } from '../../store/types.js';
import type { LogicalMember, LogicalNetwork } from '../model/records.js';
import { assemble } from './logical-records.js';

export class FollowedLogical {
  private readonly networks: FollowedRecords<LogicalNetwork>;
  /** Members by "NAME/HOST" (both escaped, as in their keys). */
  private readonly members: FollowedRecords<LogicalMember>;

  constructor(store: Store, log: Logger, onChange: () => void) {
    this.networks = new FollowedRecords<LogicalNetwork>({
      store,
      prefix: keys.logicalNetworks,
      nameOf: unpart,
      log,
      what: 'logical networks',
      onChange,
    });
    this.members = new FollowedRecords<LogicalMember>({
      store,
      prefix: keys.allLogicalMembers,
      log,
      what: 'logical network members',
      onChange,
    });
  }

  /** True once both first snapshots are in. */
  get loaded(): boolean {
    return this.networks.loaded && this.members.loaded;
  }

  /** Every logical network with its members, by name. */
  get records(): ReadonlyMap<string, LogicalNetwork> {
    const keyed = new Map<string, Map<string, LogicalMember>>();
    for (const [path, m] of this.members.records) {
      const slash = path.indexOf('/');
      if (slash < 0) continue;
      const name = unpart(path.slice(0, slash));
      let of = keyed.get(name);
      if (of === undefined) keyed.set(name, (of = new Map<string, LogicalMember>()));
      of.set(unpart(path.slice(slash + 1)), m);
    }
    const out = new Map<string, LogicalNetwork>();
    for (const [name, record] of this.networks.records)
      out.set(name, assemble(record, keyed.get(name) ?? new Map<string, LogicalMember>()));
    return out;
  }

  async start(): Promise<void> {
    await Promise.all([this.networks.start(), this.members.start()]);
  }

  async stop(): Promise<void> {
    await Promise.all([this.networks.stop(), this.members.stop()]);
  }
}
