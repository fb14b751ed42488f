/**
 * What the CLI asks of Docker's Engine API (never the daemon, whose request path stays free of
 * Docker calls): the plugins it runs (to find a managed ovsnet's socket), its network drivers,
 * and the names of networks and containers shown beside ovsnet's IDs. Every call is bounded and
 * answers undefined when Docker cannot be asked: names are a help, never a reason to fail.
 */
import path from 'node:path';
import { unixGet } from '../lib/unix-http.js';
import { hasControl } from './output.js';

export const DOCKER_SOCKET = '/var/run/docker.sock';

async function dockerGet<T>(socket: string, path: string): Promise<T | undefined> {
  const res = await unixGet(socket, path, 3000);
  if (res?.status !== 200) return undefined;
  try {
    return JSON.parse(res.body) as T;
  } catch {
    return undefined;
  }
}

/** A managed plugin as `GET /plugins` lists it (the fields ovsnet reads). */
export interface DockerPlugin {
  readonly Id: string;
  readonly Name: string;
  readonly Enabled: boolean;
  readonly Config: {
    readonly Entrypoint?: readonly string[];
    readonly Interface: { readonly Types: readonly string[]; readonly Socket: string };
  };
  readonly Settings: { readonly Mounts?: readonly Mount[] };
}

export interface Mount {
  readonly Source?: string | null;
  readonly Destination: string;
}

/** Docker's plugin and endpoint IDs (moby's stringid): the CLI builds a socket path of a plugin's. */
const DOCKER_ID = /^[0-9a-f]{64}$/;
/** A network's: Docker's, or a swarm network's (swarmkit's identity.NewID). */
const NETWORK_ID = /^(?:[0-9a-f]{64}|[0-9a-z]{25})$/;
/** A plugin's socket (config.json Interface.Socket): a file name in the plugin's directory. */
const SOCKET_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
/** A plugin reference as `docker plugin ls` shows it: [registry/]name[:tag]. */
const PLUGIN_NAME = /^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$/;
/** Docker's container names (moby's restrictedNamePattern), with the leading / Docker lists. */
const CONTAINER_NAME = /^\/?[a-zA-Z0-9][a-zA-Z0-9_.-]+$/;

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');
/** An absolute path with no `.`/`..` segment, as a mount's ends must be to map paths by prefix. */
export const isCleanPath = (v: unknown): v is string =>
  typeof v === 'string' && v.startsWith('/') && v.length <= 4096 && path.posix.normalize(v) === v && !hasControl(v);

/**
 * A plugin entry of `GET /plugins` that the CLI can use: every field it reads of the type it
 * reads, its ID and socket name of the forms Docker makes (the socket's path is built from
 * them), its mounts clean paths. Anything else (a fake or compromised DOCKER_HOST) is skipped.
 */
function validPlugin(p: unknown): p is DockerPlugin {
  if (!isObject(p) || !isObject(p.Config) || !isObject(p.Config.Interface) || !isObject(p.Settings)) return false;
  const mounts = p.Settings.Mounts ?? [];
  return (
    typeof p.Id === 'string' &&
    DOCKER_ID.test(p.Id) &&
    typeof p.Name === 'string' &&
    PLUGIN_NAME.test(p.Name) &&
    typeof p.Enabled === 'boolean' &&
    isStrings(p.Config.Interface.Types) &&
    typeof p.Config.Interface.Socket === 'string' &&
    SOCKET_NAME.test(p.Config.Interface.Socket) &&
    (p.Config.Entrypoint === undefined || isStrings(p.Config.Entrypoint)) &&
    Array.isArray(mounts) &&
    mounts.every((m) => isObject(m) && isCleanPath(m.Destination) && (m.Source === undefined || m.Source === null || isCleanPath(m.Source)))
  );
}

/**
 * Docker runs a managed plugin with its socket in /run/docker/plugins/<ID>/ (whatever
 * --exec-root says); ovsnet's are the network-driver plugins running its entry point (a
 * disabled one has no socket: the CLI says so rather than read another store unawares).
 */
export async function managedOvsnets(dockerSocket: string): Promise<{ plugin: DockerPlugin; socket: string }[]> {
  const listed = await dockerGet<unknown>(dockerSocket, '/plugins');
  const plugins = Array.isArray(listed) ? listed.filter(validPlugin) : [];
  return plugins
    .filter(
      (p) =>
        p.Config.Interface.Types.includes('docker.networkdriver/1.0') &&
        (p.Config.Entrypoint ?? []).some((e) => e.endsWith('/dist/src/main.js')),
    )
    .map((plugin) => ({ plugin, socket: `/run/docker/plugins/${plugin.Id}/${plugin.Config.Interface.Socket}` }));
}

/** Docker's network drivers as `GET /info` lists them (it lists a plugin once it used it). */
export async function dockerNetworkPlugins(dockerSocket: string): Promise<string[] | undefined> {
  const info = await dockerGet<unknown>(dockerSocket, '/info');
  if (info === undefined) return undefined;
  // An answer of another shape lists no plugin: the caller then says ovsnet is not among them.
  const network = isObject(info) && isObject(info.Plugins) ? info.Plugins.Network : undefined;
  return isStrings(network) ? network : [];
}

/** Docker's names: of networks by network ID, of containers by endpoint ID. */
export interface DockerNames {
  readonly networks: ReadonlyMap<string, string>;
  readonly containers: ReadonlyMap<string, string>;
}

/**
 * Network names are any string Docker took (it checks none: they are escaped where printed,
 * output.ts); IDs must be Docker's and container names Docker's form, else the entry is skipped.
 */
export async function dockerNames(dockerSocket: string): Promise<DockerNames | undefined> {
  const nets = await dockerGet<unknown>(dockerSocket, '/networks');
  if (!Array.isArray(nets)) return undefined;
  const ctrs = await dockerGet<unknown>(dockerSocket, '/containers/json?all=1');
  const containers = new Map<string, string>();
  for (const c of Array.isArray(ctrs) ? ctrs : []) {
    if (!isObject(c) || !isStrings(c.Names) || !isObject(c.NetworkSettings) || !isObject(c.NetworkSettings.Networks)) continue;
    const name = c.Names[0] ?? '';
    if (!CONTAINER_NAME.test(name)) continue;
    for (const n of Object.values(c.NetworkSettings.Networks))
      if (isObject(n) && typeof n.EndpointID === 'string' && DOCKER_ID.test(n.EndpointID))
        containers.set(n.EndpointID, name.replace(/^\//, ''));
  }
  const networks = new Map<string, string>();
  for (const n of nets)
    if (isObject(n) && typeof n.Id === 'string' && NETWORK_ID.test(n.Id) && typeof n.Name === 'string' && n.Name.length <= 1024)
      networks.set(n.Id, n.Name);
  return { networks, containers };
}

/** The name whose full ID starts with `shortId` (the CLI shows 12 characters), or ''. */
export function nameOf(names: ReadonlyMap<string, string> | undefined, shortId: string): string {
  if (names === undefined || shortId === '') return '';
  for (const [id, name] of names) if (id.startsWith(shortId)) return name;
  return '';
}
