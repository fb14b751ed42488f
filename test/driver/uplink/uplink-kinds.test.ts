/**
 * OVSNET_UPLINK naming a link that aggregates others (a Linux bridge such as docker0, a bond, a
 * team) is refused before anything changes: no trunk port, no host port, no address moved. A
 * fake `ip` answers as iproute2 does (`ip -j -d link show`); a fake OVSDB records every change.
 */
import t from 'tap';
import type { Ovsdb } from '../../../src/driver/ovs/ovsdb.js';
import { HostIp } from '../../../src/driver/uplink/host-ip.js';
import { Uplink } from '../../../src/driver/uplink/uplink.js';
import { createLogger } from '../../../src/lib/log.js';

const ok = (stdout = '') => ({ code: 0, stdout, stderr: '' });

/** The host's links and one address on each; records every `ip` call that is not a read. */
function host(links: Record<string, Record<string, unknown>>) {
  const writes: string[] = [];
  const ip = new HostIp(async (_cmd, args) => {
    const line = args.join(' ');
    const dev = args.at(-1) ?? '';
    if (/^-j (-d )?link show dev /.test(line)) {
      const l = links[dev];
      return l === undefined
        ? { code: 1, stdout: '', stderr: `Device "${dev}" does not exist.` }
        : ok(JSON.stringify([{ ifname: dev, ...l }]));
    }
    if (line === '-j link show') return ok(JSON.stringify(Object.keys(links).map((ifname) => ({ ifname }))));
    if (line.includes('addr show')) {
      return ok(JSON.stringify([{ ifname: dev, addr_info: [{ family: 'inet', local: '172.17.0.1', prefixlen: 16, scope: 'global' }] }]));
    }
    if (/-j route/.test(line)) return ok('[]');
    writes.push(line);
    return ok();
  });
  const changes: unknown[] = [];
  const ovs = {
    transact: async (ops: { op: string }[]) =>
      ops.map((o) => {
        if (o.op !== 'select') changes.push(o);
        return { rows: [] };
      }),
    waitApplied: async () => undefined,
  } as unknown as Ovsdb;
  return { ip, ovs, writes, changes };
}

const ether = (kind?: string) => ({
  mtu: 1500,
  address: '02:42:ac:11:00:01',
  flags: ['UP'],
  link_type: 'ether',
  ...(kind === undefined ? {} : { linkinfo: { info_kind: kind, info_data: {} } }),
});

t.test('a Linux bridge, a bond, a team: refused naming what it is; nothing changed', async (t) => {
  for (const [name, kind, what] of [
    ['docker0', 'bridge', 'a Linux bridge'],
    ['bond0', 'bond', 'a bond'],
    ['team0', 'team', 'a team device'],
  ] as const) {
    const h = host({ [name]: ether(kind), eth1: ether() });
    const uplink = new Uplink({ ovs: h.ovs, log: createLogger('silent'), bridge: 'ovsnet0', name, ip: h.ip });
    await t.rejects(uplink.attach([]), {
      code: 'UPLINK_INVALID',
      message: `OVSNET_UPLINK=${name}: ${name} is ${what}, not an interface cabled to the physical switch: name the physical interface itself`,
    });
    t.same(h.changes, [], `${name}: no OVSDB change`);
    t.same(h.writes, [], `${name}: no address moved, no link touched`);
    t.equal(uplink.mtu(), undefined, `${name}: not attached`);
  }
});

t.test('a port of a bridge is refused as before; a physical interface (or a VLAN link) is taken', async (t) => {
  const port = host({ veth1: { ...ether('veth'), master: 'docker0' } });
  await t.rejects(new Uplink({ ovs: port.ovs, log: createLogger('silent'), bridge: 'ovsnet0', name: 'veth1', ip: port.ip }).attach([]), {
    code: 'UPLINK_INVALID',
    message: /veth1 is a port of docker0/,
  });
  for (const [name, link] of [
    ['eth1', ether()],
    ['eth1.100', ether('vlan')],
  ] as const) {
    const h = host({ [name]: link });
    const uplink = new Uplink({ ovs: h.ovs, log: createLogger('silent'), bridge: 'ovsnet0', name, ip: h.ip });
    await uplink.attach([]);
    t.equal(uplink.mtu(), 1500, `${name}: attached`);
    t.ok(h.changes.length > 0, `${name}: made the bridge's trunk`);
  }
});
