/**
 * The item lock with monitorExecution: the ephemeral `sharding/{i}/running` node (invariant I1).
 * Whoever creates it runs the item; the release records the completed fire and deletes the node in
 * one multi, so the next holder never sees the item free without seeing the fire done.
 * docs/design-notes.md ("Failover and ownership") explains each step and what it cost before.
 */
import { ErrorCodes } from '../shared/errors';
import type { JobConfig } from '../shared/config/job-config';
import type { Logger } from '../shared/logger';
import { formatCompletedFires, parseCompletedFires, withCompletedFire } from '../shared/registry/completed-fires';
import type { ExecutionRequest } from '../shared/registry/execution-request';
import { registryPaths } from '../shared/registry/registry-paths';
import { encodeRunningNode, readRunningHolder } from '../shared/registry/running-node';
import { isRetryable, ZkError, type ZkClient, type ZkOp, type ZkSessionOps, type ZkStat } from '../shared/zk';
import { itemKey, jobOfItemKey, type AcquireOptions, type Acquired, type Busy, type Hold, type ItemLock, type MisfireMark, type Released, type ReleaseOptions } from './item-lock';
import { createItemNode, type MisfireMarks } from './misfire-marks';
import { MultiBatcher, type NodeRead } from './multi-batcher';

/**
 * What this process knows of an item's `sharding/{i}` node from its last read or write: the
 * version, the completed fires, and the `cversion` after its last release when no misfire mark was
 * there then.
 */
interface SeenItem {
  version: number;
  done: readonly number[];
  markFree?: number;
}

const is = (err: unknown, ...codes: string[]): boolean => err instanceof ZkError && codes.includes(err.code);

/** What the lock needs of the worker. */
export interface ZkItemLockContext {
  zk: ZkClient;
  instanceId: string;
  log: Logger;
  marks: MisfireMarks;
  /** A hold of this process on the item ended (its release is over). */
  onReleased(key: string): void;
}

/** {@link ItemLock} on ZooKeeper's `running` node. */
export class ZkItemLock implements ItemLock {
  /**
   * Per item, the executions of this process between sending a lock create and the end of their
   * release (or of the failed attempt). A `running` node of our own session is an orphan only if no
   * other execution of ours has the item claimed.
   */
  private readonly claims = new Map<string, number>();
  /** Per item, how many claims of this process ended with a release: an orphan seen before one ended is stale. */
  private readonly releases = new Map<string, number>();
  /**
   * Per item: its `sharding/{i}` node as this process last read or wrote it, the version and the
   * completed fires. Bounded by the items this worker ever held.
   */
  private readonly seen = new Map<string, SeenItem>();
  /** Lock creates and releases issued together share one transaction. */
  private readonly batcher = new MultiBatcher();

  constructor(private readonly ctx: ZkItemLockContext) {}

  /**
   * Forgets the job's items' `sharding/{i}` versions: the job was removed, and a job added again
   * under the name has new item nodes, whose versions start over and could match a remembered one.
   */
  forgetJob(job: string): void {
    for (const key of this.seen.keys()) if (jobOfItemKey(key) === job) this.seen.delete(key);
  }

  holdsLocally(key: string): boolean {
    return (this.claims.get(key) ?? 0) > 0;
  }

  knownCompleted(key: string, fireTime: number): boolean {
    return this.seen.get(key)?.done.includes(fireTime) === true;
  }

  /**
   * Creates `running` on the current session, with the item's completed fires read in the same
   * round trip: the read is sent right behind the create on the same session, so ZooKeeper answers
   * it after the create, i.e. under the lock.
   */
  async acquire(config: JobConfig, request: ExecutionRequest, options: AcquireOptions): Promise<Acquired> {
    const key = itemKey(request);
    const running = registryPaths.shardingRunning(request.job, request.item);
    let marked = false;
    // A holder may finish between our failed create and our misfire mark without seeing the mark;
    // re-checking after marking closes that gap (and then the item is free to take ourselves).
    // One more attempt for a lock whose cached view of the item turned out stale.
    const itemPath = registryPaths.shardingItem(request.job, request.item);
    const create = { type: 'create', path: running, data: encodeRunningNode(this.ctx.instanceId, options.catchUp), mode: 'ephemeral' } as const;
    let busy: Busy = { busy: true, local: false, catchUp: false };
    for (let attempt = 0; attempt < 4; attempt += 1) {
      const session = this.ctx.zk.onSession(this.ctx.zk.sessionId);
      // The item node as we last saw it: a version check in the lock multi proves it unchanged,
      // so its completed fires need no read. Almost always so: an item keeps its instance.
      const known = this.seen.get(key);
      let read: NodeRead | undefined;
      let taken: boolean | 'unknown';
      // The claim lasts until the release ends; a failed attempt gives it up in `finally`.
      this.claims.set(key, (this.claims.get(key) ?? 0) + 1);
      let holding = false;
      try {
        try {
          if (known) await this.batcher.commit(session, [create, { type: 'check', path: itemPath, version: known.version }]);
          else ({ read } = await this.batcher.commit(session, [create], (s) => s.get(itemPath)));
          taken = true;
        } catch (err) {
          if (is(err, ErrorCodes.ZK_NODE_EXISTS)) taken = false;
          else if (known && is(err, ErrorCodes.ZK_BAD_VERSION)) {
            // Someone else changed the item since (another instance completed a fire): read it.
            this.seen.delete(key);
            continue;
          } else if (is(err, ErrorCodes.ZK_NO_NODE)) {
            this.seen.delete(key);
            // The item's node is missing: the leader lays a new job's items out before its first
            // fire, but a fire may come before that is done.
            await createItemNode(this.ctx.zk, itemPath);
            continue;
          } else if (isRetryable(err)) taken = 'unknown'; // the create may have happened: see below
          else throw err;
        }
        if (taken === true) {
          holding = true;
          return known ? { session, done: known.done, markFree: known.markFree } : await this.held(session, request, key, read!);
        }
        const releasesBefore = this.releases.get(key) ?? 0;
        const holder = await readRunningHolder(this.ctx.zk, running);
        // Free by now (the holder ended, or our create whose answer was lost did not happen): again.
        if (!holder) continue;
        // Our own session's node that no other execution of ours has claimed, and that no release
        // of ours overtook while we looked: a create whose answer was lost with the connection, or
        // a release that could not delete it. Nobody else can hold or delete that node, so it is
        // ours to use; otherwise the item would stay blocked for as long as our session lives.
        if (holder.stat.ephemeralOwner === this.ctx.zk.sessionId && this.claims.get(key) === 1 && (this.releases.get(key) ?? 0) === releasesBefore) {
          this.ctx.log.info({ job: request.job, item: request.item }, 'taking over our own orphaned running node');
          const own = this.ctx.zk.onSession(holder.stat.ephemeralOwner);
          holding = true;
          return await this.held(own, request, key, own.get(itemPath));
        }
        busy = { busy: true, local: holder.stat.ephemeralOwner === this.ctx.zk.sessionId, catchUp: holder.catchUp };
        // Catch-up work holds the item: the request waits for it, and leaves no mark.
        if (holder.catchUp && options.waitBehindCatchUp) return busy;
        if (!marked && config.misfire && options.markOnBusy) {
          await this.ctx.marks.mark(request);
          marked = true;
          continue;
        }
        return busy;
      } finally {
        if (!holding) this.unclaim(key, false);
      }
    }
    // Every attempt found the item changing hands. Marked, the mark asks for the fire whoever holds
    // it next; unmarked, nothing would, and a request skipped as "misfire recorded" was lost.
    return marked ? busy : { ...busy, unsettled: true };
  }

  async peekMisfire(_config: JobConfig, request: ExecutionRequest): Promise<MisfireMark | undefined> {
    return (await this.ctx.marks.read(request)) ?? undefined;
  }

  /**
   * After a completion the fire is recorded, and the misfire mark the run stood for deleted, in
   * the same multi as the `running` node: the next holder can never see the item unlocked without
   * seeing that this fire is done and its mark consumed. The mark is read in the same round trip,
   * right behind the release. Only our own lock may be released, and the session binding makes sure
   * of it: if our session expired, the server removed our node and another instance may hold the
   * item now; deleting `running` then would let a third one in. Bound requests fail instead.
   */
  async release(request: ExecutionRequest, hold: Hold, options: ReleaseOptions): Promise<Released> {
    const { job, item, fireTime } = request;
    const key = itemKey(request);
    const session = hold.session!;
    const running = registryPaths.shardingRunning(job, item);
    const notRecorded: Released = { recorded: false, mark: undefined };
    const { readMark, mark } = options;
    try {
      let withMark = mark !== undefined;
      const itemPath = registryPaths.shardingItem(job, item);
      const done = options.completed && hold.done ? withCompletedFire(hold.done, fireTime) : undefined;
      // Known again only from the answer of the set below.
      if (done) this.seen.delete(key);
      // Whether a misfire mark is left is told by the item's cversion when we can: see below. Not
      // in a round that consumes a mark: its lock was not taken on a mark-free view.
      const markFree = done && mark === undefined ? hold.markFree : undefined;
      for (;;) {
        const ops: ZkOp[] = [];
        if (done) ops.push({ type: 'set', path: itemPath, data: formatCompletedFires(done), version: -1 });
        ops.push({ type: 'delete', path: running, version: -1 });
        if (withMark) ops.push({ type: 'delete', path: registryPaths.shardingMisfire(job, item), version: mark!.version });
        const recorded = done !== undefined || withMark;
        try {
          // The item's children, not the mark itself: almost always there is no mark, and a read of
          // a missing node costs an error answer (and two error objects) per item.
          const listing = readMark && markFree === undefined;
          const { results, read: children } = await this.batcher.commit(session, ops, listing ? (s) => s.children(itemPath) : undefined);
          const stat = done ? results[0]?.stat : undefined;
          let found: MisfireMark | null | undefined;
          if (children) found = await this.ctx.marks.among(children, request).catch(() => undefined);
          else if (readMark) {
            // ZooKeeper counts every create and delete of a node's children in its cversion (a test
            // in zk-client.test.ts pins it). The set above ran after our create and before our
            // delete: if nothing but our create changed the item's children since a release that
            // left no mark, no mark was made since, and there is none. Otherwise look.
            const unchanged = stat !== undefined && markFree !== undefined && stat.cversion === markFree + 1;
            found = unchanged ? null : await this.ctx.marks.among(this.ctx.zk.children(itemPath), request).catch(() => undefined);
          }
          if (stat) {
            // After the multi: our delete of running, and of the mark when it consumed one, counted too.
            const after = stat.cversion + (withMark ? 2 : 1);
            this.seen.set(key, { version: stat.version, done: done!, markFree: found === null ? after : undefined });
          }
          return { recorded, mark: found };
        } catch (err) {
          if (withMark && is(err, ErrorCodes.ZK_BAD_VERSION, ErrorCodes.ZK_NO_NODE)) {
            // A newer fire changed the mark: keep it (it is taken next round) and commit the rest.
            withMark = false;
            continue;
          }
          if (is(err, ErrorCodes.ZK_SESSION_EXPIRED)) return notRecorded; // the node went with the session
          if (!isRetryable(err)) {
            this.ctx.log.warn({ err, job, item }, 'could not release the item with its completion; releasing the item only');
            await this.deleteOwnRunning(session, running);
            return notRecorded;
          }
          // The answer was lost with the connection: the multi went through or not at all. Our
          // node tells which, once we are connected again: only this release deletes it.
          const stat = await this.existsWhileSessionLives(session, running);
          if (stat === 'lost') return { ...notRecorded, unknown: true };
          if (!stat) return { recorded, mark: undefined };
          if (stat.ephemeralOwner !== session.sessionId) return notRecorded;
        }
      }
    } finally {
      this.unclaim(key, true);
    }
  }

  /**
   * Ends a claim; `released`: it held the item and its release is over. The release count matters
   * only to a claim that looks at `running` while another of ours may release: with no claim left
   * nobody compares it, so it goes (each item a worker ever held used to keep an entry for good).
   */
  private unclaim(key: string, released: boolean): void {
    const left = (this.claims.get(key) ?? 1) - 1;
    if (left > 0) {
      this.claims.set(key, left);
      if (released) this.releases.set(key, (this.releases.get(key) ?? 0) + 1);
    } else {
      this.claims.delete(key);
      this.releases.delete(key);
    }
    if (released) this.ctx.onReleased(key);
  }

  /**
   * The lock is ours: note it, and take the completed fires from `read`. A read that lost its
   * connection is made again: the lock was taken first, so any later read is under it. If the
   * lock's session is gone by then, so is the lock, and the request goes back to the queue.
   */
  private async held(session: ZkSessionOps, request: ExecutionRequest, key: string, read: NodeRead): Promise<Hold> {
    const path = registryPaths.shardingItem(request.job, request.item);
    try {
      const { data, stat } = await read.catch((err) => {
        if (!isRetryable(err)) throw err;
        return this.ctx.zk.get(path);
      });
      if (this.ctx.zk.sessionId !== session.sessionId) {
        throw new ZkError(ErrorCodes.ZK_SESSION_EXPIRED, -112, 'lock', path, { lockSession: session.sessionId, currentSession: this.ctx.zk.sessionId });
      }
      const done = parseCompletedFires(data);
      this.seen.set(key, { version: stat.version, done });
      return { session, done };
    } catch (err) {
      if (is(err, ErrorCodes.ZK_NO_NODE) && this.ctx.zk.sessionId === session.sessionId) return { session, done: [] };
      await this.release(request, { session }, { completed: false, readMark: false }).catch(() => undefined);
      throw err;
    }
  }

  /**
   * Looks up `path` on `session` once the client is connected on it again; `lost` once the client
   * is on another session (ours expired). Connection losses are waited out for as long as the
   * session may live: a ZooKeeper restart or a partition shorter than the session timeout keeps it,
   * and giving up after one connect timeout reported a completion that ZooKeeper had recorded, or
   * still could, as not recorded, and the item ran a second time (the ZooKeeper-restart chaos test
   * caught it). A client closed meanwhile throws.
   */
  private async existsWhileSessionLives(session: ZkSessionOps, path: string): Promise<ZkStat | null | 'lost'> {
    for (;;) {
      try {
        return await session.exists(path);
      } catch (err) {
        if (is(err, ErrorCodes.ZK_SESSION_EXPIRED)) return 'lost';
        if (!isRetryable(err)) throw err;
      }
    }
  }

  /**
   * Deletes the running node after a release transaction failed, if it is still ours: a failure
   * that left it would block the item for as long as our session lives.
   */
  private async deleteOwnRunning(session: ZkSessionOps, running: string): Promise<void> {
    try {
      const stat = await this.ctx.zk.exists(running);
      if (!stat || stat.ephemeralOwner !== session.sessionId) return;
      await session.multi().delete(running, stat.version).commit();
    } catch (err) {
      // Gone with a lost session is fine; anything else leaves the item blocked until the session ends.
      if (!is(err, ErrorCodes.ZK_NO_NODE, ErrorCodes.ZK_SESSION_EXPIRED)) this.ctx.log.warn({ err, running }, 'could not delete running node');
    }
  }
}
