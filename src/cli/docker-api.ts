/**
 * What the CLI asks of Docker's Engine API (never the daemon, whose request path stays free of
 * Docker calls): the plugins it runs (to find a managed ovsnet's socket), its network drivers,
 * and the names of networks and containers shown beside ovsnet's IDs. Every call is bounded and
 * answers undefined when Docker cannot be asked: names are a help, never a reason to fail.
 */
import http from 'node:http';

export const DOCKER_SOCKET = '/var/run/docker.sock';

/** GET over a unix socket: the status and body, or undefined when nothing answers in time. */
export function unixGet(socket: string, path: string, timeoutMs: number): Promise<{ status: number; body: string } | undefined> {
  return new Promise((resolve) => {
    const req = http.request({ socketPath: socket, path, method: 'GET', timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', () => resolve(undefined));
    });
    req.on('error', () => resolve(undefined));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

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

/**
 * Docker runs a managed plugin with its socket in /run/docker/plugins/<ID>/ (whatever
 * --exec-root says); ovsnet's are the network-driver plugins running its entry point (a
 * disabled one has no socket: the CLI says so rather than read another store unawares).
 */
export async function managedOvsnets(dockerSocket: string): Promise<{ plugin: DockerPlugin; socket: string }[]> {
  const plugins = (await dockerGet<DockerPlugin[]>(dockerSocket, '/plugins')) ?? [];
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
  const info = await dockerGet<{ Plugins?: { Network?: string[] } }>(dockerSocket, '/info');
  return info === undefined ? undefined : (info.Plugins?.Network ?? []);
}

/** Docker's names: of networks by network ID, of containers by endpoint ID. */
export interface DockerNames {
  readonly networks: ReadonlyMap<string, string>;
  readonly containers: ReadonlyMap<string, string>;
}

export async function dockerNames(dockerSocket: string): Promise<DockerNames | undefined> {
  const nets = await dockerGet<{ Id: string; Name: string }[]>(dockerSocket, '/networks');
  if (nets === undefined) return undefined;
  const ctrs =
    (await dockerGet<{ Names?: string[]; NetworkSettings?: { Networks?: Record<string, { EndpointID?: string }> } }[]>(
      dockerSocket,
      '/containers/json?all=1',
    )) ?? [];
  const containers = new Map<string, string>();
  for (const c of ctrs) {
    const name = (c.Names?.[0] ?? '').replace(/^\//, '');
    for (const n of Object.values(c.NetworkSettings?.Networks ?? {})) if (n.EndpointID) containers.set(n.EndpointID, name);
  }
  return { networks: new Map(nets.map((n) => [n.Id, n.Name])), containers };
}

/** The name whose full ID starts with `shortId` (the CLI shows 12 characters), or ''. */
export function nameOf(names: ReadonlyMap<string, string> | undefined, shortId: string): string {
  if (names === undefined || shortId === '') return '';
  for (const [id, name] of names) if (id.startsWith(shortId)) return name;
  return '';
}
