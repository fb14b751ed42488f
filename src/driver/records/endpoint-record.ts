/**
 * The record CreateEndpoint writes, built from Docker's request (pure): the addresses IPAM gave,
 * the MAC (Docker's, or one derived from the address), this host, and the interface names the
 * endpoint starts with (Join may pick others when a live link holds these: naming.ts).
 */
import { OvsnetError } from '../../lib/errors.js';
import { macFor, parseCidrAddress } from '../model/addresses.js';
import type { CreateEndpointRequest } from '../model/requests.js';
import { names, type EndpointRecord } from '../model/records.js';
import { endpointQos, qosField } from '../model/qos-options.js';

/** Refuses a request with no address, or an address not in CIDR form. */
export function endpointRecord(req: CreateEndpointRequest, networkId: string, host: string, now: Date): EndpointRecord {
  if (req.address === '' && req.addressV6 === '') {
    throw new OvsnetError(
      'ENDPOINT_INVALID',
      `endpoint ${req.endpointId.slice(0, 12)} has no address: ovsnet needs an IPv4 or IPv6 address from IPAM`,
    );
  }
  for (const a of [req.address, req.addressV6]) if (a !== '') parseCidrAddress(a, 'Interface.Address');
  return {
    networkId,
    endpointId: req.endpointId,
    ...(req.address === '' ? {} : { address: req.address }),
    ...(req.addressV6 === '' ? {} : { addressV6: req.addressV6 }),
    mac: req.mac === '' ? macFor(req.address) : req.mac,
    host,
    hostVeth: names.hostVeth(req.endpointId),
    containerVeth: names.containerVeth(req.endpointId),
    portmap: req.portmap,
    ...(req.ifname === undefined ? {} : { ifname: req.ifname }),
    ...qosField(endpointQos(req.options ?? {})),
    createdAt: now.toISOString(),
  };
}
