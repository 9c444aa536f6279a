import { ErrorCodes } from '../errors';
import { namedZkCode, ZkError } from './zk-errors';
import type { ZkOp, ZkOpResult } from './zk-multi';
import type { ZkNamespace } from './zk-namespace';
import { MultiRequest, type MultiOpResult, type RawAcl, type WireOp } from './driver';

const EMPTY = Buffer.alloc(0);

function wireOp(op: ZkOp, ns: ZkNamespace): WireOp {
  const path = ns.abs(op.path);
  if (op.type === 'create') return { type: 'create', path, data: op.data ?? EMPTY, acls: ns.acls as unknown as RawAcl[], flags: ns.mode(op.mode) };
  if (op.type === 'set') return { type: 'set', path, data: op.data ?? EMPTY, version: op.version };
  return { type: op.type, path, version: op.version };
}

/**
 * `ops` as one multi request, with absolute paths. Throws ZK_BAD_ARGUMENTS, naming the path, on a
 * path ZooKeeper would refuse: before anything is sent.
 */
export function multiRequest(ns: ZkNamespace, ops: readonly ZkOp[]): MultiRequest {
  return new MultiRequest(ops.map((op) => wireOp(op, ns)));
}

/**
 * The per-op results of a committed transaction (created paths made relative), or the ZkError
 * of a refused one, naming the failing op's index and path. In a fenced transaction a failure of
 * op #0, the fencing check, becomes ZK_FENCE_LOST whatever the server's code.
 */
export function multiResults(results: readonly MultiOpResult[], ops: readonly ZkOp[], fenced: boolean, ns: ZkNamespace): ZkOpResult[] {
  // ZooKeeper reports the failing op's code, 0 for the ops before it, and a runtime
  // inconsistency for the ops after it.
  const failedAt = results.findIndex((r) => typeof r.err === 'number' && r.err !== 0);
  if (failedAt >= 0) {
    const zkCode = results[failedAt].err!;
    const op = ops[failedAt];
    if (fenced && failedAt === 0) {
      throw new ZkError(ErrorCodes.ZK_FENCE_LOST, zkCode, 'multi', op?.path, { opIndex: 0, cause: namedZkCode(zkCode) });
    }
    throw new ZkError(namedZkCode(zkCode), zkCode, `multi op #${failedAt} (${op?.type})`, op?.path, { opIndex: failedAt });
  }
  return ops.map((op, i) => {
    const r = results[i];
    return { type: op.type, path: r?.path ? ns.rel(r.path) : undefined, stat: r?.stat };
  });
}
