/**
 * Moves of instance queues (failover of a lost instance, the waiting requests of a draining one),
 * run on the leader's task chain so that no dispatch to that queue runs at the same time. Several
 * jobs report the same lost instance: its queue is moved once for all of them.
 */
import type { Logger } from '../shared/logger';
import type { JobView } from './job-view';
import type { FailoverCoordinator, MoveReason } from './failover';
import { Retries } from '../shared/concurrency';
import type { TaskChain } from './task-chain';

/**
 * Schedules queue moves, one per queue at a time. A move that fails (ZooKeeper or Redis failing
 * under it) is tried again while this process leads: it leaves the queue whole (the obliterate is
 * its last step) and its moves dedupe by job id, as a new leader's resumed intents do; nothing else
 * would come back for those requests until a leader change.
 */
export class QueueMoves {
  /** Queues whose move is scheduled: queue -> {from, reason}. */
  private readonly pending = new Map<string, { from: string; reason: MoveReason }>();
  /** Moves that failed, tried again while this process leads. */
  private readonly retries: Retries;

  /**
   * `liveQueue`: whether a live instance's entry names the queue now. A lost move of such a queue is
   * dropped when its turn comes: the takeover's sweep lists Redis's queues after the live ones, and
   * a worker makes its queue before its entry, so one registering meanwhile looked orphaned.
   */
  constructor(
    private readonly chain: TaskChain,
    private readonly failover: FailoverCoordinator,
    private readonly isLeader: () => boolean,
    private readonly log: Logger,
    private readonly liveQueue: (queue: string) => boolean = () => false,
  ) {
    this.retries = new Retries(isLeader);
  }

  /**
   * Behind an enqueue to `queues` (instance id -> queue): an instance that died or began draining
   * since the enqueue was planned got requests it will not run, and its queue may have been moved
   * already; it is moved (again), which is what failover would do. One alive that no longer runs
   * the job keeps its queue: only the job's requests move.
   */
  afterEnqueue(queues: Iterable<readonly [string, string]>, view: Pick<JobView, 'job' | 'instance' | 'liveInstance'>): void {
    for (const [instanceId, queue] of queues) {
      const info = view.liveInstance(instanceId);
      if (!info || info.queue !== queue) this.schedule(instanceId, queue, 'lost');
      else if (info.state === 'draining') this.schedule(instanceId, queue, 'draining');
      else if (!view.instance(instanceId)) this.scheduleJobs(instanceId, queue, [view.job]);
    }
  }

  /**
   * Moves the waiting requests of `jobs` out of `queue`: its instance, alive, stopped running them.
   * On the chain, behind any enqueue that planned them there.
   */
  scheduleJobs(from: string, queue: string, jobs: readonly string[]): void {
    if (!this.isLeader() || jobs.length === 0) return;
    const only = new Set(jobs);
    void this.chain.run(async () => {
      if (!this.isLeader() || this.pending.has(queue)) return;
      try {
        await this.failover.moveQueue(from, queue, 'draining', only);
        this.retries.succeeded(`${queue}|jobs`);
      } catch (err) {
        const retryInMs = this.retries.failed(`${queue}|jobs`, () => this.scheduleJobs(from, queue, jobs));
        this.log.error({ err, queue, from, jobs: jobs.length, retryInMs }, 'moving the requests of jobs an instance let go failed; tried again');
      }
    }, 'moving the requests of jobs an instance let go failed');
  }

  /** Moves `queue` (of instance `from`) on the chain; a lost instance's move wins over a drain's. */
  schedule(from: string, queue: string, reason: MoveReason): void {
    if (!this.isLeader()) return;
    const known = this.pending.get(queue);
    if (known && (known.reason === 'lost' || reason === 'draining')) return;
    this.pending.set(queue, { from, reason });
    void this.chain.run(async () => {
      const move = this.pending.get(queue);
      this.pending.delete(queue);
      if (!move || !this.isLeader()) return;
      if (move.reason === 'lost' && this.liveQueue(queue)) {
        this.log.info({ queue, from: move.from }, 'a queue taken for a lost instance\'s is a live one\'s; left alone');
        return;
      }
      try {
        await this.failover.moveQueue(move.from, queue, move.reason);
        this.retries.succeeded(queue);
      } catch (err) {
        const retryInMs = this.retries.failed(queue, () => this.schedule(move.from, queue, move.reason));
        this.log.error({ err, queue, from: move.from, retryInMs }, 'failover of a queue failed; tried again');
      }
    }, 'failover of a queue failed');
  }
}
