/**
 * OVSNET_STORE and the etcd settings that go with it (config.ts validates the rest). Secrets are
 * read from files here, once, at start: a value given in the environment of a managed plugin is
 * shown by `docker plugin inspect`, a file on the plugin's read-only secrets mount is not.
 */
import fs from 'node:fs';
import path from 'node:path';
import { messageOf } from '../lib/errors.js';

export type StoreConfig =
  | { readonly kind: 'sqlite'; readonly file: string; readonly sharedDir?: boolean }
  | {
      readonly kind: 'etcd';
      readonly endpoints: readonly string[];
      readonly tls?: { readonly caFile: string; readonly certFile?: string; readonly keyFile?: string };
      readonly auth?: { readonly username: string; readonly password: string };
    };

/** The settings read here (settings.ts's table documents each). */
export const STORE_SETTINGS = [
  'OVSNET_ETCD_CA',
  'OVSNET_ETCD_CERT',
  'OVSNET_ETCD_KEY',
  'OVSNET_ETCD_USERNAME',
  'OVSNET_ETCD_PASSWORD',
  'OVSNET_ETCD_PASSWORD_FILE',
  'OVSNET_ETCD_ALLOW_PLAINTEXT_CREDENTIALS',
] as const;
type EtcdSetting = (typeof STORE_SETTINGS)[number];

/**
 * The store named by `raw`, or undefined when something is wrong: `bad` is told what is wrong
 * with OVSNET_STORE itself, `problems` gets one line per other wrong setting.
 */
export function parseStore(
  raw: string,
  given: (name: EtcdSetting) => string | undefined,
  bad: (why?: string) => void,
  problems: string[],
): StoreConfig | undefined {
  if (raw.startsWith('sqlite:')) {
    const file = raw.slice('sqlite:'.length);
    if (!path.isAbsolute(file) || file.endsWith('/')) {
      bad('the file must be an absolute path');
      return undefined;
    }
    for (const n of STORE_SETTINGS) {
      if (given(n) !== undefined) problems.push(`${n} applies only with OVSNET_STORE=etcd://...; the store is ${raw}`);
    }
    return { kind: 'sqlite', file };
  }
  if (raw.startsWith('etcd://')) return parseEtcd(raw, given, bad, problems);
  bad();
  return undefined;
}

function parseEtcd(
  raw: string,
  given: (name: EtcdSetting) => string | undefined,
  bad: (why?: string) => void,
  problems: string[],
): StoreConfig | undefined {
  const hosts = raw
    .slice('etcd://'.length)
    .split(',')
    .map((h) => h.trim());
  const valid =
    hosts.length > 0 &&
    hosts.every((h) => /^[A-Za-z0-9.-]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$/.test(h) && Number(h.split(':').pop()) <= 65535);
  if (!valid) {
    bad('each endpoint is host:port');
    return undefined;
  }
  const before = problems.length;
  const ca = given('OVSNET_ETCD_CA');
  const cert = given('OVSNET_ETCD_CERT');
  const key = given('OVSNET_ETCD_KEY');
  const username = given('OVSNET_ETCD_USERNAME');
  const password = readPassword(given, problems);
  if ((cert === undefined) !== (key === undefined)) problems.push('OVSNET_ETCD_CERT and OVSNET_ETCD_KEY go together: set both or neither');
  if (cert !== undefined && ca === undefined)
    problems.push('OVSNET_ETCD_CERT needs OVSNET_ETCD_CA (the CA that signed the etcd server certificate)');
  if ((username === undefined) !== (password === undefined))
    problems.push('OVSNET_ETCD_USERNAME and OVSNET_ETCD_PASSWORD (or OVSNET_ETCD_PASSWORD_FILE) go together: set both or neither');
  const allowRaw = given('OVSNET_ETCD_ALLOW_PLAINTEXT_CREDENTIALS') ?? 'false';
  if (allowRaw !== 'true' && allowRaw !== 'false') {
    problems.push(`OVSNET_ETCD_ALLOW_PLAINTEXT_CREDENTIALS=${JSON.stringify(allowRaw)} is not valid: expected true or false`);
  }
  // Without a CA the connection is plain http: etcd's Authenticate call would carry the password
  // in clear text to whoever is on the path, and every call after it the token it grants.
  if (username !== undefined && ca === undefined && allowRaw !== 'true') {
    problems.push(
      `OVSNET_ETCD_USERNAME and the etcd password would cross the network in clear text: ${raw} is plain http without OVSNET_ETCD_CA. ` +
        'Set OVSNET_ETCD_CA (TLS), or OVSNET_ETCD_ALLOW_PLAINTEXT_CREDENTIALS=true to accept that anyone on the path to etcd can read the password',
    );
  }
  if (problems.length > before) return undefined;
  const scheme = ca === undefined ? 'http' : 'https';
  return {
    kind: 'etcd',
    endpoints: hosts.map((h) => `${scheme}://${h}`),
    ...(ca === undefined
      ? {}
      : { tls: { caFile: ca, ...(cert === undefined ? {} : { certFile: cert }), ...(key === undefined ? {} : { keyFile: key }) } }),
    ...(username === undefined || password === undefined ? {} : { auth: { username, password } }),
  };
}

/** OVSNET_ETCD_PASSWORD, or the first line of OVSNET_ETCD_PASSWORD_FILE; never both. */
function readPassword(given: (name: EtcdSetting) => string | undefined, problems: string[]): string | undefined {
  const plain = given('OVSNET_ETCD_PASSWORD');
  const file = given('OVSNET_ETCD_PASSWORD_FILE');
  if (file === undefined) return plain;
  if (plain !== undefined) {
    problems.push(
      'OVSNET_ETCD_PASSWORD and OVSNET_ETCD_PASSWORD_FILE are both set: set one (OVSNET_ETCD_PASSWORD_FILE keeps the password out of the environment and `docker plugin inspect`)',
    );
    return undefined;
  }
  if (!path.isAbsolute(file)) {
    problems.push(
      `OVSNET_ETCD_PASSWORD_FILE=${JSON.stringify(file)} is not valid: expected an absolute path to a file holding the password`,
    );
    return undefined;
  }
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    problems.push(`OVSNET_ETCD_PASSWORD_FILE=${file} cannot be read: ${messageOf(err)} (expected a readable file holding the password)`);
    return undefined;
  }
  // One trailing newline is the file's, not the password's (echo, editors).
  const password = text.replace(/\r?\n$/, '');
  if (password === '' || /[\r\n]/.test(password)) {
    problems.push(
      `OVSNET_ETCD_PASSWORD_FILE=${file} is not valid: expected the password on one line, not ${password === '' ? 'an empty file' : 'several lines'}`,
    );
    return undefined;
  }
  return password;
}
