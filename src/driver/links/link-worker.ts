/**
 * The thread that talks netlink (netlink-ops.ts says why not the main one). Messages:
 * {id, op, args} in; {id, result} or {id, error: {what, detail}} out, where detail is the
 * netlink error text ("Request rejected: EEXIST", ...). One request at a time, in order: the
 * kernel serialises them on its RTNL lock anyway.
 */
import { parentPort } from 'node:worker_threads';
import { NetlinkOps, NetlinkStepError, type VethSpec } from './netlink-ops.js';
import { SpareStepError, type SpareNames } from './spare-ops.js';

/** What each operation takes and answers; links.ts sends these. */
export interface LinkOps {
  createVeth: { args: [VethSpec]; result: undefined };
  deleteLink: { args: [string]; result: undefined };
  parkVeth: { args: [string, string, SpareNames, string]; result: boolean };
  adoptVeth: { args: [SpareNames, VethSpec]; result: undefined };
  index: { args: [string]; result: number | undefined };
  alias: { args: [string]; result: string | undefined };
  aliased: { args: [string]; result: { name: string; alias: string }[] };
  configureAddress: { args: [string, 4 | 6, Uint8Array, number, number]; result: undefined };
}
export type LinkOp = keyof LinkOps;
export interface LinkRequest<K extends LinkOp = LinkOp> {
  readonly id: number;
  readonly op: K;
  readonly args: LinkOps[K]['args'];
}
export type LinkReply = { readonly id: number; readonly result?: unknown; readonly error?: { what: string; detail: string } };

async function perform(ops: NetlinkOps, req: LinkRequest): Promise<unknown> {
  switch (req.op) {
    case 'createVeth':
      return ops.createVeth(...(req.args as LinkOps['createVeth']['args']));
    case 'deleteLink':
      return ops.deleteLink(...(req.args as LinkOps['deleteLink']['args']));
    case 'parkVeth':
      return ops.parkVeth(...(req.args as LinkOps['parkVeth']['args']));
    case 'adoptVeth':
      return ops.adoptVeth(...(req.args as LinkOps['adoptVeth']['args']));
    case 'index':
      return ops.index(...(req.args as LinkOps['index']['args']));
    case 'alias':
      return ops.alias(...(req.args as LinkOps['alias']['args']));
    case 'aliased':
      return ops.aliased(...(req.args as LinkOps['aliased']['args']));
    case 'configureAddress': {
      const [name, family, address, prefixLength, mtu] = req.args as LinkOps['configureAddress']['args'];
      return ops.configureAddress(name, family, Buffer.from(address), prefixLength, mtu); // a Buffer arrives as Uint8Array
    }
  }
}

const port = parentPort;
if (port !== null) {
  const ops = NetlinkOps.open();
  let queue: Promise<unknown> = Promise.resolve();
  port.on('message', (req: LinkRequest | 'close') => {
    if (req === 'close') {
      // The sockets must be closed before the thread ends: the netlink addon aborts the whole
      // process if its sockets are torn down with a terminated thread.
      void queue.then(() => {
        ops.close();
        port.close();
      });
      return;
    }
    queue = queue.then(() =>
      perform(ops, req).then(
        (result) => port.postMessage({ id: req.id, result } satisfies LinkReply),
        (err: unknown) =>
          port.postMessage({
            id: req.id,
            error:
              err instanceof NetlinkStepError || err instanceof SpareStepError
                ? { what: err.what, detail: err.detail }
                : { what: req.op, detail: err instanceof Error ? err.message : String(err) },
          } satisfies LinkReply),
      ),
    );
  });
}
