/** Facts about this machine: what ovsnet names itself by to its peers, and its OVS datapath. */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';

/** /etc/machine-id when present (stable across restarts), else a hash of the hostname. */
export function machineId(): string {
  try {
    const id = fs.readFileSync('/etc/machine-id', 'utf8').trim();
    if (/^[0-9a-f]{32}$/.test(id)) return id;
  } catch {
    // no machine id: fall through
  }
  return createHash('sha256').update(os.hostname()).digest('hex').slice(0, 32);
}

/** The IPv4 address of the interface that holds the default route, or undefined. */
export function defaultRouteAddress(procNet = '/proc/net/route'): string | undefined {
  let iface: string | undefined;
  try {
    for (const line of fs.readFileSync(procNet, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[1] === '00000000' && f[7] === '00000000') {
        iface = f[0];
        break;
      }
    }
  } catch {
    return undefined;
  }
  if (iface === undefined) return undefined;
  return os.networkInterfaces()[iface]?.find((a) => a.family === 'IPv4' && !a.internal)?.address;
}

/** The name of the interface holding `address`, or undefined. */
export function interfaceOf(address: string): string | undefined {
  return Object.entries(os.networkInterfaces()).find(([, list]) => list?.some((a) => a.address === address))?.[0];
}

/** The MTU of the interface holding `address` (the tunnel interface for the VTEP), or undefined. */
export function mtuOfAddress(address: string, sysNet = '/sys/class/net'): number | undefined {
  const iface = interfaceOf(address);
  if (iface === undefined) return undefined;
  try {
    const mtu = Number(fs.readFileSync(`${sysNet}/${iface}/mtu`, 'utf8').trim());
    return Number.isInteger(mtu) && mtu > 0 ? mtu : undefined;
  } catch {
    return undefined;
  }
}

/** Where the kernel lists the openvswitch module once it is loaded. */
const OVS_KERNEL_MODULE = '/sys/module/openvswitch';

/** Whether the openvswitch kernel module is loaded (the kernel datapath is there). */
export function ovsKernelModuleLoaded(sysModule = OVS_KERNEL_MODULE): boolean {
  return fs.existsSync(sysModule);
}

/**
 * The datapath of the bridge for OVSNET_DATAPATH: auto is the kernel datapath when its module is
 * loaded, else the userspace one. The daemon and the CLI both ask here.
 */
export function chooseDatapath(setting: 'auto' | 'system' | 'netdev', sysModule = OVS_KERNEL_MODULE): 'system' | 'netdev' {
  if (setting !== 'auto') return setting;
  return ovsKernelModuleLoaded(sysModule) ? 'system' : 'netdev';
}
