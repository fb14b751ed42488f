/**
 * A joined endpoint's announcement (pure parts and the scheduler on fakes): the ARP announcement
 * and the neighbour advertisement byte for byte (checksum checked by summing it back), hostile
 * MACs and addresses refused with a RangeError or ENDPOINT_INVALID and nothing else, and the
 * Announcer: one OVSDB read per round for every port due, the PACKET_OUT in by the port and
 * through the tables, once more later, a port not numbered yet waited for, a port gone forgotten,
 * a connection down or too old given up on with one warning, a failed read tried again.
 */
import fc from 'fast-check';
import t from 'tap';
import { arpAnnouncement, neighbourAdvertisement } from '../../../src/driver/endpoint/announce-frames.js';
import { Announcer, announcements, type Announced, type AnnouncerDeps } from '../../../src/driver/endpoint/announce.js';
import { OvsnetError } from '../../../src/lib/errors.js';

const MAC = '02:42:0a:4d:00:09';
const EP: Announced = { hostVeth: 'ovh1', mac: MAC, address: '10.77.0.9/24', addressV6: 'fd77::9/64' };

function sum16(parts: readonly Buffer[]): number {
  let sum = 0;
  for (const b of parts) for (let i = 0; i + 1 < b.length; i += 2) sum += b.readUInt16BE(i);
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return sum;
}

t.test('arpAnnouncement: a broadcast ARP request whose sender and target are the address, padded to 60 bytes', async (t) => {
  const f = arpAnnouncement(MAC, '10.77.0.9/24');
  t.equal(f.length, 60);
  t.equal(
    f.subarray(0, 42).toString('hex'),
    'ffffffffffff' + '02420a4d0009' + '0806' + '0001080006040001' + '02420a4d0009' + '0a4d0009' + '000000000000' + '0a4d0009',
  );
  t.same(f.subarray(42), Buffer.alloc(18), 'zero padding');
  t.same(arpAnnouncement(MAC, '10.77.0.9'), f, 'with or without the prefix');
});

t.test(
  'neighbourAdvertisement: to all nodes, hop limit 255, override, the target link-layer address; its checksum sums to 0xffff',
  async (t) => {
    const f = neighbourAdvertisement(MAC, 'fd77::9/64');
    t.equal(f.length, 14 + 40 + 32);
    t.equal(f.subarray(0, 14).toString('hex'), '333300000001' + '02420a4d0009' + '86dd');
    const ip = f.subarray(14, 54);
    t.equal(ip.readUInt32BE(0), 0x60000000, 'IPv6, no class or label');
    t.equal(ip.readUInt16BE(4), 32, 'payload length');
    t.equal(ip.readUInt8(6), 58, 'ICMPv6');
    t.equal(ip.readUInt8(7), 255, 'hop limit 255');
    t.equal(ip.subarray(8, 24).toString('hex'), 'fd770000000000000000000000000009', 'from the address');
    t.equal(ip.subarray(24, 40).toString('hex'), 'ff020000000000000000000000000001', 'to all nodes');
    const icmp = f.subarray(54);
    t.equal(icmp.readUInt8(0), 136, 'neighbour advertisement');
    t.equal(icmp.readUInt32BE(4), 0x20000000, 'override only: not solicited, not a router');
    t.equal(icmp.subarray(8, 24).toString('hex'), 'fd770000000000000000000000000009', 'target');
    t.equal(icmp.subarray(24, 32).toString('hex'), '0201' + '02420a4d0009', 'target link-layer address option');
    const pseudo = Buffer.alloc(40);
    ip.copy(pseudo, 0, 8, 40);
    pseudo.writeUInt32BE(32, 32);
    pseudo.writeUInt8(58, 39);
    t.equal(sum16([pseudo, icmp]), 0xffff, 'the checksum makes the whole sum 0xffff');
  },
);

t.test('announcements: one frame per address the endpoint has', async (t) => {
  t.equal(announcements(EP).length, 2);
  t.equal(announcements({ hostVeth: 'p', mac: MAC, address: '10.0.0.2/24' }).length, 1);
  t.equal(announcements({ hostVeth: 'p', mac: MAC, addressV6: 'fd00::2/64' })[0]?.readUInt16BE(12), 0x86dd);
  t.same(announcements({ hostVeth: 'p', mac: MAC }), []);
});

t.test('hostile MACs and addresses: a RangeError or ENDPOINT_INVALID, never another throw, never a frame', async (t) => {
  const refused = (fn: () => unknown): boolean => {
    try {
      fn();
      return false;
    } catch (err) {
      return err instanceof RangeError || (err instanceof OvsnetError && err.code === 'ENDPOINT_INVALID');
    }
  };
  for (const mac of [
    '',
    '02:42:0a:4d:00',
    '02:42:0a:4d:00:09:01',
    '02-42-0a-4d-00-09',
    'zz:42:0a:4d:00:09',
    `${MAC}\n`,
    'x'.repeat(100_000),
  ]) {
    t.ok(
      refused(() => arpAnnouncement(mac, '10.0.0.2')),
      `MAC ${JSON.stringify(mac.slice(0, 30))}`,
    );
  }
  for (const address of ['', '10.0.0.256', 'fd00::2', '10.0.0.2/33', '10.0.0.2; rm -rf /', '1'.repeat(100_000)]) {
    t.ok(
      refused(() => arpAnnouncement(MAC, address)),
      `IPv4 ${JSON.stringify(address.slice(0, 30))}`,
    );
  }
  t.ok(
    refused(() => neighbourAdvertisement(MAC, '10.0.0.2')),
    'an IPv4 address for a neighbour advertisement',
  );
  fc.assert(
    fc.property(fc.string({ maxLength: 40 }), fc.string({ maxLength: 60 }), (mac, address) => {
      for (const build of [arpAnnouncement, neighbourAdvertisement]) {
        try {
          const f = build(mac, address);
          if (f.length < 60 || f.subarray(6, 12).toString('hex') !== mac.replace(/:/g, '').toLowerCase()) return false;
        } catch (err) {
          if (!(err instanceof RangeError || (err instanceof OvsnetError && err.code === 'ENDPOINT_INVALID'))) return false;
        }
      }
      return true;
    }),
  );
  fc.assert(
    fc.property(fc.ipV4(), fc.uint8Array({ minLength: 6, maxLength: 6 }), (ip, bytes) => {
      const mac = [...bytes].map((b) => b.toString(16).padStart(2, '0')).join(':');
      const f = arpAnnouncement(mac, ip);
      const sender = [...f.subarray(28, 32)].join('.');
      return sender === ip && f.subarray(38, 42).equals(f.subarray(28, 32)) && f.subarray(22, 28).equals(Buffer.from(bytes));
    }),
  );
  fc.assert(
    fc.property(fc.ipV6(), (ip) => {
      const f = neighbourAdvertisement(MAC, ip);
      const pseudo = Buffer.concat([f.subarray(22, 54), Buffer.from([0, 0, 0, 32, 0, 0, 0, 58])]);
      return sum16([pseudo, f.subarray(54)]) === 0xffff;
    }),
  );
});

/** A fake switch: ports by name (undefined: not numbered yet), a connection of `version` (undefined: down). */
function fakes(over: Partial<AnnouncerDeps> = {}) {
  const ports = new Map<string, number | undefined>([['ovh1', 7]]);
  const reads: string[][] = [];
  const sent: Buffer[][] = [];
  const warnings: string[] = [];
  const link = { version: 6 as number | undefined, up: true };
  const deps: AnnouncerDeps = {
    log: { warn: (_o: unknown, msg: string) => warnings.push(msg) } as unknown as AnnouncerDeps['log'],
    ovs: {
      ofports: async (names) => {
        reads.push([...names]);
        return new Map(names.filter((n) => ports.has(n)).map((n) => [n, ports.get(n)]));
      },
    },
    bridge: () =>
      link.version === undefined
        ? undefined
        : {
            openflowVersion: link.version,
            send: (m) => {
              if (!link.up) return false;
              sent.push([...m]);
              return true;
            },
          },
    timing: { at: [0, 60], giveUpMs: 300 },
    ...over,
  };
  return { a: new Announcer(deps), ports, reads, sent, warnings, link };
}

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test(
  'Announcer: each frame in by the port, through the tables; once more later; one OVSDB read for the ports due together',
  async (t) => {
    const { a, ports, reads, sent, warnings } = fakes();
    ports.set('ovh2', 8);
    a.announce(EP);
    a.announce({ hostVeth: 'ovh2', mac: '02:42:0a:4d:00:0a', address: '10.77.0.10/24' });
    await wait(30);
    t.same(reads, [['ovh1', 'ovh2']], 'one read for both');
    t.equal(sent.length, 2);
    const [arp, na] = sent[0] ?? [];
    t.equal(arp?.readUInt8(0), 6, 'the connection version (1.5)');
    t.equal(arp?.readUInt32BE(24), 7, 'in by the endpoint port');
    t.equal(arp?.readUInt32BE(36), 0xfffffff9, 'output: the tables');
    t.same(arp?.subarray(-60), arpAnnouncement(MAC, '10.77.0.9'));
    t.same(na?.subarray(-86), neighbourAdvertisement(MAC, 'fd77::9'));
    t.equal(sent[1]?.length, 1, 'the second endpoint: IPv4 only');
    await wait(90);
    t.equal(sent.length, 4, 'each once more');
    t.equal(reads.length, 1, 'with the numbers read the first time');
    await wait(100);
    t.equal(sent.length, 4, 'and no more');
    t.equal(a.queued, 0);
    t.same(a.counts, { sent: 4, unannounced: 0 });
    t.same(warnings, []);
  },
);

t.test('Announcer: a port not numbered yet is waited for; a port gone is forgotten without a word', async (t) => {
  const { a, ports, sent, warnings } = fakes();
  ports.set('ovh1', undefined);
  a.announce(EP);
  a.announce({ ...EP, hostVeth: 'gone' });
  await wait(50);
  t.equal(sent.length, 0, 'nothing yet');
  ports.set('ovh1', 9);
  await wait(250);
  t.ok(sent.length >= 1, 'sent once it has a number');
  t.equal(sent[0]?.[0]?.readUInt32BE(24), 9);
  await wait(100);
  t.equal(a.queued, 0);
  t.same(warnings, [], 'a port gone: its endpoint was deleted');
});

t.test('Announcer: an endpoint deleted between its announcements (forget) gets no second one', async (t) => {
  const { a, sent } = fakes({ timing: { at: [0, 100], giveUpMs: 300 } });
  a.announce(EP);
  await wait(40);
  t.equal(sent.length, 1, 'the first');
  a.forget('ovh1');
  t.equal(a.queued, 0);
  await wait(150);
  t.equal(sent.length, 1, 'no second');
});

t.test('Announcer: the connection down, or speaking OpenFlow 1.0: given up on, with one warning each', async (t) => {
  const down = fakes();
  down.link.up = false;
  down.a.announce(EP);
  await wait(450);
  t.equal(down.a.queued, 0, 'given up after the bound');
  t.same(down.a.counts, { sent: 0, unannounced: 1 });
  t.equal(down.warnings.length, 1);
  t.match(down.warnings[0], /endpoint port ovh1 not announced \(the OpenFlow connection to the bridge is down, for 0\.3 s\)/);
  const old = fakes();
  old.link.version = 1;
  old.a.announce(EP);
  await wait(30);
  t.equal(old.a.queued, 0, 'at once');
  t.match(old.warnings[0], /speaks version 1, under 1\.3/);
});

t.test('Announcer: a failed OVSDB read is tried again; an endpoint announced anew replaces its queued one; stop ends it all', async (t) => {
  let fail = 2;
  const { a, sent } = fakes({
    ovs: {
      ofports: async (names) => {
        if (fail-- > 0) throw new Error('ovsdb-server restarting');
        return new Map(names.map((n) => [n, 7]));
      },
    },
  });
  a.announce(EP);
  a.announce({ hostVeth: 'ovh1', mac: MAC, address: '10.77.0.10/24' });
  await wait(400);
  t.ok(sent.length >= 1, 'sent after two failed reads');
  t.equal(sent[0]?.length, 1, 'the later announcement of the port');
  const b = fakes();
  b.a.announce({ hostVeth: 'ovh1', mac: MAC });
  t.equal(b.a.queued, 0, 'no address: nothing to announce');
  b.a.announce(EP);
  b.a.stop();
  b.a.announce(EP);
  await wait(50);
  t.same(b.sent, [], 'stopped: nothing sent');
});
