/** The datapath choice the daemon and the CLI share: auto follows the openvswitch kernel module. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { chooseDatapath, ovsKernelModuleLoaded } from '../../src/host/host-info.js';

t.test('auto is the kernel datapath when its module is loaded, else the userspace one', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-dp-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const loaded = path.join(dir, 'openvswitch');
  const absent = path.join(dir, 'absent');
  fs.mkdirSync(loaded);
  t.equal(ovsKernelModuleLoaded(loaded), true);
  t.equal(ovsKernelModuleLoaded(absent), false);
  t.equal(chooseDatapath('auto', loaded), 'system');
  t.equal(chooseDatapath('auto', absent), 'netdev');
  t.equal(chooseDatapath('system', absent), 'system', 'a setting other than auto is kept');
  t.equal(chooseDatapath('netdev', loaded), 'netdev');
});
