import type { ZkOp } from '../shared/zk';
import type { ZkSessionOps } from '../shared/zk/zk-client';

interface Entry {
  ops: readonly ZkOp[];
  resolve(): void;
  reject(err: unknown): void;
}

/** Upper bound of ops in one merged transaction (well under ZooKeeper's 1 MB request limit). */
const MAX_OPS = 400;

/** True when the server refused the transaction because of one op (nothing applied, and we know which). */
function refusedAt(err: unknown): number | undefined {
  const index = (err as { details?: { opIndex?: unknown } } | undefined)?.details?.opIndex;
  return typeof index === 'number' ? index : undefined;
}

/**
 * Merges the transactions submitted during one event-loop turn on one session into one ZooKeeper
 * multi. A busy worker locks and releases many items at once (every execution started or finished by
 * the same Redis or ZooKeeper read), and each transaction costs the server a request, a log record and
 * a commit. Merging keeps each one atomic (the merged multi applies all or nothing) and the outcome is
 * the same as sending them in order: when the server refuses the merged multi because of one op,
 * nothing was applied, the transaction that op belongs to gets that error, and the others are sent
 * again (merged once more, then one by one). When the outcome is unknown (connection loss), every
 * transaction of the batch gets that error, as it would have alone.
 */
export class MultiBatcher {
  private readonly queued = new Map<string, { session: ZkSessionOps; entries: Entry[] }>();
  private flushScheduled = false;

  /** Commits `ops` atomically on `session`, possibly together with other transactions. */
  commit(session: ZkSessionOps, ops: readonly ZkOp[]): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let group = this.queued.get(session.sessionId);
      if (!group) this.queued.set(session.sessionId, (group = { session, entries: [] }));
      group.entries.push({ ops, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    const groups = [...this.queued.values()];
    this.queued.clear();
    for (const { session, entries } of groups) {
      let chunk: Entry[] = [];
      let size = 0;
      for (const entry of entries) {
        if (chunk.length > 0 && size + entry.ops.length > MAX_OPS) {
          void this.send(session, chunk, 1);
          chunk = [];
          size = 0;
        }
        chunk.push(entry);
        size += entry.ops.length;
      }
      if (chunk.length > 0) void this.send(session, chunk, 1);
    }
  }

  private async send(session: ZkSessionOps, entries: Entry[], retriesMerged: number): Promise<void> {
    if (entries.length === 1) return this.single(session, entries[0]);
    const tx = session.multi();
    const owner: Entry[] = [];
    for (const entry of entries) {
      for (const op of entry.ops) {
        tx.add(op);
        owner.push(entry);
      }
    }
    try {
      await tx.commit();
      for (const entry of entries) entry.resolve();
    } catch (err) {
      const at = refusedAt(err);
      if (at === undefined || !owner[at]) {
        for (const entry of entries) entry.reject(err);
        return;
      }
      // Only the transaction of the failing op is refused: the paths of the others are their own
      // (each transaction touches one item), so alone they would have fared as they will now.
      const failed = owner[at];
      failed.reject(err);
      const rest = entries.filter((e) => e !== failed);
      if (retriesMerged > 0) await this.send(session, rest, retriesMerged - 1);
      else await Promise.all(rest.map((e) => this.single(session, e)));
    }
  }

  private async single(session: ZkSessionOps, entry: Entry): Promise<void> {
    const tx = session.multi();
    for (const op of entry.ops) tx.add(op);
    try {
      await tx.commit();
      entry.resolve();
    } catch (err) {
      entry.reject(err);
    }
  }
}
