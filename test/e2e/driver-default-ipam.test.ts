/** The Open vSwitch driver end to end, with Docker's default IPAM. */
import t from 'tap';
import { driverTestFile } from './driver-scenarios.js';

await driverTestFile(t, { ipam: false, octet: 42 });
