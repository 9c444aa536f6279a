import type * as zookeeper from 'node-zookeeper-client';
import { ErrorCodes } from '../errors';
import { namedZkCode, toZkError, ZkError } from './zk-errors';
import type { ZkOp, ZkOpResult } from './zk-multi';
import type { ZkNamespace } from './zk-namespace';
import { toBuffer, toZkStat } from './zk-types';

/** What node-zookeeper-client's `Transaction.commit` answers: an error and/or one result per op. */
export interface RawMultiOutcome {
  err: unknown;
  res?: Array<{ type: number; err?: number; path?: string; stat?: zookeeper.Stat }>;
}

/**
 * node-zookeeper-client's Transaction does `version = version || -1`, turning an expected
 * version of 0 into "any version". A fencing check on a never-modified node (version 0) would then
 * always pass. We let the library validate the op, then put the real version back.
 */
function pinVersion(tx: zookeeper.Transaction, version: number): void {
  const ops = (tx as unknown as { ops: Array<{ version: number }> }).ops;
  ops[ops.length - 1].version = version;
}

/**
 * Builds `ops` into one transaction on `raw` and commits it. `done` gets an error only when the
 * request itself failed (no per-op results); a transaction the server refused is an outcome, read
 * by {@link multiResults}.
 */
export function sendTransaction(
  raw: zookeeper.Client,
  ns: ZkNamespace,
  ops: readonly ZkOp[],
  done: (err: unknown, outcome?: RawMultiOutcome) => void,
): void {
  const tx = raw.transaction();
  for (const op of ops) {
    const p = ns.abs(op.path);
    if (op.type === 'check') tx.check(p, op.version);
    else if (op.type === 'create') tx.create(p, toBuffer(op.data) ?? Buffer.alloc(0), ns.acls, ns.mode(op.mode));
    else if (op.type === 'set') tx.setData(p, toBuffer(op.data) ?? Buffer.alloc(0), op.version);
    else tx.remove(p, op.version);
    if (op.type !== 'create') pinVersion(tx, op.version);
  }
  tx.commit((err, res) => done(err && !Array.isArray(res) ? err : null, { err, res }));
}

/**
 * The per-op results of a committed transaction (created paths made relative), or the ZkError
 * of a refused one, naming the failing op's index and path. In a fenced transaction a failure of
 * op #0, the fencing check, becomes ZK_FENCE_LOST whatever the server's code.
 */
export function multiResults(outcome: RawMultiOutcome, ops: readonly ZkOp[], fenced: boolean, ns: ZkNamespace): ZkOpResult[] {
  const failedAt = outcome.res?.findIndex((r) => typeof r.err === 'number' && r.err !== 0) ?? -1;
  if (outcome.err || failedAt >= 0) {
    const zkCode = failedAt >= 0 ? outcome.res![failedAt].err! : -1;
    const op = failedAt >= 0 ? ops[failedAt] : undefined;
    if (fenced && failedAt === 0) {
      throw new ZkError(ErrorCodes.ZK_FENCE_LOST, zkCode, 'multi', op?.path, { opIndex: 0, cause: namedZkCode(zkCode) });
    }
    if (failedAt < 0) throw toZkError(outcome.err, 'multi');
    throw new ZkError(namedZkCode(zkCode), zkCode, `multi op #${failedAt} (${op?.type})`, op?.path, { opIndex: failedAt });
  }
  return ops.map((op, i) => {
    const r = outcome.res?.[i];
    return { type: op.type, path: r?.path ? ns.rel(r.path) : undefined, stat: r?.stat ? toZkStat(r.stat) : undefined };
  });
}
