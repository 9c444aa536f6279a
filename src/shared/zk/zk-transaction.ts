import type * as zookeeper from 'node-zookeeper-client';
import { ErrorCodes, ShardcronError } from '../errors';
import { namedZkCode, ZkError } from './zk-errors';
import type { ZkOp, ZkOpResult } from './zk-multi';
import type { ZkNamespace } from './zk-namespace';
import { toBuffer } from './zk-types';
import { isValidPath, MultiRequest, queueMulti, type MultiOpResult, type RawAcl, type WireOp } from './zk-wire';

const EMPTY = Buffer.alloc(0);

function wireOp(op: ZkOp, ns: ZkNamespace): WireOp {
  const path = ns.abs(op.path);
  if (op.type === 'create') return { type: 'create', path, data: toBuffer(op.data) ?? EMPTY, acls: ns.acls as unknown as RawAcl[], flags: ns.mode(op.mode) };
  if (op.type === 'set') return { type: 'set', path, data: toBuffer(op.data) ?? EMPTY, version: op.version };
  return { type: op.type, path, version: op.version };
}

/**
 * `ops` as one multi request, with absolute paths. Throws ZK_BAD_ARGUMENTS, naming the path, on a
 * path ZooKeeper would refuse: before anything is sent.
 */
export function multiRequest(ns: ZkNamespace, ops: readonly ZkOp[]): MultiRequest {
  const wire = ops.map((op) => wireOp(op, ns));
  try {
    return new MultiRequest(wire);
  } catch (err) {
    const bad = wire.find((op) => !isValidPath(op.path));
    throw new ShardcronError(ErrorCodes.ZK_BAD_ARGUMENTS, `invalid ZooKeeper path ${JSON.stringify(bad?.path)}: ${(err as Error).message}`);
  }
}

/**
 * Sends `request` on `raw`. `done` gets an error only when the request itself failed (no per-op
 * results); a transaction the server refused is an outcome, read by {@link multiResults}.
 */
export function sendTransaction(raw: zookeeper.Client, request: MultiRequest, done: (err: unknown, results?: MultiOpResult[]) => void): void {
  queueMulti(raw, request, (err, response) => (err ? done(err) : done(null, response?.payload?.results ?? [])));
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
