/** Metric names: the standard process_* and nodejs_* series, the build's facts. */
import t from 'tap';
import { Metrics } from '../src/metrics.js';
import { VERSION } from '../src/lib/version.js';

t.test('standard names, build info, the code label', async (t) => {
  const m = new Metrics();
  m.observeCall('NetworkDriver.Join', 200, 0.01);
  const text = await m.registry.metrics();
  t.match(text, /^process_cpu_seconds_total \d/m);
  t.match(text, /^process_resident_memory_bytes \d/m);
  t.match(text, /^nodejs_eventloop_lag_seconds \d/m);
  t.match(text, /^nodejs_heap_size_used_bytes \d/m);
  t.notMatch(text, /^ovsnet_(process|nodejs)_/m, 'none renamed');
  t.match(text, `ovsnet_build_info{version="${VERSION}",nodejs="${process.version}"} 1`);
  t.match(text, 'ovsnet_docker_call_duration_seconds_count{method="NetworkDriver.Join",code="200"} 1');
});
