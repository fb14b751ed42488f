/** An endpoint record with every field set (the record copy's tests: it must give each back). */
import type { EndpointRecord } from '../../src/driver/model/records.js';

export const everyEndpointField: EndpointRecord = {
  networkId: 'ab'.repeat(32),
  endpointId: 'cd'.repeat(32),
  host: 'h1',
  address: '10.1.0.5/24',
  addressV6: 'fd00::5/64',
  mac: '02:42:0a:01:00:05',
  hostVeth: 'ovhcdcdcdcdcd',
  containerVeth: 'ovccdcdcdcdcd',
  ifname: 'eth7',
  portmap: [{ proto: 'tcp', containerPort: 80, hostIp: '0.0.0.0', hostPort: 0, hostPortEnd: 0 }],
  published: [{ proto: 'udp', containerPort: 53, hostIp: '127.0.0.1', hostPort: 5353, hostPortEnd: 5353 }],
  qos: { rateKbps: 1000, burstKbit: 100, dscp: 10 },
  createdAt: '2026-01-02T03:04:05.678Z',
};
