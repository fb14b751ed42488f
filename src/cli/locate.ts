/**
 * Where the CLI gets its settings: the way the daemon got them. It looks for the running daemon
 * (the socket named by OVSNET_SOCKET, the systemd environment file's or the default one, then
 * each managed ovsnet plugin Docker runs) and asks it (GET /ovsnet/v1/info: the settings in
 * effect, secrets redacted); without an answer it reads the environment file the systemd unit
 * reads (deploy/ovsnet.service). A setting in the CLI's own environment wins over both, and
 * where the store it names differs from the daemon's, a note says so.
 *
 * A managed plugin's paths are inside its root: they are turned into the host's through the
 * plugin's mounts (its state directory, its secrets).
 */
import fs from 'node:fs';
import path from 'node:path';
import { SETTINGS, type SettingName } from '../config/config.js';
import { ADMIN_INFO_PATH, type AdminInfo } from '../plugin-api/admin-routes.js';
import { REDACTED } from '../config/settings-view.js';
import { hasControl } from './output.js';
import { unixGet } from '../lib/unix-http.js';
import { isCleanPath, managedOvsnets, type Mount } from './docker-api.js';

/** The file deploy/ovsnet.service reads (EnvironmentFile=). */
export const ENV_FILE = '/etc/default/ovsnet';

export interface DaemonFound {
  readonly socket: string;
  /** How it was found: "OVSNET_SOCKET", "the default socket", "managed plugin ovsnet:latest". */
  readonly via: string;
  /** Its answer; undefined for an ovsnet older than the admin endpoint (0.1), which answers Docker only. */
  readonly info: AdminInfo | undefined;
}

export interface Location {
  /** The OVSNET_* settings the CLI runs with. */
  readonly env: Readonly<Record<string, string>>;
  readonly daemon: DaemonFound | undefined;
  /** Where the settings came from, for `status`. */
  readonly source: string;
  /** Disagreements with the daemon, said on stderr. */
  readonly notes: readonly string[];
  /** Why the store cannot be opened with these settings (a command that needs it fails with this). */
  readonly storeProblem?: string;
}

/** systemd's EnvironmentFile= syntax as far as ovsnet's file uses it: KEY=VALUE, # comments, quotes. */
export function parseEnvFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    const key = line.slice(0, eq).trim();
    const value = line
      .slice(eq + 1)
      .trim()
      .replace(/^"(.*)"$|^'(.*)'$/, '$1$2');
    if (key.startsWith('OVSNET_')) out[key] = value;
  }
  return out;
}

/** Settings whose value is a path inside the daemon's root (the store's after `sqlite:`). */
const PATH_SETTINGS: readonly SettingName[] = [
  'OVSNET_ETCD_CA',
  'OVSNET_ETCD_CERT',
  'OVSNET_ETCD_KEY',
  'OVSNET_ETCD_PASSWORD_FILE',
  'OVSNET_JOURNAL',
];

/** A path inside a plugin's root as the host sees it: through the mount holding it (the longest). */
export function hostPath(inside: string, mounts: readonly Mount[]): string {
  const m = mounts
    .filter((x) => x.Source && (inside === x.Destination || inside.startsWith(`${x.Destination.replace(/\/$/, '')}/`)))
    .sort((a, b) => b.Destination.length - a.Destination.length)[0];
  return m?.Source ? path.join(m.Source, path.relative(m.Destination, inside)) : inside;
}

/**
 * The daemon's paths as the host sees them. A path with `..` or `.` segments could lead out of
 * the mount it maps through: such a setting is dropped, as is a path setting that is no
 * absolute path (the CLI then falls back to its own settings for it).
 */
function mapPaths(settings: Record<string, string>, mounts: readonly Mount[]): Record<string, string> {
  const out = { ...settings };
  for (const name of PATH_SETTINGS) {
    const v = out[name];
    if (v === undefined || v === 'off') continue;
    if (isCleanPath(v)) out[name] = hostPath(v, mounts);
    else delete out[name];
  }
  const store = out.OVSNET_STORE;
  if (store?.startsWith('sqlite:')) {
    const file = store.slice('sqlite:'.length);
    if (isCleanPath(file)) out.OVSNET_STORE = `sqlite:${hostPath(file, mounts)}`;
    else delete out.OVSNET_STORE;
  }
  return out;
}

/** What the CLI takes of the daemon's answer: settings it knows, as strings without control characters. */
function daemonSettings(info: AdminInfo | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  const settings: unknown = info?.settings;
  if (settings === null || typeof settings !== 'object') return out;
  for (const [k, v] of Object.entries(settings))
    if (k in SETTINGS && typeof v === 'string' && v !== REDACTED && v.length <= 4096 && !hasControl(v)) out[k] = v;
  return out;
}

/** The same store, however written: a resolved file, or the set of etcd endpoints. */
export function sameStore(a: string, b: string): boolean {
  const norm = (s: string) =>
    s.startsWith('sqlite:')
      ? `sqlite:${path.resolve(s.slice(7))}`
      : s
          .replace(/^etcd:\/\//, '')
          .split(',')
          .map((e) => e.trim())
          .sort()
          .join(',');
  return norm(a) === norm(b);
}

async function ask(socket: string): Promise<{ answers: boolean; info: AdminInfo | undefined }> {
  if (!fs.existsSync(socket)) return { answers: false, info: undefined };
  const res = await unixGet(socket, ADMIN_INFO_PATH, 3000);
  if (res?.status === 200) {
    try {
      const info: unknown = JSON.parse(res.body);
      // Not an object with settings: not ovsnet's answer either.
      const settings: unknown = info !== null && typeof info === 'object' ? (info as { settings?: unknown }).settings : undefined;
      if (settings !== null && typeof settings === 'object') return { answers: true, info: info as AdminInfo };
    } catch {
      // not ovsnet's answer: fall through
    }
  }
  // An ovsnet of 0.1 answers Docker's methods only: 404 here, yet it is ovsnet.
  return { answers: res?.status === 404 && res.body.includes('is not a method of ovsnet'), info: undefined };
}

export async function locate(
  processEnv: Readonly<Record<string, string | undefined>>,
  envFile: string,
  dockerSocket: string,
): Promise<Location> {
  const own: Record<string, string> = {};
  for (const [k, v] of Object.entries(processEnv)) if (k.startsWith('OVSNET_') && v !== undefined && v.trim() !== '') own[k] = v.trim();
  const file = fs.existsSync(envFile) ? parseEnvFile(fs.readFileSync(envFile, 'utf8')) : undefined;

  const candidates: { socket: string; via: string; mounts?: readonly Mount[] }[] = [];
  const disabled: string[] = [];
  if (own.OVSNET_SOCKET !== undefined) candidates.push({ socket: own.OVSNET_SOCKET, via: 'OVSNET_SOCKET' });
  else {
    const fromFile = file?.OVSNET_SOCKET;
    candidates.push({ socket: fromFile ?? SETTINGS.OVSNET_SOCKET.default, via: fromFile === undefined ? 'the default socket' : envFile });
    for (const { plugin, socket } of await managedOvsnets(dockerSocket))
      if (plugin.Enabled) candidates.push({ socket, via: `managed plugin ${plugin.Name}`, mounts: plugin.Settings.Mounts ?? [] });
      else disabled.push(plugin.Name);
  }
  let daemon: DaemonFound | undefined;
  let mounts: readonly Mount[] = [];
  for (const c of candidates) {
    const { answers, info } = await ask(c.socket);
    if (!answers) continue;
    daemon = { socket: c.socket, via: c.via, info };
    mounts = c.mounts ?? [];
    break;
  }

  // The daemon's settings when it says them (the environment file is then what it was started
  // with, or not: it may have changed since); else the file's.
  const theirs = mapPaths(daemonSettings(daemon?.info), mounts);
  const base: Record<string, string> = daemon?.info === undefined ? { ...file } : { ...theirs };
  // A password the daemon does not reveal may be in the file.
  if (daemon?.info !== undefined && file?.OVSNET_ETCD_PASSWORD !== undefined) base.OVSNET_ETCD_PASSWORD = file.OVSNET_ETCD_PASSWORD;
  if (daemon !== undefined) base.OVSNET_SOCKET = daemon.socket;
  const env: Record<string, string> = {};
  // A default is the same as unset (some settings are refused when given without their partner).
  for (const [k, v] of Object.entries({ ...base, ...own }))
    if (v !== '' && (!(k in SETTINGS) || v !== SETTINGS[k as SettingName].default || k in own)) env[k] = v;

  const notes: string[] = [];
  const daemonStore = theirs.OVSNET_STORE;
  if (daemon !== undefined && daemonStore !== undefined) {
    const where = `the daemon on ${daemon.socket} (${daemon.via})`;
    if (own.OVSNET_STORE !== undefined && !sameStore(own.OVSNET_STORE, daemonStore))
      notes.push(
        `this command reads the store ${own.OVSNET_STORE} (OVSNET_STORE in its environment), but ${where} uses ${daemonStore}: unset OVSNET_STORE to see what the daemon sees`,
      );
    else if (own.OVSNET_STORE === undefined && file?.OVSNET_STORE !== undefined && !sameStore(file.OVSNET_STORE, daemonStore))
      notes.push(
        `${envFile} names the store ${file.OVSNET_STORE}, but ${where} uses ${daemonStore}: it was started with other settings (restart it to apply the file); showing the daemon's store`,
      );
  }
  if (daemon === undefined && disabled.length > 0)
    notes.push(
      `no ovsnet daemon answers, and the managed plugin ${disabled.join(', ')} is disabled: showing ${file === undefined ? 'the default settings' : envFile}, which may not be its store (docker plugin enable ${disabled[0] ?? ''} to see what it sees)`,
    );
  // Commands that need the store fail with this; version and status still say what they can.
  const storeProblem =
    daemon?.info?.settings.OVSNET_ETCD_PASSWORD === REDACTED &&
    env.OVSNET_ETCD_PASSWORD === undefined &&
    env.OVSNET_ETCD_PASSWORD_FILE === undefined
      ? `the daemon on ${daemon.socket} authenticates to etcd with OVSNET_ETCD_PASSWORD, which it does not reveal: give this command the password too (OVSNET_ETCD_PASSWORD=... in its environment or in ${envFile}), or have the daemon read it from a file (OVSNET_ETCD_PASSWORD_FILE), which the CLI then reads as well`
      : undefined;
  const source = daemon?.info !== undefined ? `the daemon on ${daemon.socket} (${daemon.via})` : file !== undefined ? envFile : 'defaults';
  return {
    env,
    daemon,
    source: Object.keys(own).length > 0 ? `${source}, overridden by this command's environment` : source,
    notes,
    ...(storeProblem === undefined ? {} : { storeProblem }),
  };
}
