/** `npm run bench -- <suite>`: runs one benchmark suite and prints its table. */
import { benchBuilds } from './builds.js';
import { benchChurn } from './churn.js';
import { benchCluster } from './cluster.js';
import { benchDriver } from './driver.js';
import { benchHosts } from './hosts.js';
import { benchIdle } from './idle.js';
import { benchIpam } from './ipam.js';
import { benchLinks } from './links.js';
import { benchRequests } from './requests.js';
import { benchPolicy } from './policy.js';
import { benchRestart } from './restart.js';
import { benchScale } from './scale.js';
import { benchStartup } from './startup.js';
import { benchStore } from './store.js';
import { benchVip } from './vip.js';

const suites: Record<string, () => Promise<void>> = {
  store: benchStore,
  ipam: benchIpam,
  driver: benchDriver,
  links: benchLinks,
  cluster: benchCluster,
  churn: benchChurn,
  // CPU per start, build against build (BENCH_BUILDS), each storm on a cluster of its own.
  builds: benchBuilds,
  scale: benchScale,
  // The many-hosts part of scale alone (BENCH_HOSTS agents, BENCH_FULL_HOST=0 without the full host).
  hosts: () => benchHosts(process.env.TEST_ETCD_ENDPOINTS?.split(',').map((e) => `http://${e}`) ?? []),
  restart: benchRestart,
  startup: benchStartup,
  vip: benchVip,
  requests: benchRequests,
  idle: benchIdle,
  policy: benchPolicy,
};

const name = process.argv[2];
const run = name === undefined ? undefined : suites[name];
if (run === undefined) {
  console.error(`usage: npm run bench -- <suite>; suites: ${Object.keys(suites).join(', ')}`);
  process.exit(2);
}
await run();
process.exit(0);
