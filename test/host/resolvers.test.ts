/**
 * The host's resolvers as Docker's embedded DNS server forwards to them from containers
 * (src/host/resolvers.ts): the nameservers of /etc/resolv.conf that are not loopback, or of
 * systemd-resolved's file when /etc/resolv.conf names its stub alone; unknown when unreadable.
 */
import t from 'tap';
import { hostResolvers, nameservers } from '../../src/host/resolvers.js';

const files = { main: '/etc/resolv.conf', systemd: '/run/systemd/resolve/resolv.conf' };
const reader = (contents: Record<string, string>) => async (file: string) => {
  const text = contents[file];
  if (text === undefined) throw Object.assign(new Error(`ENOENT: ${file}`), { code: 'ENOENT' });
  return text;
};

t.test('nameserver lines, in order, each once; comments, options, scoped and bad addresses skipped', async (t) => {
  t.same(
    nameservers(
      '# generated\nsearch example.com\nnameserver 10.0.0.2\n  nameserver\t2001:db8::53 # v6\nnameserver 10.0.0.2\nnameserver fe80::1%eth0\nnameserver bogus\noptions ndots:2\n;nameserver 9.9.9.9\n',
    ),
    ['10.0.0.2', '2001:db8::53'],
  );
  t.same(nameservers(''), []);
  t.equal(nameservers(Array.from({ length: 40 }, (_, i) => `nameserver 10.0.0.${i + 1}`).join('\n')).length, 16, 'at most 16');
});

t.test("Docker's choice: loopback servers are queried from the host's namespace, so none of them is needed", async (t) => {
  t.same(await hostResolvers(reader({ [files.main]: 'nameserver 127.0.0.1\nnameserver 192.0.2.53\nnameserver ::1\n' }), files), {
    servers: ['192.0.2.53'],
    from: files.main,
  });
  t.same(
    await hostResolvers(
      reader({ [files.main]: 'nameserver 127.0.0.53\n', [files.systemd]: 'nameserver 192.0.2.1\nnameserver 192.0.2.2\n' }),
      files,
    ),
    {
      servers: ['192.0.2.1', '192.0.2.2'],
      from: files.systemd,
    },
    "systemd-resolved's stub alone: its upstream servers",
  );
  t.same(await hostResolvers(reader({ [files.main]: 'nameserver 127.0.0.53\nnameserver 192.0.2.9\n' }), files), {
    servers: ['192.0.2.9'],
    from: files.main,
  });
});

t.test("none listed: Docker's own defaults, Google's public resolvers", async (t) => {
  t.match(await hostResolvers(reader({ [files.main]: '# empty\nsearch example.com\n' }), files), {
    servers: ['8.8.8.8', '8.8.4.4', '2001:4860:4860::8888', '2001:4860:4860::8844'],
  });
  t.same(
    await hostResolvers(reader({ [files.main]: 'nameserver 127.0.0.1\n' }), files),
    { servers: [], from: files.main },
    'loopback only: nothing through the gateway',
  );
});

t.test('unreadable: unknown, saying which file and why', async (t) => {
  t.match(await hostResolvers(reader({}), files), { unknown: /cannot read \/etc\/resolv\.conf \(ENOENT\)/ });
  t.match(await hostResolvers(reader({ [files.main]: 'nameserver 127.0.0.53\n' }), files), {
    unknown: /cannot read \/run\/systemd\/resolve\/resolv\.conf \(ENOENT\), where Docker finds the resolvers/,
  });
});
