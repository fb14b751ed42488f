/** IpamDriver.* routes: translate the wire to the Ipam service, nothing more. */
import type { FastifyInstance } from 'fastify';
import type { Ipam } from '../ipam-driver/ipam.js';
import { checkAddress, invalid, poolId } from './forms.js';
import {
  bodyOf,
  bool,
  ENDPOINT_NAME,
  GATEWAY_ADDRESS_TYPE,
  REQUEST_ADDRESS_TYPE,
  str,
  stringMap,
  type DefaultAddressSpacesResponse,
  type IpamCapabilitiesResponse,
  type RequestAddressResponse,
  type RequestPoolResponse,
} from './wire.js';

export function ipamRoutes(app: FastifyInstance, ipam: Ipam): void {
  app.post(
    '/IpamDriver.GetCapabilities',
    (): IpamCapabilitiesResponse => ({
      RequiresMACAddress: false,
      // ovsnet's store, not Docker's replay, is the truth after a restart.
      RequiresRequestReplay: false,
    }),
  );

  app.post('/IpamDriver.GetDefaultAddressSpaces', (): DefaultAddressSpacesResponse => {
    const s = ipam.defaultAddressSpaces();
    return { LocalDefaultAddressSpace: s.local, GlobalDefaultAddressSpace: s.global };
  });

  app.post('/IpamDriver.RequestPool', async (req): Promise<RequestPoolResponse> => {
    const m = 'RequestPool';
    const b = bodyOf(m, req.body, true);
    const pool = checkAddress(m, 'Pool', str(m, b, 'Pool'), 'CIDR', true);
    const subPool = checkAddress(m, 'SubPool', str(m, b, 'SubPool'), 'CIDR', true);
    if (pool === '' && subPool !== '') throw invalid(m, `SubPool (--ip-range) ${subPool} needs a Pool (--subnet) holding it`);
    const res = await ipam.requestPool({
      addressSpace: str(m, b, 'AddressSpace'),
      pool,
      subPool,
      options: stringMap(m, b, 'Options'),
      v6: bool(m, b, 'V6'),
    });
    return { PoolID: res.poolId, Pool: res.pool, Data: {} };
  });

  app.post('/IpamDriver.ReleasePool', async (req) => {
    const m = 'ReleasePool';
    await ipam.releasePool(poolId(m, bodyOf(m, req.body, true)));
    return {};
  });

  app.post('/IpamDriver.RequestAddress', async (req): Promise<RequestAddressResponse> => {
    const m = 'RequestAddress';
    const b = bodyOf(m, req.body, true);
    const pool = poolId(m, b);
    const address = checkAddress(m, 'Address', str(m, b, 'Address'), 'plain or CIDR', true);
    const options = stringMap(m, b, 'Options');
    const name = options[ENDPOINT_NAME];
    const res = await ipam.requestAddress({
      poolId: pool,
      address,
      gateway: options[REQUEST_ADDRESS_TYPE] === GATEWAY_ADDRESS_TYPE,
      ...(name === undefined ? {} : { name }),
    });
    return { Address: res.address, Data: {} };
  });

  app.post('/IpamDriver.ReleaseAddress', async (req) => {
    const m = 'ReleaseAddress';
    const b = bodyOf(m, req.body, true);
    const pool = poolId(m, b);
    await ipam.releaseAddress(pool, checkAddress(m, 'Address', str(m, b, 'Address', { required: true }), 'plain or CIDR', false));
    return {};
  });
}
