/** Metric names: the standard process_* and nodejs_* series, the build's facts; the endpoints' counters. */
import t from 'tap';
import { Metrics } from '../src/metrics.js';
import { VERSION } from '../src/lib/version.js';
import { createLogger } from '../src/lib/log.js';
import type { Traffic } from '../src/metrics-traffic.js';
import { OpenFlow } from '../src/driver/ovs/openflow.js';
import { TrafficCounters } from '../src/driver/upkeep/traffic-counters.js';

t.test('standard names, build info, the code label', async (t) => {
  const m = new Metrics();
  m.observeCall('NetworkDriver.Join', 200, 0.01);
  const text = await m.registry.metrics();
  t.match(text, /^process_cpu_seconds_total \d/m);
  t.match(text, /^process_resident_memory_bytes \d/m);
  t.match(text, /^nodejs_eventloop_lag_seconds \d/m);
  // The loop delay's percentiles since the previous scrape, which the churn and cluster benches read.
  for (const figure of ['p50', 'p99', 'max']) t.match(text, new RegExp(`^nodejs_eventloop_lag_${figure}_seconds \\d`, 'm'));
  t.match(text, /^nodejs_heap_size_used_bytes \d/m);
  t.notMatch(text, /^ovsnet_(process|nodejs)_/m, 'none renamed');
  t.match(text, `ovsnet_build_info{version="${VERSION}",nodejs="${process.version}"} 1`);
  t.match(text, 'ovsnet_docker_call_duration_seconds_count{method="NetworkDriver.Join",code="200"} 1');
});

t.test("endpoints' counters and policy drops: read at scrape time, only the live ones, none when they cannot be read", async (t) => {
  const m = new Metrics();
  const base = { pools: () => [], cluster: () => ({ hosts: 0, tunnels: 0, blocks: [] }) };
  const one = (endpoint: string, n: number) => ({
    network: '6a0f3c1d2e4b',
    endpoint,
    ...{ sentPackets: n, sentBytes: n * 100, receivedPackets: n + 1, receivedBytes: (n + 1) * 100, policyDrops: 2 },
  });
  let answer: Traffic | undefined = {
    endpoints: [one('5bfc77cf8575', 10), one('9c6f23a985dd', 3)],
    networks: [{ network: '6a0f3c1d2e4b', policyDrops: 7 }],
  };
  let reads = 0;
  m.readFrom({ ...base, traffic: () => (reads++, Promise.resolve(answer)) });
  const text = await m.registry.metrics();
  t.match(text, '# TYPE ovsnet_endpoint_sent_packets_total counter');
  t.match(text, 'ovsnet_endpoint_sent_packets_total{network="6a0f3c1d2e4b",endpoint="5bfc77cf8575"} 10');
  t.match(text, 'ovsnet_endpoint_sent_bytes_total{network="6a0f3c1d2e4b",endpoint="5bfc77cf8575"} 1000');
  t.match(text, 'ovsnet_endpoint_received_packets_total{network="6a0f3c1d2e4b",endpoint="9c6f23a985dd"} 4');
  t.match(text, 'ovsnet_endpoint_received_bytes_total{network="6a0f3c1d2e4b",endpoint="9c6f23a985dd"} 400');
  t.match(text, 'ovsnet_endpoint_policy_drops_total{network="6a0f3c1d2e4b",endpoint="9c6f23a985dd"} 2');
  t.match(text, 'ovsnet_policy_drops_total{network="6a0f3c1d2e4b"} 7');
  t.equal(reads, 6, 'each counter asks (the source shares one read among them: traffic-counters.ts)');
  answer = { endpoints: [one('5bfc77cf8575', 11)], networks: [] };
  const after = await m.registry.metrics();
  t.match(after, 'ovsnet_endpoint_sent_packets_total{network="6a0f3c1d2e4b",endpoint="5bfc77cf8575"} 11');
  t.notMatch(after, /9c6f23a985dd/, "a removed endpoint's series are gone");
  t.notMatch(after, /^ovsnet_policy_drops_total\{/m, "and a removed network's");
  answer = undefined;
  const away = await m.registry.metrics();
  t.notMatch(away, /^ovsnet_endpoint_\w+\{/m, 'OVS away: no endpoint series');
  t.match(away, /^ovsnet_build_info\{/m, 'the rest as always');
  m.readFrom({ ...base, traffic: () => Promise.reject(new Error('boom')) });
  t.match(await m.registry.metrics(), /^ovsnet_build_info\{/m, 'a source that fails: the same, no error');
});

t.test('a scrape while ovs-ofctl hangs: the other metrics, within the read timeout', async (t) => {
  const m = new Metrics();
  let runs = 0;
  const hanging = new OpenFlow(() => (runs++, new Promise(() => undefined)), 0);
  const counters = new TrafficCounters({
    records: {
      localNetworks: async () => [
        { networkId: 'a'.repeat(64), bridge: 'ovsnet0', tag: 1, mtu: 1500, internal: false, ipv4: [], ipv6: [], createdAt: '' },
      ],
    },
    ovs: { ownPorts: async () => [] },
    openflow: hanging,
    log: createLogger('silent'),
    timeoutMs: 300,
  });
  m.readFrom({ pools: () => [], cluster: () => ({ hosts: 0, tunnels: 0, blocks: [] }), traffic: () => counters.read() });
  const started = Date.now();
  const text = await m.registry.metrics();
  t.ok(Date.now() - started < 2000, `answered in ${Date.now() - started} ms`);
  t.match(text, /^ovsnet_build_info\{/m);
  t.notMatch(text, /^ovsnet_endpoint_\w+\{/m);
  t.equal(runs, 2, 'one dump-ports and one dump-flows, for the six counters');
});
