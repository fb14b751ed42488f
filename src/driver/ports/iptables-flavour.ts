/**
 * Which iptables ovsnet runs: the flavour (nft or legacy) Docker uses on this host, so that
 * ovsnet's rules sit in the same tables as Docker's and are evaluated with them. Docker runs the
 * `iptables` its PATH selects (Debian's alternatives); a managed plugin's own `iptables` may be
 * the other flavour, so the tables decide: whichever flavour holds Docker's chains; with no
 * Docker chain anywhere (Docker not started yet), the selected `iptables`, as Docker would.
 */
import type { ExecResult } from '../../lib/exec.js';

export interface Flavour {
  /** 'nft', 'legacy', or '' for the selected alternative. */
  readonly name: 'nft' | 'legacy' | '';
  readonly iptables: string;
  readonly ip6tables: string;
  /** iptables-save and iptables-restore of the same flavour, per family. */
  readonly save: { readonly 4: string; readonly 6: string };
  readonly restore: { readonly 4: string; readonly 6: string };
}

export function flavour(name: 'nft' | 'legacy' | ''): Flavour {
  const s = name === '' ? '' : `-${name}`;
  return {
    name,
    iptables: `iptables${s}`,
    ip6tables: `ip6tables${s}`,
    save: { 4: `iptables${s}-save`, 6: `ip6tables${s}-save` },
    restore: { 4: `iptables${s}-restore`, 6: `ip6tables${s}-restore` },
  };
}

type Run = (cmd: string, args: readonly string[]) => Promise<ExecResult>;

/** Docker's chains in the filter table: DOCKER-USER (every Docker since 17.06) or DOCKER. */
async function holdsDocker(run: Run, iptables: string): Promise<boolean> {
  for (const chain of ['DOCKER-USER', 'DOCKER']) if ((await run(iptables, ['-w', '-t', 'filter', '-S', chain])).code === 0) return true;
  return false;
}

/** The flavour holding Docker's chains (nft first: the default since Debian 10); else the selected one. */
export async function detectFlavour(run: Run): Promise<Flavour> {
  for (const name of ['nft', 'legacy'] as const) {
    const f = flavour(name);
    if (await holdsDocker(run, f.iptables)) return f;
  }
  return flavour('');
}
