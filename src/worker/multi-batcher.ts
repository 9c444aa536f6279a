import { ZkError, type ZkOp, type ZkOpResult, type ZkSessionOps, type ZkStat } from '../shared/zk';

/** A node read sent right behind the transaction that committed a group. */
export type NodeRead = Promise<{ data: Buffer; stat: ZkStat }>;

/** A read a group asks for, sent on the group's session right behind the multi that commits it. */
export type ReadBehind<R> = (session: ZkSessionOps) => Promise<R>;

/** A committed group: its own ops' results, and the read asked for (if any). */
export interface Committed<R> {
  results: ZkOpResult[];
  read?: Promise<R>;
}

interface Group {
  ops: readonly ZkOp[];
  read: ReadBehind<unknown> | undefined;
  /** An object around the read: resolving with the promise itself would wait for it. */
  resolve(outcome: Committed<unknown>): void;
  reject(err: unknown): void;
}

/** Groups merged into one transaction at most (a multi is one request of bounded size). */
const GROUPS_PER_MULTI = 64;

/**
 * Merges the small transactions a worker's executions issue on one session within one event-loop
 * turn (lock creates, releases) into one ZooKeeper multi. ZooKeeper pays per request: a burst of a
 * thousand items costs a few dozen transactions instead of two thousand. Each group keeps its own
 * meaning: it commits entirely or not at all, as it would alone. When the merged multi fails on one
 * group's operation, that group gets the error and the others are sent again, each on its own (so a
 * burst with many busy items does not retry once per conflict); when it fails as a whole (connection
 * lost, session expired), every group gets that error, which is what each would have got alone.
 *
 * A group may ask for a node read sent right behind the multi that commits it: ZooKeeper answers one
 * session's requests in order, so that read sees the group's writes.
 */
export class MultiBatcher {
  private readonly queued = new Map<string, { session: ZkSessionOps; groups: Group[] }>();
  private scheduled = false;

  /** Commits `ops` atomically on `session`; resolves with the `read` sent behind it, if asked. */
  commit<R = never>(session: ZkSessionOps, ops: readonly ZkOp[], read?: ReadBehind<R>): Promise<Committed<R>> {
    return new Promise((resolve, reject) => {
      let entry = this.queued.get(session.sessionId);
      if (!entry) this.queued.set(session.sessionId, (entry = { session, groups: [] }));
      entry.groups.push({ ops, read, resolve: resolve as (outcome: Committed<unknown>) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const batches = [...this.queued.values()];
    this.queued.clear();
    for (const { session, groups } of batches) {
      for (let i = 0; i < groups.length; i += GROUPS_PER_MULTI) this.send(session, groups.slice(i, i + GROUPS_PER_MULTI));
    }
  }

  private send(session: ZkSessionOps, groups: readonly Group[]): void {
    const tx = session.multi();
    /** Index of the group each operation belongs to. */
    const owners: number[] = [];
    groups.forEach((group, g) => {
      for (const op of group.ops) {
        tx.add(op);
        owners.push(g);
      }
    });
    const committed = tx.commit();
    // Sent right behind the multi, in the same turn: answered after it.
    const reads = groups.map((group) => group.read?.(session));
    committed.then(
      (results) => {
        let at = 0;
        groups.forEach((group, g) => {
          group.resolve({ results: results.slice(at, at + group.ops.length), read: reads[g] });
          at += group.ops.length;
        });
      },
      (err: unknown) => {
        for (const read of reads) read?.catch(() => undefined);
        const opIndex = err instanceof ZkError ? err.details.opIndex : undefined;
        if (groups.length === 1 || typeof opIndex !== 'number' || owners[opIndex] === undefined) {
          for (const group of groups) group.reject(err);
          return;
        }
        const failed = owners[opIndex];
        groups[failed].reject(err);
        // The others were rolled back (or never applied) with it: each goes again on its own.
        groups.forEach((group, g) => g !== failed && this.send(session, [group]));
      },
    );
  }
}
