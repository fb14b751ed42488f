/**
 * Docker's port map (com.docker.network.portmap) as CreateEndpoint and
 * ProgramExternalConnectivity read it: every field checked, the message naming the field and
 * its valid form; HostPort 0 and ranges kept for the driver to pick a port from.
 */
import t from 'tap';
import { portmapOf } from '../../src/plugin-api/wire.js';

const parse = (bindings: unknown) => portmapOf('CreateEndpoint', { 'com.docker.network.portmap': bindings });
const one = (b: Record<string, unknown>) => parse([{ Proto: 6, Port: 80, HostIP: '', HostPort: 8080, HostPortEnd: 8080, ...b }]);
const at = 'CreateEndpoint: Options\\.com\\.docker\\.network\\.portmap\\[0\\]';

t.test('what Docker sends', async (t) => {
  t.same(one({}), [{ proto: 'tcp', containerPort: 80, hostIp: '', hostPort: 8080, hostPortEnd: 8080 }], '-p 8080:80');
  t.same(
    one({ HostPort: 0, HostPortEnd: 0 }),
    [{ proto: 'tcp', containerPort: 80, hostIp: '', hostPort: 0, hostPortEnd: 0 }],
    '-p 80: any port',
  );
  t.same(
    one({ HostPort: 1, HostPortEnd: 65535 })[0],
    { proto: 'tcp', containerPort: 80, hostIp: '', hostPort: 1, hostPortEnd: 65535 },
    'a range',
  );
  t.same(one({ HostPortEnd: 0 })[0]?.hostPortEnd, 8080, 'HostPortEnd 0: HostPort alone');
  t.same(one({ HostPortEnd: undefined, HostPort: undefined })[0]?.hostPort, 0, 'fields left out: any port');
  t.same(one({ Proto: 17, HostIP: '192.0.2.7' })[0], {
    proto: 'udp',
    containerPort: 80,
    hostIp: '192.0.2.7',
    hostPort: 8080,
    hostPortEnd: 8080,
  });
  t.same(one({ Proto: 132, HostIP: '2001:db8::1' })[0]?.hostIp, '2001:db8::1');
  t.same(parse(null), [], 'none');
});

t.test('anything else is refused, naming the field and the valid form', async (t) => {
  const refused = (b: Record<string, unknown>, message: RegExp) => t.throws(() => one(b), { code: 'REQUEST_INVALID', message });
  refused({ HostPort: Number.NaN }, new RegExp(`^${at}\\.HostPort must be an integer from 0 to 65535, got null$`));
  refused({ HostPort: 70000 }, new RegExp(`${at}\\.HostPort must be an integer from 0 to 65535, got 70000`));
  refused({ HostPort: true }, new RegExp(`${at}\\.HostPort must be an integer from 0 to 65535, got true`));
  refused({ HostPort: '8080' }, /HostPort must be an integer from 0 to 65535, got "8080"/);
  refused({ HostPort: 80.5 }, /HostPort must be an integer/);
  refused({ HostPortEnd: 70000 }, /HostPortEnd must be an integer from 0 to 65535, got 70000/);
  refused({ HostPortEnd: 8000 }, /HostPortEnd 8000 is below HostPort 8080; expected a range HostPort-HostPortEnd, low to high/);
  refused(
    { HostPort: 0, HostPortEnd: 9000 },
    /HostPortEnd is 9000 with HostPort 0; expected HostPortEnd 0 \(any free port\) or a HostPort from 1/,
  );
  refused({ Port: 0 }, /\.Port must be an integer from 1 to 65535, got 0/);
  refused({ Proto: 'tcp' }, /\.Proto must be 6 \(tcp\), 17 \(udp\) or 132 \(sctp\), got "tcp"/);
  refused({ Proto: 1 }, /\.Proto must be 6 \(tcp\), 17 \(udp\) or 132 \(sctp\), got 1/);
  for (const ip of ['localhost', 'host.example', '10.0.0.1,10.0.0.2', '10.0.0.1 ', 'fe80::1%eth0', '999.1.1.1'])
    refused(
      { HostIP: ip },
      new RegExp(
        `HostIP must be an IPv4 or IPv6 address \\(or empty for every address\\), got "${ip.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"`,
      ),
    );
  refused({ HostIP: true }, /HostIP must be an IPv4 or IPv6 address .*got true/);
  t.throws(() => parse([null]), { message: new RegExp(`${at} must be an object`) });
  t.throws(() => parse('8080:80'), { message: /portmap must be an array of port bindings/ });
  t.throws(
    () => one({ HostIP: 'x'.repeat(10_000) }),
    { message: /got "x{79}\.\.\. \(10002 characters\)$/ },
    'a huge value is not echoed whole',
  );
});
