import { ErrorCodes } from '../errors';
import type { ZkCreateMode, ZkData, ZkStat } from './zk-types';

/** One operation inside a transaction; paths are relative to the namespace. */
export type ZkOp =
  | { type: 'check'; path: string; version: number }
  | { type: 'create'; path: string; data: ZkData; mode: ZkCreateMode }
  | { type: 'set'; path: string; data: ZkData; version: number }
  | { type: 'delete'; path: string; version: number };

/** What a committed transaction reports per operation: a create's path (relative), a set's new stat. */
export type ZkOpResult = { type: ZkOp['type']; path?: string; stat?: ZkStat };

/**
 * Builder for an atomic ZooKeeper `multi`. All operations apply, or none do. A fenced multi
 * starts with a `check` of a node the writer owns (the leader's candidate node): if that node
 * changed or vanished, the writer lost its authority and the whole transaction is refused with
 * {@link ErrorCodes.ZK_FENCE_LOST} instead of the check's raw code.
 */
export class ZkMulti {
  private readonly ops: ZkOp[] = [];

  constructor(
    private readonly committer: (ops: readonly ZkOp[], fenced: boolean) => Promise<ZkOpResult[]>,
    private readonly fenced = false,
  ) {}

  check(path: string, version: number): this {
    this.ops.push({ type: 'check', path, version });
    return this;
  }

  create(path: string, data?: ZkData, mode: ZkCreateMode = 'persistent'): this {
    this.ops.push({ type: 'create', path, data, mode });
    return this;
  }

  set(path: string, data: ZkData, version = -1): this {
    this.ops.push({ type: 'set', path, data, version });
    return this;
  }

  delete(path: string, version = -1): this {
    this.ops.push({ type: 'delete', path, version });
    return this;
  }

  /** Queues an operation built elsewhere. */
  add(op: ZkOp): this {
    this.ops.push(op);
    return this;
  }

  /** Operations queued so far (a fenced multi's first one is its check). */
  get size(): number {
    return this.ops.length;
  }

  /** Commits atomically. Throws a ZkError naming the failing op's index and path. */
  commit(): Promise<ZkOpResult[]> {
    return this.committer(this.ops, this.fenced);
  }
}
