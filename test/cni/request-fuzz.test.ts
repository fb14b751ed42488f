/**
 * The CNI request parser (src/cni/request.ts) under mutated environments and stdin, with
 * fast-check. It must never throw anything but a CNI error with a code (what the runtime reads),
 * and never accept a value outside the CNI spec's forms: a container ID of letters, digits, "_",
 * "." and "-" starting with a letter or digit; an interface name of 1-15 bytes without "/", ":"
 * or whitespace, neither "." nor ".."; GC only with cni.dev/valid-attachments..
 */
import fc from 'fast-check';
import t from 'tap';
import { CNI_ERRORS, CNI_VERSIONS, type RpcRequest } from '../../src/cni/protocol.js';
import { parseCall } from '../../src/cni/request.js';
import { cniErrorOf } from '../../src/cni/server.js';
import { isOvsnetError } from '../../src/lib/errors.js';

const COMMANDS = ['ADD', 'DEL', 'CHECK', 'GC', 'STATUS'] as const;
const CODES = new Set<number>(Object.values(CNI_ERRORS));

/** Hostile strings: escapes, separators, dots, whitespace, NULs, long and non-ASCII ones. */
const hostile = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom(
    '',
    '.',
    '..',
    '/',
    '../x',
    'a/b',
    'a:b',
    'a b',
    ' a',
    'a\n',
    '\u001b[31mred',
    'a\u0000b',
    '-a',
    '_a',
    'é',
    'x'.repeat(16),
    'x'.repeat(300),
  ),
  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,70}$/),
);

const configArb = fc.oneof(
  fc
    .record(
      {
        cniVersion: fc.oneof(fc.constantFrom(...CNI_VERSIONS), hostile),
        name: hostile,
        type: fc.constant('ovsnet'),
        network: fc.oneof(fc.constant('net1'), hostile),
        'cni.dev/valid-attachments': fc.array(fc.record({ containerID: hostile, ifname: hostile }), { maxLength: 3 }),
        prevResult: fc.json({ maxDepth: 2 }),
      },
      { requiredKeys: [] },
    )
    .map((c) => JSON.stringify(c)),
  hostile,
  fc.json({ maxDepth: 3 }),
);

/** A configuration as a runtime writes it: a known version and network, the GC key or not. */
const validConfigArb = fc
  .record(
    {
      cniVersion: fc.constantFrom(...CNI_VERSIONS),
      name: fc.constant('podman'),
      type: fc.constant('ovsnet'),
      network: fc.constant('net1'),
      'cni.dev/valid-attachments': fc.array(fc.record({ containerID: hostile, ifname: hostile }), { maxLength: 2 }),
    },
    { requiredKeys: ['cniVersion', 'name', 'type', 'network'] },
  )
  .map((c) => JSON.stringify(c));

/** A request as the plugin binary sends it (every field a string), each field valid or hostile. */
const requestArb = fc.record({
  rpcVersion: fc.constant('1'),
  command: fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...COMMANDS) }, { weight: 1, arbitrary: hostile }),
  containerId: fc.oneof(fc.stringMatching(/^[0-9a-f]{64}$/), hostile),
  netns: fc.oneof(fc.constantFrom('/var/run/netns/c1', '/proc/1/ns/net', ''), hostile),
  ifname: fc.oneof(fc.constant('eth0'), hostile),
  args: hostile,
  path: fc.constant('/opt/cni/bin'),
  config: fc.oneof({ weight: 4, arbitrary: validConfigArb }, { weight: 1, arbitrary: configArb }),
}) as fc.Arbitrary<RpcRequest>;

const FIELDS = ['rpcVersion', 'command', 'containerId', 'netns', 'ifname', 'args', 'path', 'config'] as const;

/** Any JSON in some fields, others gone: what a client other than ovsnet's binary may send on the socket. */
const anyRequestArb = fc
  .tuple(requestArb, fc.dictionary(fc.constantFrom(...FIELDS), fc.jsonValue({ maxDepth: 2 })), fc.subarray([...FIELDS]))
  .map(([req, changed, gone]) => {
    const out: Record<string, unknown> = { ...req, ...changed };
    for (const f of gone) if (f !== 'command' && f !== 'config') delete out[f];
    return out as unknown as RpcRequest;
  });

/** What parsing gives: the call, or the CNI error code the runtime would read. */
function outcome(req: RpcRequest): { accepted: ReturnType<typeof parseCall> } | { code: number } {
  try {
    return { accepted: parseCall(req) };
  } catch (err) {
    if (!isOvsnetError(err)) throw new Error(`not a CNI error: ${String(err)}`);
    return { code: cniErrorOf(err, req.command, '1.0.0').code };
  }
}

const opts = { numRuns: 2000, seed: 22 };
type Outcome = ReturnType<typeof outcome>;

/** One property: `check` holds for the outcome of every request `arb` makes; todo when a property is known to fail. */
function holds(name: string, todo: string | undefined, arb: fc.Arbitrary<RpcRequest>, check: (o: Outcome) => boolean): void {
  t.test(name, todo === undefined ? {} : { todo }, async () => {
    fc.assert(
      fc.property(arb, (req) => check(outcome(req))),
      opts,
    );
  });
}

/** Accepted, or refused with a CNI code of a bad request (never one of an interface failing later). */
const acceptedOrRefused = (o: Outcome) => 'accepted' in o || (CODES.has(o.code) && o.code < 100);

holds('whatever the environment and stdin (as strings), only CNI errors with a code', undefined, requestArb, acceptedOrRefused);

holds('whatever JSON comes on the socket in any field, only CNI errors with a code', undefined, anyRequestArb, acceptedOrRefused);

holds(
  "an accepted container ID is in the spec's form",
  undefined,
  requestArb,
  (o) => !('accepted' in o) || o.accepted.containerId === '' || /^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(o.accepted.containerId),
);

holds('an accepted interface name is 1-15 bytes, no "/", ":" or whitespace, not "." or ".."', undefined, requestArb, (o) => {
  if (!('accepted' in o) || o.accepted.ifname === '') return true;
  const name = o.accepted.ifname;
  const bytes = Buffer.byteLength(name);
  return bytes >= 1 && bytes <= 15 && !/[/:\s]/.test(name) && name !== '.' && name !== '..';
});

holds(
  'GC is accepted only with cni.dev/valid-attachments',
  undefined,
  requestArb,
  (o) => !('accepted' in o) || o.accepted.command !== 'GC' || o.accepted.config.validAttachments !== undefined,
);
