/** The Open vSwitch driver end to end, with ovsnet's IPAM. */
import t from 'tap';
import { driverTestFile } from './driver-scenarios.js';

await driverTestFile(t, { ipam: true, octet: 41 });
