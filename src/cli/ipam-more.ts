/**
 * The `ovsnet ipam` forms beyond pool usage, as entries of the command table (dispatch.ts):
 * `--reservations [POOL]` (reservations.ts) and the `adopt` subcommand, `adopt host-local NAME
 * [--dir DIR]` / `adopt docker NETWORK` (adopt.ts). Every mistake says what would be valid.
 */
import { hostNameOf } from '../config/config.js';
import { messageOf } from '../lib/errors.js';
import { hostNets } from '../host/host-nets.js';
import { Ipam } from '../ipam-driver/ipam.js';
import { createLogger } from '../lib/log.js';
import { adopt, HOST_LOCAL_DIR, readDocker, readHostLocal, type Foreign } from './adopt.js';
import { EXIT, UsageError, type CommandSpec, type Invocation } from './dispatch.js';
import { render, type Shown } from './output.js';
import { reservations } from './reservations.js';
import type { CliContext, Session } from './session.js';

/** The `ipam` command's own option and arguments. */
export const RESERVATIONS_OPTION = {
  reservations: { type: 'boolean', help: 'each reservation of POOL (a subnet or PoolID; all pools when absent): holder, host, age' },
} as const;

/** `ovsnet ipam --reservations [POOL]`: the reservations; exit 1 (said on stderr) when POOL is no pool. */
export async function reservationsView(
  s: Session,
  inv: Invocation,
  ctx: CliContext,
): Promise<Shown & { status: number; silent?: boolean }> {
  try {
    const rows = await reservations(s.store, inv.args[0]);
    const shown = rows.map(({ pool, address, kind, holder, host, age }) => ({ pool, address, kind, holder, host, age }));
    return { data: rows, table: shown, status: EXIT.ok };
  } catch (err) {
    ctx.err(`ovsnet: ${messageOf(err)}`);
    return { data: [], table: [], status: EXIT.problem, silent: true };
  }
}

/** `ovsnet ipam adopt ...`, run in the command table's session (withSession). */
export function adoptCommand(
  withSession: (inv: Invocation, ctx: CliContext, fn: (s: Session) => Promise<number>) => Promise<number>,
): CommandSpec<CliContext> {
  return {
    summary: `take over the addresses another allocator handed out: host-local NAME (${HOST_LOCAL_DIR}/NAME) or docker NETWORK (its running containers)`,
    args: 'host-local NAME | docker NETWORK',
    maxArgs: 2,
    output: true,
    options: { dir: { type: 'string', value: 'DIR', help: `host-local's directory (default ${HOST_LOCAL_DIR})` } },
    details:
      'Adopting again changes nothing. Exit status 1 when an address could not be adopted (held by someone else, or in no ovsnet pool).',
    run: async (inv, ctx) => {
      const [source, name] = inv.args;
      if (name === undefined || (source !== 'host-local' && source !== 'docker'))
        throw new UsageError(
          `expected ipam adopt host-local NAME or ipam adopt docker NETWORK, not ipam adopt ${inv.args.join(' ')}`,
          'ipam adopt',
        );
      const dir = inv.values.dir;
      if (source === 'docker' && dir !== undefined) throw new UsageError('--dir goes with adopt host-local only', 'ipam adopt');
      return withSession(inv, ctx, async (s) => {
        try {
          const foreign: Foreign[] =
            source === 'host-local'
              ? readHostLocal(typeof dir === 'string' ? dir : HOST_LOCAL_DIR, name)
              : await readDocker(s.dockerSocket, name);
          const ipam = new Ipam({
            store: s.store,
            log: createLogger('silent'),
            host: hostNameOf(s.config),
            defaultPools: s.config.defaultPools,
            hostNets: () => hostNets(),
            minPrefix: s.config.minPrefix,
            readyTimeoutMs: s.config.storeTimeoutMs,
          });
          try {
            const rows = await adopt(ipam, `${source} ${name}`, foreign);
            ctx.out(render({ data: rows, table: rows as unknown as Record<string, unknown>[] }, inv.format));
            return rows.every((r) => r.outcome === 'adopted' || r.outcome === 'held') ? EXIT.ok : EXIT.problem;
          } finally {
            await ipam.stop();
          }
        } catch (err) {
          ctx.err(`ovsnet: ${messageOf(err)}`);
          return EXIT.problem;
        }
      });
    },
  };
}
