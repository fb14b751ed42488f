/** NetworkDriver.* routes: translate the wire to the NetworkDriver, nothing more. */
import type { FastifyInstance } from 'fastify';
import type { NetworkDriver } from '../driver/network-driver.js';
import { GENERIC, needsNoGateway } from '../driver/model/options.js';
import { checkAddress, checkMac, dockerId } from './forms.js';
import {
  bodyOf,
  ifnameOf,
  ipamData,
  ipv4Enabled,
  objectOf,
  portmapOf,
  str,
  stringMap,
  type GwAllocCheckResponse,
  type JoinResponse,
  type NetworkCapabilitiesResponse,
} from './wire.js';

export function networkRoutes(app: FastifyInstance, driver: NetworkDriver): void {
  const ids = (m: string, body: unknown) => {
    const b = bodyOf(m, body, true);
    return { b, networkId: dockerId(m, b, 'NetworkID'), endpointId: dockerId(m, b, 'EndpointID') };
  };

  // Global: swarm networks (OVSNET_SCOPE=global, src/driver/vxlan/swarm.ts).
  app.post(
    '/NetworkDriver.GetCapabilities',
    (): NetworkCapabilitiesResponse => ({ Scope: driver.scope, ConnectivityScope: driver.scope, GwAllocChecker: true }),
  );

  // Engine 28+, before IPAM is asked for the network's addresses: no gateway port, no gateway address.
  app.post('/NetworkDriver.GwAllocCheck', (req): GwAllocCheckResponse => {
    const m = 'GwAllocCheck';
    const options = objectOf(m, bodyOf(m, req.body, false), 'Options');
    stringMap(`${m}: Options`, options, GENERIC);
    ipv4Enabled(m, options, 0);
    const skip = needsNoGateway(options);
    return { SkipIPv4: skip, SkipIPv6: skip };
  });

  app.post('/NetworkDriver.CreateNetwork', async (req) => {
    const m = 'CreateNetwork';
    const b = bodyOf(m, req.body, true);
    const data = (field: string) =>
      ipamData(m, b, field).map((d) => ({ pool: d.Pool, ...(d.Gateway === undefined ? {} : { gateway: d.Gateway }) }));
    const options = objectOf(m, b, 'Options');
    stringMap(`${m}: Options`, options, GENERIC);
    const networkId = dockerId(m, b, 'NetworkID');
    const ipv4 = data('IPv4Data');
    const ipv6 = data('IPv6Data');
    ipv4Enabled(m, options, ipv4.length);
    await driver.createNetwork({ networkId, options, ipv4, ipv6 });
    return {};
  });

  app.post('/NetworkDriver.DeleteNetwork', async (req) => {
    const m = 'DeleteNetwork';
    await driver.deleteNetwork(dockerId(m, bodyOf(m, req.body, true), 'NetworkID'));
    return {};
  });

  app.post('/NetworkDriver.CreateEndpoint', async (req) => {
    const m = 'CreateEndpoint';
    const { b, networkId, endpointId } = ids(m, req.body);
    const iface = objectOf(m, b, 'Interface');
    const options = objectOf(m, b, 'Options');
    const ifname = ifnameOf(m, options);
    const res = await driver.createEndpoint({
      networkId,
      endpointId,
      address: checkAddress(m, 'Interface.Address', str(m, iface, 'Address'), 'CIDR', true),
      addressV6: checkAddress(m, 'Interface.AddressIPv6', str(m, iface, 'AddressIPv6'), 'CIDR', true),
      mac: checkMac(m, 'Interface.MacAddress', str(m, iface, 'MacAddress')),
      portmap: portmapOf(m, options),
      ...(ifname === undefined ? {} : { ifname }),
      options,
    });
    // Only what Docker left empty may be returned ("driver modified interface" otherwise).
    return res.mac === undefined ? {} : { Interface: { MacAddress: res.mac } };
  });

  app.post('/NetworkDriver.EndpointOperInfo', async (req) => {
    const { networkId, endpointId } = ids('EndpointOperInfo', req.body);
    return { Value: await driver.endpointInfo(networkId, endpointId) };
  });

  app.post('/NetworkDriver.Join', async (req): Promise<JoinResponse> => {
    const m = 'Join';
    const { b, networkId, endpointId } = ids(m, req.body);
    str(m, b, 'SandboxKey'); // unused (Docker moves the interface itself), but a string when sent
    objectOf(m, b, 'Options');
    const res = await driver.join(networkId, endpointId);
    return {
      InterfaceName: { SrcName: res.srcName, DstPrefix: 'eth', ...(res.dstName === undefined ? {} : { DstName: res.dstName }) },
      Gateway: res.gateway,
      GatewayIPv6: res.gatewayV6,
      StaticRoutes: [],
      DisableGatewayService: false,
    };
  });

  app.post('/NetworkDriver.Leave', async (req) => {
    const { networkId, endpointId } = ids('Leave', req.body);
    await driver.leave(networkId, endpointId);
    return {};
  });

  app.post('/NetworkDriver.DeleteEndpoint', async (req) => {
    const { networkId, endpointId } = ids('DeleteEndpoint', req.body);
    await driver.deleteEndpoint(networkId, endpointId);
    return {};
  });

  app.post('/NetworkDriver.ProgramExternalConnectivity', async (req) => {
    const m = 'ProgramExternalConnectivity';
    const { b, networkId, endpointId } = ids(m, req.body);
    await driver.programExternalConnectivity(networkId, endpointId, portmapOf(m, objectOf(m, b, 'Options')));
    return {};
  });

  app.post('/NetworkDriver.RevokeExternalConnectivity', async (req) => {
    const { networkId, endpointId } = ids('RevokeExternalConnectivity', req.body);
    await driver.revokeExternalConnectivity(networkId, endpointId);
    return {};
  });

  // Swarm managers only (OVSNET_SCOPE=global): once for the swarm, again after a leader change.
  app.post('/NetworkDriver.AllocateNetwork', async (req) => {
    const m = 'AllocateNetwork';
    const b = bodyOf(m, req.body, true);
    const networkId = dockerId(m, b, 'NetworkID');
    const subnets = ipamData(m, b, 'IPv4Data').map((d) => d.Pool);
    return { Options: await driver.allocateNetwork({ networkId, options: stringMap(m, b, 'Options'), subnets }) };
  });
  app.post('/NetworkDriver.FreeNetwork', async (req) => {
    const m = 'FreeNetwork';
    await driver.freeNetwork(dockerId(m, bodyOf(m, req.body, true), 'NetworkID'));
    return {};
  });
  // Swarm node events: ovsnet's own host registry does that work.
  app.post('/NetworkDriver.DiscoverNew', () => ({}));
  app.post('/NetworkDriver.DiscoverDelete', () => ({}));
}
