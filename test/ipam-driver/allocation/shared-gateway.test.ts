/** The one shared-gateway rule, for logical networks' pools and endpoint groups' alike. */
import t from 'tap';
import { keepsGateway, sharesGateway } from '../../../src/ipam-driver/allocation/shared-gateway.js';
import type { PoolRecord } from '../../../src/ipam-driver/state/records.js';

const pool = (extra: Partial<PoolRecord>) => ({ poolId: 'p', pool: '10.0.0.0/24', host: 'a', ...extra }) as PoolRecord;

t.test('a request for a gateway held already gets it when several networks use the pool', async (t) => {
  t.equal(sharesGateway(pool({})), false, "a one-host pool's gateway is its network's");
  t.equal(sharesGateway(pool({ logical: 'net', users: ['a'] })), true, "a logical network's");
  t.equal(sharesGateway(pool({ shares: 1 })), true, 'a parent shared with an endpoint group');
});

t.test('a release leaves it while another network uses the pool', async (t) => {
  t.equal(keepsGateway(pool({}), 'a'), false);
  t.equal(keepsGateway(pool({ logical: 'net', users: ['a'] }), 'a'), false, 'the last host of a logical network releases it');
  t.equal(keepsGateway(pool({ logical: 'net', users: ['a', 'b'] }), 'a'), true, 'another host still uses it');
  t.equal(keepsGateway(pool({ shares: 1 }), 'a'), true, 'a group or its parent still uses it');
});
