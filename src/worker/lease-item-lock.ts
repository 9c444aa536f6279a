/**
 * The item lock with monitorExecution and SHARDCRON_ITEM_LEASE=on: `sharding/{i}/running`
 * becomes a lease this instance keeps across fires, and each run is written to the item's record in
 * Redis ({@link ItemRecords}) instead of ZooKeeper. In the steady state (an item keeps its instance
 * from fire to fire) a run costs no ZooKeeper request at all: one Redis script at its end, batched
 * with the other ends of the turn (and a write at its start only for a run still going after
 * {@link RUN_SHOWN_AFTER_MS}). ZooKeeper is written when the item changes hands: the new holder
 * creates the node, the old one deletes it once asked (docs/design-notes.md, "Item leases").
 *
 * What keeps each guarantee:
 * - one run at a time (I1): only the lease's holder runs the item, and within the holder its runs
 *   take turns (`runs`); a lease ends with its holder's session, as the `running` node always did;
 * - no completion lost or counted twice: a run's completion is recorded (in Redis) before its
 *   request completes in BullMQ, and only under the epoch that claimed the item, so a holder whose
 *   lease ended cannot record one after the next holder read the list;
 * - misfires: a request that finds a run in progress (one the record shows) marks it in the same
 *   script that sees the run, and the run's end reads the mark in the same script that ends it;
 * - handoff: a request that finds the lease held but no run in progress asks the holder (a Redis
 *   message) and waits (its request is deferred); the holder lets go at once, or after its run.
 */
import { ErrorCodes } from '../shared/errors';
import type { JobConfig } from '../shared/config/job-config';
import type { Logger } from '../shared/logger';
import { mergeCompletedFires, parseCompletedFires, withCompletedFire } from '../shared/registry/completed-fires';
import type { ExecutionRequest } from '../shared/registry/execution-request';
import type { ItemRecords } from '../shared/registry/item-records';
import { parseRegistryPath, registryPaths } from '../shared/registry/registry-paths';
import { encodeRunningNode, readRunningHolder } from '../shared/registry/running-node';
import { ErrorCodes as Codes, ShardcronError } from '../shared/errors';
import { isRetryable, ZkError, type ZkClient, type ZkSessionOps, type ZkStat, type ZkWatcher } from '../shared/zk';
import { itemKey, jobOfItemKey, type AcquireOptions, type Acquired, type Busy, type Hold, type ItemLock, type MisfireMark, type Released, type ReleaseOptions } from './item-lock';
import { createItemNode } from './misfire-marks';
import { MultiBatcher } from './multi-batcher';

const is = (err: unknown, ...codes: string[]): boolean => err instanceof ZkError && codes.includes(err.code);

/** The item is leased elsewhere, or was not ours after all: the request is deferred and looks again. */
const HANDOFF: Busy = { busy: true, local: false, catchUp: false, handoff: true };

/** Rethrows a failed Redis command as transient: the request goes back to its queue, not failed for good. */
function redisUnavailable(err: unknown): never {
  throw new ShardcronError(Codes.REDIS_UNAVAILABLE, `item record: ${err instanceof Error ? err.message : String(err)}`, {}, { cause: err });
}

/** A lease this process holds. */
interface Lease {
  readonly job: string;
  readonly item: number;
  readonly session: ZkSessionOps;
  /** The czxid of our `running` node: written with the claim and checked by every later write. */
  readonly epoch: string;
  /** The item's completed fires: while we hold the lease, nobody else records any. */
  done: readonly number[];
  /** Runs (held locks) of this process on the item now: 0 or 1. */
  runs: number;
  /** The run in progress is catch-up work. */
  catchUp: boolean;
  /** The run in progress: its fire, when it is due to start, and whether the record shows it. */
  run?: { fire: number; startAt: number; showing?: Promise<void> };
  /** Another instance asked for the item: let go once no run of ours holds it. */
  wanted: boolean;
  /** The delete of our node, once letting go. */
  leaving?: Promise<void>;
  /** Its job was removed: what it knew of the item belongs to that job, not to one added again under the name. */
  forgotten?: boolean;
}

/** What the lease lock needs of the worker. */
export interface LeaseItemLockContext {
  zk: ZkClient;
  instanceId: string;
  log: Logger;
  /** The item records, once the worker's Redis connection is up. */
  records(): ItemRecords;
  /** A hold of this process on the item ended (its release is over). */
  onReleased(key: string): void;
  /**
   * Whether session `sessionId` is ours and within reach of the server (the worker's watchdog): a
   * run starts under a held lease only then, since nothing is sent to ZooKeeper to prove it.
   */
  owns(sessionId: string): boolean;
}

/** A run shows in the item's record (`r`) once it has run this long: shorter runs write nothing at their start. */
export const RUN_SHOWN_AFTER_MS = 100;

/** Items whose completed fires are remembered after their lease went (the oldest forgotten first). */
export const LEFT_ITEMS_KEPT = 10_000;

/** {@link ItemLock} as a lease on `running` kept across fires. */
export class LeaseItemLock implements ItemLock {
  private readonly leases = new Map<string, Lease>();
  /** The lease each hold was given under (its epoch fences the run's end, even once the lease is forgotten). */
  private readonly holds = new WeakMap<Hold, Lease>();
  /** Lease creations in flight, per item: another request of ours for the item waits for it. */
  private readonly acquiring = new Map<string, Promise<unknown>>();
  /** Creates and deletes of leases issued together share one transaction. */
  private readonly batcher = new MultiBatcher();
  /** Leases with a run in progress that the record does not show yet. */
  private readonly unshown = new Set<Lease>();
  private shower: NodeJS.Timeout | undefined;
  /**
   * The completed fires of items whose lease this process no longer holds, by item key, merged into
   * the record's list when it claims one again. The record is in Redis, and a Redis failover can
   * lose the last completions written to it; the leader then enqueues the lost requests again on
   * the queue that had them, i.e. here, and this process must still know that it ran them, even
   * once it has handed the item on and taken it back (docs/design-notes.md, "Item leases"). The
   * lease itself is kept, not its list: a run that ends after the lease was dropped still adds its fire.
   */
  private readonly left = new Map<string, Lease>();

  constructor(private readonly ctx: LeaseItemLockContext) {}

  holdsLocally(key: string): boolean {
    return (this.leases.get(key)?.runs ?? 0) > 0 || this.acquiring.has(key);
  }

  knownCompleted(key: string, fireTime: number): boolean {
    return (this.leases.get(key) ?? this.left.get(key))?.done.includes(fireTime) === true;
  }

  /** Lets go of the job's leases (the job was removed): its nodes went with it, or go now. */
  forgetJob(job: string): void {
    for (const [key, lease] of this.leases) {
      if (jobOfItemKey(key) !== job) continue;
      // Its let-go, or the end of its run, drops it later: marked, it is not remembered then.
      lease.forgotten = true;
      if (lease.runs === 0) void this.letGo(key, lease);
    }
    for (const key of this.left.keys()) if (jobOfItemKey(key) === job) this.left.delete(key);
  }

  /** Another instance asked for the item: let go of it now, or after the run that holds it. */
  asked(job: string, item: number): void {
    const key = itemKey({ job, item });
    const lease = this.leases.get(key);
    if (!lease) {
      // Not ours as far as we know; a node of our session left by a let-go whose answer was lost
      // would block the asker for as long as our session lives.
      void this.deleteOrphan(job, item);
      return;
    }
    lease.wanted = true;
    if (lease.runs === 0 && !this.acquiring.has(key)) void this.letGo(key, lease);
  }

  /** Leases not in use: what a lost message may have left asked for (see `asked`). */
  idleLeases(): Array<{ job: string; item: number }> {
    const out: Array<{ job: string; item: number }> = [];
    for (const lease of this.leases.values()) if (lease.runs === 0 && !lease.leaving) out.push({ job: lease.job, item: lease.item });
    return out;
  }

  async acquire(config: JobConfig, request: ExecutionRequest, options: AcquireOptions): Promise<Acquired> {
    const key = itemKey(request);
    const { job, item, fireTime } = request;
    let marked = false;
    for (let attempt = 0; attempt < 5; attempt += 1) {
      const inFlight = this.acquiring.get(key);
      if (inFlight) {
        await inFlight.catch(() => undefined);
        continue;
      }
      let lease = this.leases.get(key);
      if (lease?.leaving) {
        await lease.leaving;
        continue;
      }
      if (lease && lease.session.sessionId !== this.ctx.zk.sessionId) {
        // Taken on a session that ended: the node went with it, and with the others of that session.
        this.forgetSession(lease.session.sessionId);
        lease = undefined;
      }
      if (lease) {
        if (lease.runs > 0) {
          // A run of ours holds the item: the same rules as another instance's run. Its end may
          // come before our mark, so after marking look once more (the item may be ours to take).
          const busy: Busy = { busy: true, local: true, catchUp: lease.catchUp };
          if (lease.catchUp && options.waitBehindCatchUp) return busy;
          if (marked || !config.misfire || !options.markOnBusy) return busy;
          await this.ctx.records().mark(job, item, fireTime).catch(redisUnavailable);
          marked = true;
          continue;
        }
        if (!this.ctx.owns(lease.session.sessionId)) {
          // Out of contact for too long: the session (and the node) may be gone at the server.
          throw new ZkError(ErrorCodes.ZK_CONNECTION_LOSS, -4, 'lease', registryPaths.shardingRunning(job, item), { sessionId: lease.session.sessionId });
        }
        lease.runs = 1;
        lease.catchUp = options.catchUp;
        this.startRun(lease, fireTime, false);
        return this.hold(lease);
      }
      const creating = this.create(config, request, options, key);
      this.acquiring.set(key, creating);
      let outcome: Acquired | 'again';
      try {
        outcome = await creating;
      } finally {
        this.acquiring.delete(key);
      }
      if (outcome !== 'again') return outcome;
    }
    return HANDOFF;
  }

  /** The item's mark as its record says (consumed with the re-run's completion). */
  async peekMisfire(_config: JobConfig, request: ExecutionRequest): Promise<MisfireMark | undefined> {
    const mark = await this.ctx.records().markOf(request.job, request.item);
    return mark === null ? undefined : { fireTime: mark, version: -1 };
  }

  /**
   * Ends the run: its completion (and the mark it stood for) recorded under our epoch, the mark left
   * read in the same step. The lease stays unless another instance asked for the item.
   */
  async release(request: ExecutionRequest, hold: Hold, options: ReleaseOptions): Promise<Released> {
    const key = itemKey(request);
    const lease = this.holds.get(hold);
    try {
      if (!lease) return { recorded: false, mark: undefined };
      const run = lease.run;
      lease.run = undefined;
      this.unshown.delete(lease);
      // The end goes after the write that shows the run, or the run would show once it ended.
      if (run?.showing) await run.showing;
      let ended;
      try {
        ended = await this.ctx.records().end(request.job, request.item, lease.epoch, request.fireTime, options.completed, options.mark?.fireTime);
      } catch (err) {
        // Not known to be written: the lease goes, so the next holder claims afresh.
        this.ctx.log.warn({ err, job: request.job, item: request.item }, 'could not record the end of a run; letting go of the item');
        lease.runs = 0;
        if (this.leases.get(key) === lease) await this.letGo(key, lease);
        return { recorded: false, mark: undefined, unknown: true };
      }
      lease.runs = 0;
      if (!ended.ok) {
        // Another lease claimed the item: ours is not worth keeping, if the node is still ours at all.
        if (this.leases.get(key) === lease) await this.letGo(key, lease);
        return { recorded: false, mark: undefined };
      }
      if (options.completed) lease.done = withCompletedFire(lease.done, request.fireTime);
      if (ended.asked) lease.wanted = true;
      const mark: MisfireMark | null = ended.mark === null ? null : { fireTime: ended.mark, version: -1 };
      // A mark is run first, by whoever holds the item then: ourselves, right away.
      if (lease.wanted && mark === null && this.leases.get(key) === lease) void this.letGo(key, lease);
      return { recorded: options.completed || options.mark !== undefined, mark: options.readMark ? mark : undefined };
    } finally {
      this.ctx.onReleased(key);
    }
  }

  /** Creates the lease; `again` when the item turned out free or its node had to be made. */
  private async create(config: JobConfig, request: ExecutionRequest, options: AcquireOptions, key: string): Promise<Acquired | 'again'> {
    const { job, item, fireTime } = request;
    const running = registryPaths.shardingRunning(job, item);
    const itemPath = registryPaths.shardingItem(job, item);
    const session = this.ctx.zk.onSession(this.ctx.zk.sessionId);
    let read: Promise<[number[], ZkStat | null]> | undefined;
    try {
      const create = { type: 'create', path: running, data: encodeRunningNode(this.ctx.instanceId, false), mode: 'ephemeral' } as const;
      // Behind the create: our node's stat (its czxid is the lease's epoch), and the completed
      // fires an earlier holder may have left in ZooKeeper (the lock without leases).
      ({ read } = await this.batcher.commit(session, [create], (s) =>
        Promise.all([s.get(itemPath).then(({ data }) => parseCompletedFires(data), () => [] as number[]), s.exists(running)]),
      ));
    } catch (err) {
      if (is(err, ErrorCodes.ZK_NO_NODE)) {
        await createItemNode(this.ctx.zk, itemPath);
        return 'again';
      }
      if (!is(err, ErrorCodes.ZK_NODE_EXISTS) && !isRetryable(err)) throw err;
      const holder = await readRunningHolder(this.ctx.zk, running);
      if (!holder) return 'again';
      // Our own session's node and no lease of ours: a create whose answer was lost, or a let-go
      // that did not go through. Nobody else can hold or delete it: ours to use.
      if (holder.stat.ephemeralOwner === session.sessionId) return this.claim(session, request, options, key, holder.stat.czxid, []);
      const found = await this.ctx.records().contend(job, item, fireTime, config.misfire && options.markOnBusy, options.waitBehindCatchUp, holder.instanceId, holder.stat.czxid).catch(redisUnavailable);
      return found.running ? { busy: true, local: false, catchUp: found.catchUp } : HANDOFF;
    }
    const [stored, stat] = await read!;
    // Our node, read on our session right behind its create: gone only with the session.
    if (!stat || stat.ephemeralOwner !== session.sessionId) return HANDOFF;
    return this.claim(session, request, options, key, stat.czxid, stored);
  }

  /**
   * The node is ours: claim the item's record under its czxid, which also shows the run. A claim
   * refused (a newer lease claimed: our node is gone) or made after our session ended hands out
   * nothing: the request is deferred and looks again.
   */
  private async claim(session: ZkSessionOps, request: ExecutionRequest, options: AcquireOptions, key: string, epoch: string, stored: readonly number[]): Promise<Acquired> {
    const { job, item, fireTime } = request;
    // Every field from the start: one added later moves them all out of the object (a second
    // allocation per lease, about 40 bytes).
    const lease: Lease = { job, item, session, epoch, done: [], runs: 1, catchUp: options.catchUp, run: undefined, wanted: false, leaving: undefined, forgotten: false };
    let claimed;
    try {
      claimed = await this.ctx.records().claim(job, item, epoch, this.ctx.instanceId, fireTime, options.catchUp);
    } catch (err) {
      lease.runs = 0;
      await this.letGo(key, lease);
      redisUnavailable(err);
    }
    if (!claimed || this.ctx.zk.sessionId !== session.sessionId) {
      lease.runs = 0;
      if (claimed) await this.letGo(key, lease);
      return HANDOFF;
    }
    lease.done = mergeCompletedFires(claimed.done, stored, this.left.get(key)?.done ?? []);
    this.left.delete(key);
    this.leases.set(key, lease);
    this.watchNode(key, lease);
    this.startRun(lease, fireTime, true);
    return this.hold(lease);
  }

  /**
   * Notes the run; the record shows it (for a request of another instance that finds the item
   * held, for the console and the leader's reshard) once it has run {@link RUN_SHOWN_AFTER_MS}
   * past its fire time: a short run writes nothing at its start, only its end.
   */
  private startRun(lease: Lease, fire: number, shown: boolean): void {
    lease.run = { fire, startAt: Math.max(Date.now(), fire) };
    if (shown) return;
    this.unshown.add(lease);
    this.shower ??= setInterval(() => this.showLongRuns(), RUN_SHOWN_AFTER_MS / 2).unref();
  }

  private showLongRuns(): void {
    const now = Date.now();
    for (const lease of this.unshown) {
      const run = lease.run;
      if (!run || run.showing) {
        this.unshown.delete(lease);
        continue;
      }
      if (now - run.startAt < RUN_SHOWN_AFTER_MS) continue;
      this.unshown.delete(lease);
      run.showing = this.ctx
        .records()
        .begin(lease.job, lease.item, lease.epoch, run.fire, lease.catchUp)
        // Refused: another lease claimed the item, and the run's end will be refused too.
        .then(
          () => undefined,
          (err: unknown) => this.ctx.log.debug({ err, job: lease.job, item: lease.item }, 'could not show a run in its record'),
        );
    }
    if (this.unshown.size === 0 && this.shower) {
      clearInterval(this.shower);
      this.shower = undefined;
    }
  }

  private hold(lease: Lease): Hold {
    const hold: Hold = { session: lease.session, done: lease.done };
    this.holds.set(hold, lease);
    return hold;
  }

  /**
   * Forgets the lease if its node is deleted by anyone but us (an operator, a job's removal): the
   * item is no longer ours to run. One watch per lease, set once.
   */
  private watchNode(key: string, lease: Lease): void {
    this.ctx.zk
      .exists(registryPaths.shardingRunning(lease.job, lease.item), this.nodeWatcher)
      .then((stat) => {
        if (!stat || stat.ephemeralOwner !== lease.session.sessionId) this.forgetDeleted(key, lease);
      })
      .catch(() => undefined);
  }

  /**
   * The watcher of every lease's node, one function for all: one per lease (a closure, its context,
   * and the bound function the client wraps it in) took about 250 bytes a lease. The lease is found
   * by the node's path. A notice is always about the lease in the map, if any: the client hands it
   * over as it reads it off the connection, before the answer to any later request of the session,
   * so before anything that would put a newer lease of the item in the map; a notice that comes while
   * our own delete is under way finds the lease `leaving`; and the client of a session that ended
   * re-arms no watches and hands over nothing.
   */
  private readonly nodeWatcher: ZkWatcher = (event) => {
    if (event.type !== 'deleted') return;
    const path = parseRegistryPath(event.path);
    if (path.kind !== 'shardingRunning') return;
    const key = itemKey(path);
    const lease = this.leases.get(key);
    if (lease) this.forgetDeleted(key, lease);
  };

  /** The lease's node is gone (not by our let-go): the item is no longer ours to run. */
  private forgetDeleted(key: string, lease: Lease): void {
    if (this.leases.get(key) === lease && !lease.leaving) this.drop(key, lease);
  }

  /** Deletes our node (only ours: the delete is bound to the lease's session). */
  private letGo(key: string, lease: Lease): Promise<void> {
    lease.leaving ??= (async () => {
      try {
        await this.batcher.commit(lease.session, [{ type: 'delete', path: registryPaths.shardingRunning(lease.job, lease.item), version: -1 }]);
      } catch (err) {
        // Gone with the session, or already: fine. Otherwise the node stays ours, found again as
        // our own when we or an asker next look (see `asked`).
        if (!is(err, ErrorCodes.ZK_NO_NODE, ErrorCodes.ZK_SESSION_EXPIRED)) this.ctx.log.warn({ err, job: lease.job, item: lease.item }, 'could not let go of an item lease');
      } finally {
        if (this.leases.get(key) === lease) this.drop(key, lease);
      }
    })();
    return lease.leaving;
  }

  /** Forgets the lease, keeping what it knew of the item's completed fires ({@link left}). */
  private drop(key: string, lease: Lease): void {
    this.leases.delete(key);
    this.left.delete(key);
    if (lease.forgotten) return;
    this.left.set(key, lease);
    if (this.left.size > LEFT_ITEMS_KEPT) this.left.delete(this.left.keys().next().value!);
  }

  /**
   * Deletes a `running` node of our current session that no lease of ours stands for. Counted as an
   * acquisition of the item meanwhile, so that no request of ours adopts the node while it goes;
   * sent on its own (a merged multi that failed on another group would be sent again later).
   */
  private deleteOrphan(job: string, item: number): void {
    const key = itemKey({ job, item });
    if (this.acquiring.has(key) || this.leases.has(key)) return;
    const deleting = (async () => {
      const running = registryPaths.shardingRunning(job, item);
      const session = this.ctx.zk.onSession(this.ctx.zk.sessionId);
      const stat = await session.exists(running);
      if (!stat || stat.ephemeralOwner !== session.sessionId) return;
      await session.multi().delete(running, stat.version).commit();
    })()
      .catch((err: unknown) => {
        if (!is(err, ErrorCodes.ZK_NO_NODE, ErrorCodes.ZK_SESSION_EXPIRED, ErrorCodes.ZK_BAD_VERSION)) this.ctx.log.debug({ err, job, item }, 'could not delete an orphaned item lease');
      })
      .finally(() => this.acquiring.delete(key));
    this.acquiring.set(key, deleting);
  }

  /** Forgets every lease taken on session `sessionId` (it ended: their nodes went with it). */
  private forgetSession(sessionId: string): void {
    for (const [key, lease] of this.leases) if (lease.session.sessionId === sessionId && lease.runs === 0) this.drop(key, lease);
  }
}
