/**
 * From ovs-ofctl's texts to flow mods and meter commands (pure): diff-flows' lines in ovsnet's
 * cookie scope only, meters compared whichever way they were written, only ovsnet's removed.
 */
import t from 'tap';
import { OWN, only } from '../../../src/driver/ovs/cookies.js';
import { flowMods, meterMods, meterShape, parseMeters, groupMods, parseGroups } from '../../../src/driver/ovs/flow-diff.js';
import { meterPort } from '../../../src/driver/ovs/qos-flows.js';

/** `ovs-ofctl -O OpenFlow13 diff-flows tbr /dev/stdin` as OVS 3.1 prints it (+: wanted only, -: on the switch only). */
const DIFF = `+priority=100,arp,tun_id=0x5,arp_tpa=10.0.0.1 cookie=0xf5e000000000005 actions=drop
-priority=5,ip,nw_dst=1.2.3.4 actions=drop
+priority=0 cookie=0xf5c000000000000 actions=NORMAL
+table=41 priority=10,arp,reg7=0x3,arp_tpa=10.0.0.0/24 cookie=0xf60000000000003 actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],set_field:aa:bb:cc:dd:ee:ff->eth_src,load:0x2->NXM_OF_ARP_OP[],IN_PORT
-table=41 priority=10,arp,reg7=0x3,arp_tpa=10.0.0.0/24 cookie=0xf60000000000003 actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],mod_dl_src:aa:bb:cc:dd:ee:ff,IN_PORT
`;

t.test('diff-flows output: missing flows added, a changed one added once and counted as modified', async (t) => {
  const mods = flowMods(DIFF, OWN);
  t.same(mods.lines, [
    'add priority=100,arp,tun_id=0x5,arp_tpa=10.0.0.1 cookie=0xf5e000000000005 actions=drop',
    'add priority=0 cookie=0xf5c000000000000 actions=NORMAL',
    'add table=41 priority=10,arp,reg7=0x3,arp_tpa=10.0.0.0/24 cookie=0xf60000000000003 actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],set_field:aa:bb:cc:dd:ee:ff->eth_src,load:0x2->NXM_OF_ARP_OP[],IN_PORT',
  ]);
  t.match(mods, { added: 2, modified: 1, deleted: 0 });
  t.notOk(
    mods.lines.some((l) => l.includes('mod_dl_src')),
    'the old actions are replaced by the add, not deleted apart',
  );
});

t.test("foreign flows (no cookie, or another controller's) are never touched", async (t) => {
  const diff = [
    '-priority=5,ip,nw_dst=1.2.3.4 actions=drop',
    '-priority=6,ip,nw_dst=1.2.3.5 cookie=0x1234 actions=drop',
    '-priority=7,ip,nw_dst=1.2.3.6 cookie=0xf80000000000001 actions=drop',
    '-table=3 priority=1 cookie=0xffffffffffffffff actions=NORMAL',
  ].join('\n');
  t.same(flowMods(diff, OWN), { lines: [], added: 0, modified: 0, deleted: 0 });
  const narrow = flowMods(`${diff}\n-priority=0 cookie=0xf5e000000000005 actions=drop\n`, only(0xf5c000000000000n));
  t.same(narrow.lines, [], "ovsnet's own flows outside a narrower scope are left alone too");
});

t.test('a flow ovsnet no longer wants: delete_strict by its match only (no cookie, no actions)', async (t) => {
  const diff = [
    '-priority=100,arp,tun_id=0x5,arp_tpa=10.0.0.1 cookie=0xf5e000000000005 actions=drop',
    '-table=42 priority=20,ct_state=+new+trk,reg6=0xc,reg7=0xa,ct_mark=0xb,ip cookie=0xf6000000000000a actions=output:NXM_NX_REG5[]',
    '-priority=5,ip,nw_dst=1.2.3.4 actions=drop',
  ].join('\n');
  const mods = flowMods(diff, OWN);
  t.same(mods.lines, [
    'delete_strict table=0 priority=100,arp,tun_id=0x5,arp_tpa=10.0.0.1',
    'delete_strict table=42 priority=20,ct_state=+new+trk,reg6=0xc,reg7=0xa,ct_mark=0xb,ip',
  ]);
  t.match(mods, { added: 0, modified: 0, deleted: 2 });
});

t.test('empty or unsigned lines change nothing', async (t) => {
  t.same(flowMods('', OWN).lines, []);
  t.same(flowMods('\n\n diff header?\n', OWN).lines, []);
});

t.test('a wanted flow outside the scope is refused: ovsnet never installs a flow it would not know as its own', async (t) => {
  t.throws(
    () => flowMods('+priority=5,ip actions=drop\n', OWN),
    /a wanted flow lies outside ovsnet's cookie scope: priority=5,ip actions=drop/,
  );
  t.throws(() => flowMods('+priority=5,ip cookie=0x1234 actions=drop\n', OWN), /outside ovsnet's cookie scope/);
  t.throws(
    () => flowMods('+priority=100,arp cookie=0xf5e000000000005 actions=drop\n', only(0xf5c000000000000n)),
    /outside ovsnet's cookie scope/,
    "ovsnet's cookie, but not the scope synced",
  );
});

t.test("meterShape: add-meter's form and dump-meters' compare equal, a different rate does not", async (t) => {
  const added = meterShape('meter=257,kbps,burst,stats,bands=type=drop,rate=20000,burst_size=30000');
  const dumped = meterShape('meter=257 kbps burst stats bands=\ntype=drop rate=20000 burst_size=30000');
  t.equal(added, dumped);
  t.not(meterShape('meter=257,kbps,burst,stats,bands=type=drop,rate=10000,burst_size=30000'), dumped);
  t.equal(meterShape('meter=1,kbps,burst,stats,bands=type=drop,rate=20000,burst_size=30000'), added, 'the ID is no part of the shape');
});

const DUMP = `OFPST_METER_CONFIG reply (OF1.3) (xid=0x2):
meter=257 kbps burst stats bands=
type=drop rate=20000 burst_size=30000
meter=257753092 kbps burst stats bands=
type=drop rate=1000 burst_size=500
`;

t.test("parseMeters: dump-meters' answer, each meter's shape by ID", async (t) => {
  const meters = parseMeters(DUMP);
  t.same([...meters.keys()], [257, 257753092]);
  t.equal(meters.get(257), meterShape('meter=257,kbps,burst,stats,bands=type=drop,rate=20000,burst_size=30000'));
  t.equal(meters.get(257753092), meterShape('meter=257753092,kbps,burst,stats,bands=type=drop,rate=1000,burst_size=500'));
  t.same([...parseMeters('OFPST_METER_CONFIG reply (OF1.3) (xid=0x2):\n').keys()], [], 'none');
});

t.test('meterMods: add, modify, remove; never an ID `own` refuses', async (t) => {
  const own = (id: number) => meterPort(id) !== undefined;
  const A = 0x0f5d0001;
  const B = 0x0f5d0002;
  const C = 0x0f5d0003;
  const D = 0x0f5d0004;
  const spec = (id: number, rate: number) => `meter=${id},kbps,burst,stats,bands=type=drop,rate=${rate},burst_size=${rate}`;
  const have = parseMeters(
    [
      `meter=${A} kbps burst stats bands=\ntype=drop rate=100 burst_size=100`,
      `meter=${B} kbps burst stats bands=\ntype=drop rate=100 burst_size=100`,
      `meter=${C} kbps burst stats bands=\ntype=drop rate=100 burst_size=100`,
      'meter=7 kbps bands=\ntype=drop rate=1',
      `meter=${0xffff0000} kbps bands=\ntype=drop rate=1`,
    ].join('\n'),
  );
  const want = new Map([
    [A, spec(A, 100)],
    [B, spec(B, 200)],
    [D, spec(D, 300)],
  ]);
  t.same(
    meterMods(have, want, own),
    { add: [D], modify: [B], remove: [C] },
    "C is ovsnet's and no longer wanted; 7 and 0xffff0000 are not ovsnet's",
  );
  t.same(
    meterMods(have, new Map(), () => false),
    { add: [], modify: [], remove: [] },
    'nothing removed that `own` refuses',
  );
  t.same(meterMods(new Map(), want, own), { add: [A, B, D], modify: [], remove: [] }, 'after a restart: all added');
});

t.test("parseGroups and groupMods: dump-groups' answer by ID; add, modify, remove within ovsnet's range only", async (t) => {
  const dump = [
    'OFPST_GROUP_DESC reply (OF1.5) (xid=0x2):',
    ' group_id=258034660,type=select,bucket=bucket_id:0,actions=ct(commit,table=52,zone=4101,nat(dst=10.90.0.7))',
    ' group_id=258034661,type=select,bucket=bucket_id:0,actions=ct(commit,table=52,zone=4101,nat(dst=10.90.0.8))',
    ' group_id=7,type=all,bucket=bucket_id:0,actions=output:1',
  ].join('\n');
  const have = parseGroups(dump);
  t.equal(have.size, 3);
  t.equal(have.get(7), 'type=all,bucket=bucket_id:0,actions=output:1');
  const own = (id: number) => id > 0x0f610000 && id <= 0x0f61ffff;
  const want = new Map([
    [258034660, have.get(258034660) ?? ''],
    [258034662, 'type=select,bucket=bucket_id:0,actions=ct(commit,table=52,zone=4101,nat(dst=10.90.0.9))'],
  ]);
  t.same(groupMods(have, want, own), { add: [258034662], modify: [], remove: [258034661] }, 'group 7 (not ours) stays');
  want.set(258034660, 'type=select,bucket=bucket_id:0,actions=ct(commit,table=52,zone=4101,nat(dst=10.90.0.10))');
  t.same(groupMods(have, want, own).modify, [258034660], 'a changed bucket list is a modify');
  t.throws(() => groupMods(have, new Map([[7, 'type=all']]), own), /outside ovsnet's range/);
});
