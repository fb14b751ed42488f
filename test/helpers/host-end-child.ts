/**
 * Run by test/driver/links/host-end.test.ts inside a network namespace of its own (unshare -n):
 * a veth made by the real Links, its container end moved into a second namespace that plays
 * the container, and the host holding the gateway address 10.9.0.1 on another link (a veth of its own: no dummy module needed). Prints what
 * the "container" got from the host end as one JSON line.
 */
import { execFileSync, spawn } from 'node:child_process';
import dgram from 'node:dgram';
import { Links } from '../../src/driver/links/links.js';

const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8' });
const shOk = (cmd: string, ...args: string[]) => {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    return String((err as { stdout?: string }).stdout ?? '');
  }
};
const out: Record<string, unknown> = {};
const links = new Links();

sh('ip', 'link', 'set', 'lo', 'up');
sh('ip', 'link', 'add', 'gw0', 'type', 'veth', 'peer', 'name', 'gw1'); // as a gateway port holds it
sh('ip', 'link', 'set', 'gw1', 'up');
sh('ip', 'addr', 'add', '10.9.0.1/24', 'dev', 'gw0');
sh('ip', 'link', 'set', 'gw0', 'up');
await links.createVeth({ host: 'ovh0', container: 'ovc0', mtu: 1500, mac: '02:00:00:00:00:05' });
const hostMac = /link\/ether (\S+)/.exec(sh('ip', '-o', 'link', 'show', 'ovh0'))?.[1] ?? '';

// The "container": a namespace of a sleeping process this child started (and stops below).
const peer = spawn('unshare', ['-n', 'sleep', '60'], { stdio: 'ignore' });
const pid = String(peer.pid);
try {
  for (let i = 0; i < 50 && sh('readlink', `/proc/${pid}/ns/net`) === sh('readlink', '/proc/self/ns/net'); i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
  const inPeer = (...args: string[]) => shOk('nsenter', '-t', pid, '-n', ...args);
  sh('ip', 'link', 'set', 'ovc0', 'netns', pid);
  inPeer('ip', 'link', 'set', 'lo', 'up');
  inPeer('ip', 'addr', 'add', '10.9.0.5/24', 'dev', 'ovc0');
  inPeer('ip', 'link', 'set', 'ovc0', 'up');
  await new Promise((r) => setTimeout(r, 300)); // carrier on both ends

  // ARP for the host's address, as a container asks for its gateway.
  out.arping = inPeer('busybox', 'arping', '-c', '2', '-w', '2', '-I', 'ovc0', '10.9.0.1');
  inPeer('busybox', 'ping', '-c', '1', '-W', '1', '10.9.0.1');
  out.neighbour = inPeer('ip', 'neigh', 'show', '10.9.0.1', 'dev', 'ovc0').trim();
  out.hostMac = hostMac;

  // IPv4 sent straight to the host end's MAC: the host stack must not take it.
  const socket = dgram.createSocket('udp4');
  let received = false;
  socket.on('message', () => (received = true));
  await new Promise<void>((r) => socket.bind(5555, '10.9.0.1', r));
  inPeer('ip', 'neigh', 'replace', '10.9.0.1', 'lladdr', hostMac, 'dev', 'ovc0', 'nud', 'permanent');
  const send = "const s=require('node:dgram').createSocket('udp4');s.send('hello',5555,'10.9.0.1',()=>s.close())";
  for (let i = 0; i < 3; i++) inPeer(process.execPath, '-e', send);
  await new Promise((r) => setTimeout(r, 300));
  socket.close();
  out.udpDelivered = received;

  // IPv6: no address of its own (no link-local, no neighbour discovery).
  await new Promise((r) => setTimeout(r, 1500)); // past a link-local address's DAD
  out.ipv6 = sh('ip', '-o', '-6', 'addr', 'show', 'dev', 'ovh0').trim();
  out.noarp = /NOARP/.test(sh('ip', '-o', 'link', 'show', 'ovh0'));
  out.hostUp = /<[^>]*\bUP\b/.test(sh('ip', '-o', 'link', 'show', 'ovh0'));
} finally {
  peer.kill('SIGKILL');
  await links.deleteLink('ovh0');
  await links.close();
}
console.log(JSON.stringify(out));
