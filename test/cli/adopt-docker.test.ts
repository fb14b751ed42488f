/**
 * `ovsnet ipam adopt docker NETWORK` reads a network's containers from Docker's Engine API: a
 * fake Engine here answers hostile values. Only Docker's 64-hex container IDs become holders,
 * names with control characters are dropped, and an answer that is not JSON is a clear refusal.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { readDocker } from '../../src/cli/adopt.js';

const GOOD = 'a'.repeat(64);

async function engine(t: Test, body: string): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-adopt-docker-'));
  const socket = path.join(dir, 'docker.sock');
  const server = http.createServer((_req, res) => res.end(body));
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  t.teardown(() => {
    server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return socket;
}

t.test("only Docker's container IDs become holders; hostile names are dropped", async (t) => {
  const socket = await engine(
    t,
    JSON.stringify({
      Name: 'n',
      Containers: {
        [GOOD]: { Name: 'web', IPv4Address: '10.1.0.2/24', IPv6Address: '' },
        '../../etc/passwd': { Name: 'x', IPv4Address: '10.1.0.3/24' },
        [`${GOOD}\u001b[2J`]: { Name: 'y', IPv4Address: '10.1.0.4/24' },
        ['b'.repeat(4096)]: { Name: 'z', IPv4Address: '10.1.0.5/24' },
        ['c'.repeat(64)]: { Name: 'evil\u001b]0;owned\u0007', IPv4Address: '10.1.0.6/24' },
        ['d'.repeat(64)]: { IPv4Address: 42 },
        ['e'.repeat(64)]: null,
      },
    }),
  );
  const found = await readDocker(socket, 'n');
  t.same(
    found.map((f) => [f.address, f.holder, f.name]),
    [
      ['10.1.0.2', `adopted/docker/${GOOD}`, 'web'],
      ['10.1.0.6', `adopted/docker/${'c'.repeat(64)}`, undefined],
    ],
  );
});

t.test('an answer that is not JSON, or JSON of another shape, is refused or yields nothing', async (t) => {
  const socket = await engine(t, '<html>not docker</html>');
  await t.rejects(readDocker(socket, 'n'), { code: 'IPAM_ADOPT_SOURCE_INVALID', message: /is not JSON/ });
  t.same(await readDocker(await engine(t, 'null'), 'n'), []);
  t.same(await readDocker(await engine(t, '{"Containers":"x"}'), 'n'), []);
});
