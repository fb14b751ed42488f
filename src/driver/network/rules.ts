/**
 * A network's own flows, in its own cookie scopes: enable_icc=false's (icc.ts) and its egress
 * and ingress rules' (egress.ts), one face for the driver's steps. CreateNetwork checks both
 * before anything is made and adds icc's with the network; Join's plug step (endpoint/plug.ts)
 * applies both before the container runs; published ports bring the ingress rules in line;
 * DeleteEndpoint and DeleteNetwork take theirs out, failures logged (the periodic sync repairs).
 */
import { messageOf } from '../../lib/errors.js';
import type { NetworkOptions } from '../model/options.js';
import type { NetworkRecord } from '../model/records.js';
import type { CreateNetworkRequest } from '../model/requests.js';
import type { Undo } from '../model/undo.js';
import type { DriverRecords } from '../records/driver-records.js';
import { EgressWiring, type EgressDeps } from './egress.js';
import { IccWiring, requireIccSupport, type IccDeps } from './icc.js';

export class NetworkRules {
  readonly icc: IccWiring;
  readonly egress: EgressWiring;

  constructor(
    private readonly deps: IccDeps & EgressDeps,
    records: Pick<DriverRecords, 'endpointsOf' | 'localNetworks' | 'allEndpoints'>,
  ) {
    this.icc = new IccWiring(deps, records);
    this.egress = new EgressWiring(deps, records);
  }

  /** CreateNetwork's checks, before anything is made: the options, if they pass. */
  check(req: Pick<CreateNetworkRequest, 'ipv4' | 'ipv6'>, opts: NetworkOptions): NetworkOptions {
    requireIccSupport(this.deps, opts.icc);
    return this.egress.check(req, opts);
  }

  /** CreateNetwork's step, after the gateway (egress and ingress rules wait for a member). */
  add(record: NetworkRecord, undo: Undo[]): Promise<void> {
    return this.icc.add(record, undo);
  }

  /** An endpoint's ports published: the ingress rules let them in (DeleteEndpoint forgets them). */
  published(network: NetworkRecord | undefined): Promise<void> {
    return this.egress.refresh(network);
  }

  /** DeleteEndpoint's step, after the record went. */
  async endpointGone(network: NetworkRecord | undefined): Promise<void> {
    await Promise.all([this.icc.endpointGone(network), this.egress.refreshLogged(network)]);
  }

  /** DeleteNetwork's step: every flow of the network's gone. */
  async remove(record: NetworkRecord): Promise<void> {
    const logged = (what: string) => (err: unknown) =>
      this.deps.log.warn({ err, network: record.networkId }, `remove ${what}: ${messageOf(err)}`);
    await this.icc.remove(record).catch(logged('the enable_icc=false flows'));
    await this.egress.remove(record).catch(logged('the egress and ingress rules'));
  }
}
