/**
 * DESIGN.md flow 7, a new leader's work per job and once for the namespace: read the job's last
 * ledger and replay it (duplicates are dropped by job id), finish the failover intents a previous
 * leader left, and sweep the queues of instances that died while no leader watched.
 */
import type { Logger } from '../shared/logger';
import type { RedisClient } from '../shared/redis/redis-connection';
import type { ExecutionRequest } from '../shared/registry/execution-request';
import { fireLedgerCodec, type FireLedger } from '../shared/registry/fire-ledger';
import { registryPaths } from '../shared/registry/registry-paths';
import { sharedAssignment, type Assignment } from '../shared/sharding/assignment';
import type { ZkClient } from '../shared/zk';
import { dispatchedItems, withFireItems } from './dispatch-plan';
import { findOrphanedQueues, type FailoverCoordinator } from './failover';
import type { JobState } from './fire-dispatcher';
import type { Clock } from './fire-timer';
import type { QueuePool } from './queue-pool';
import type { QueueMoves } from './queue-moves';
import type { StandbyReads } from './standby-reads';
import type { TaskChain } from './task-chain';

/**
 * The oldest ledger a new leader replays. A replayed request that already ran is skipped by the
 * worker that ran it, which remembers each item's last completed fires (queue-pool.ts); a ledger
 * older than this is not replayed at all, and its fire is treated as missed (misfire policy).
 */
export const REPLAY_WINDOW_MS = 10 * 60_000;

/** What a replay whose enqueue failed is logged as. */
const REPLAY_FAILED = 'deferred enqueue failed';

/** What a takeover works with. */
export interface TakeoverDeps {
  zk: ZkClient;
  redis: RedisClient;
  log: Logger;
  clock: Clock;
  queues: QueuePool;
  failover: FailoverCoordinator;
  chain: TaskChain;
  moves: QueueMoves;
  jobs: ReadonlyMap<string, JobState>;
  /** The queues of every live instance, and the ids of entries that cannot be read; undefined while not loaded. */
  liveQueues(): { queues: ReadonlySet<string>; unreadable: ReadonlySet<string> } | undefined;
  /** How long before its nominal time a prepared fire is enqueued. */
  deliveryLeadMs(): number;
  /** Lays out a job's item nodes (one that never fired may have none). */
  layOut(job: string, total: number): void;
  /** What a warm standby read ahead and still knows to be current (nothing after a cold start). */
  reads: StandbyReads;
}

/** A new leader's catching up with what its predecessor left. */
export class Takeover {
  /** The enqueues of replays already due, waiting for their chain task ({@link enqueueOnChain}). */
  private due: Array<() => Promise<void>> = [];
  /** That task, from when it is queued until it starts. */
  private dueTask: Promise<void> | undefined;

  constructor(private readonly deps: TakeoverDeps) {}

  /**
   * Prepares a job just loaded: its assignment from its last ledger, the replay of that fire, the
   * failover intents left. Resolves with the ledgered fire time its schedule continues after.
   */
  async prepareJob(job: string, state: JobState): Promise<number | undefined> {
    const known = this.deps.reads.facts(job);
    const ledger = await this.readLedger(job, state, known.ledger);
    const config = state.view.config;
    // A job that never fired may have no item nodes yet: lay them out before its first fire,
    // unless a warm standby saw them all.
    if (!ledger && config && known.laidOut < config.shardingTotalCount) this.deps.layOut(job, config.shardingTotalCount);
    state.assignment = ledger ? sharedAssignment(assignmentOf(ledger)) : undefined;
    // A replay that fails is logged like a deferred one; the job is scheduled all the same.
    if (ledger) await this.replay(job, state, ledger).catch((err) => this.deps.log.error({ err, job, fireTime: ledger.fireTime }, 'could not replay the last fire'));
    if (!known.noIntents) await this.deps.failover.resumeIntents(job).catch((err) => this.deps.log.error({ err, job }, 'could not finish failover intents'));
    return ledger?.fireTime;
  }

  /** Queues of instances that died while no leader watched are handled like any lost instance. */
  async sweepOrphanedQueues(): Promise<void> {
    const known = this.deps.liveQueues();
    // Without the instances loaded every queue would look orphaned.
    if (!known) return;
    // An entry that cannot be decoded may be a live worker's: its queues stay (its id is in the name).
    const orphans = (await findOrphanedQueues(this.deps.redis, this.deps.queues.prefix, this.deps.zk.options.namespace, known.queues)).filter(({ from }) => !known.unreadable.has(from));
    for (const { from, queue } of orphans) {
      // A worker makes its queue before its instance entry (its consumers start first): one that
      // registers during the scan has a queue that looks orphaned, and nothing in it, since no
      // leader knew it. An empty queue has nothing to move; it is left (a dead worker's keys stay).
      const counts = await this.deps.queues.get(queue).getJobCounts('wait', 'active', 'delayed', 'prioritized', 'waiting-children');
      if (Object.values(counts).every((n) => n === 0)) continue;
      this.deps.moves.schedule(from, queue, 'lost');
    }
  }

  /** The job's last ledger: as a warm standby knows it (`known`: text, null for none), else read. */
  private async readLedger(job: string, state: JobState, known: string | null | undefined): Promise<FireLedger | undefined> {
    const path = registryPaths.leaderFire(job);
    const text = known !== undefined ? (known ?? undefined) : await this.deps.zk.getText(path);
    if (text !== undefined) state.ledgerReady = true;
    if (!text) return undefined;
    try {
      return fireLedgerCodec.decode(Buffer.from(text), path);
    } catch (err) {
      this.deps.log.error({ err, job }, 'unreadable dispatch ledger; ignoring it');
      return undefined;
    }
  }

  /**
   * Re-enqueues the last ledgered fire to the queues it named. Requests that were already enqueued
   * and still wait or run keep their job ids, so BullMQ ignores them; those that ran are skipped by
   * the worker that ran them; only those the old leader never enqueued run. Ledgers older than
   * {@link REPLAY_WINDOW_MS} are not replayed.
   */
  private async replay(job: string, state: JobState, ledger: FireLedger): Promise<void> {
    if (this.deps.clock.now() - ledger.fireTime > REPLAY_WINDOW_MS) return;
    const byQueue = new Map<string, ExecutionRequest[]>();
    // Enqueued after their time by a new leader: catch-up work (see ExecutionRequest.catchUp).
    const fireItems = dispatchedItems(ledger.assignment);
    const fireListeners = state.view.config?.fireListeners;
    const request = (item: number): ExecutionRequest =>
      withFireItems({ job, item, fireTime: ledger.fireTime, source: ledger.source, epoch: ledger.epoch, catchUp: true }, fireListeners, fireItems);
    const orphaned: number[] = [];
    /** The queue of each instance enqueued to. */
    const queues = new Map<string, string>();
    for (const [instanceId, items] of Object.entries(ledger.assignment)) {
      const queue = ledger.queues[instanceId];
      if (!queue || state.view.instance(instanceId)?.queue !== queue) {
        orphaned.push(...items);
        continue;
      }
      byQueue.set(queue, items.map(request));
      queues.set(instanceId, queue);
    }
    if (orphaned.length > 0) {
      // Their instances died before or after the enqueue: if before, nothing else will run them,
      // so they go to live instances (a request the dead instance did take is failed over from its
      // queue as well; the completed list makes the second run a no-op).
      const targets = state.view.targetsFor(orphaned);
      for (const item of orphaned) {
        const target = targets.get(item);
        if (!target) continue;
        const list = byQueue.get(target.info.queue) ?? [];
        list.push(request(item));
        byQueue.set(target.info.queue, list);
        queues.set(target.instanceId, target.info.queue);
      }
      this.deps.log.warn({ job, fireTime: ledger.fireTime, items: orphaned, live: targets.size }, 'last fire names instances that are gone; their items go to live instances');
    }
    const enqueue = async (): Promise<void> => {
      await this.deps.queues.enqueueGathered(byQueue);
      // As behind a fire's enqueue (FireLoop.release); a replay deferred to its fire time may come
      // after the orphan sweep moved a dead target's queue. A job removed meanwhile has a closed
      // view that knows no instance: nothing to tell from it.
      if (this.deps.jobs.get(job) === state) this.deps.moves.afterEnqueue(queues, state.view);
    };
    // A ledger written ahead of its fire is enqueued no earlier than a fire of a few requests is.
    const at = ledger.fireTime - this.deps.deliveryLeadMs();
    if (at > this.deps.clock.now()) await this.deps.chain.at(at, enqueue, REPLAY_FAILED);
    else await this.enqueueOnChain(enqueue);
  }

  /**
   * Runs the enqueue of a replay already due on the chain, not beside its tasks: a queue move of an
   * instance lost meanwhile reads the queue and then obliterates it, and a replay's requests that
   * landed in between were deleted unseen (and `chain.at` runs a task already due inline, for
   * callers on the chain; a takeover's are not). Replays due while the task waits join it and start
   * in one turn, so that they still share their addBulk calls (most of a takeover's are due at once).
   */
  private enqueueOnChain(enqueue: () => Promise<void>): Promise<void> {
    this.due.push(enqueue);
    this.dueTask ??= this.deps.chain.run(async () => {
      this.dueTask = undefined;
      const outcomes = await Promise.allSettled(this.due.splice(0).map((run) => run()));
      for (const outcome of outcomes) if (outcome.status === 'rejected') this.deps.log.error({ err: outcome.reason }, REPLAY_FAILED);
    }, REPLAY_FAILED);
    return this.dueTask;
  }
}

function assignmentOf(ledger: FireLedger): Assignment {
  return Object.fromEntries(Object.entries(ledger.assignment).map(([id, items]) => [id, [...items]]));
}
