/** IPv6 turned on for a gateway port where the host's default turns it off, or a refusal that says what to change. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { enableIpv6, ipv6OffReason } from '../../../src/driver/links/gateway-ipv6.js';

t.test('enableIpv6 writes disable_ipv6=0 where it is 1, leaves 0 alone, answers false where it cannot', async (t) => {
  const procSys = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-procsys-'));
  t.teardown(() => fs.rmSync(procSys, { recursive: true, force: true }));
  const conf = (dev: string) => path.join(procSys, 'net', 'ipv6', 'conf', dev);
  fs.mkdirSync(conf('ovgoff'), { recursive: true });
  fs.writeFileSync(path.join(conf('ovgoff'), 'disable_ipv6'), '1\n');
  t.equal(enableIpv6('ovgoff', procSys), true);
  t.equal(fs.readFileSync(path.join(conf('ovgoff'), 'disable_ipv6'), 'utf8'), '0');
  fs.mkdirSync(conf('ovgon'), { recursive: true });
  fs.writeFileSync(path.join(conf('ovgon'), 'disable_ipv6'), '0\n');
  const before = fs.statSync(path.join(conf('ovgon'), 'disable_ipv6')).mtimeMs;
  t.equal(enableIpv6('ovgon', procSys), true);
  t.equal(fs.statSync(path.join(conf('ovgon'), 'disable_ipv6')).mtimeMs, before, 'already on: not written');
  t.equal(enableIpv6('ovgmissing', procSys), false, 'no such file (no IPv6 in this kernel): false, no throw');
});

t.test('the refusal names the setting and both ways out', async (t) => {
  const text = ipv6OffReason('ovg0123456789ab', false);
  t.match(text, /net\.ipv6\.conf\.ovg0123456789ab\.disable_ipv6=1/);
  t.match(text, /read-only/);
  t.match(text, /sysctl -w.*net\.ipv6\.conf\.default\.disable_ipv6=0|net\.ipv6\.conf\.default\.disable_ipv6=0 on the host/);
  t.match(text, /without --ipv6/);
  t.notMatch(ipv6OffReason('ovg0123456789ab', true), /read-only/);
});
