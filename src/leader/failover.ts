import type { Job } from 'bullmq';
import { executionRequestSchema, type ExecutionRequest } from '../shared/registry/execution-request';
import { failoverIntentCodec, type FailoverIntent } from '../shared/registry/fire-ledger';
import type { RedisClient } from '../shared/redis/redis-connection';
import type { Logger } from '../shared/logger';
import { namespaceQueues } from '../shared/redis/namespace-queues';
import { DRAINED_FIELD } from '../shared/registry/queue-names';
import { registryPaths } from '../shared/registry/registry-paths';
import type { ZkClient } from '../shared/zk';
import type { JobState } from './fire-dispatcher';
import type { LiveInstance } from './job-view';
import type { Fence } from './leader-election';
import type { QueuePool } from './queue-pool';

/** Why requests leave a queue: its instance is gone, or it is shutting down. */
export type MoveReason = 'lost' | 'draining';

/** An item that will not run for a fire (failover off, or nowhere to run). */
export interface MissedItem {
  job: string;
  item: number;
  fireTime: number;
  from: string;
  reason: 'failover-off';
}

export interface FailoverDeps {
  zk: ZkClient;
  queues: QueuePool;
  jobs: () => ReadonlyMap<string, JobState>;
  fence: () => Fence;
  epoch: () => number;
  log: Logger;
  onMoved: (request: ExecutionRequest, target: string) => void;
  onMissed: (missed: MissedItem) => void;
}

/** BullMQ states of requests not finished yet; `active` ones only move when the instance is lost. */
const PENDING_STATES = ['wait', 'delayed', 'prioritized'] as const;

/**
 * DESIGN.md flow 6, done better than ElasticJob: when an instance is lost, every unfinished
 * request in its queue (waiting, delayed and active) moves at once to live instances of the job,
 * each item to the instance its next fires will run on (`targetsFor`, assignment.ts), oldest fire first;
 * none waits for an idle instance and none is taken one at a time. Intents are
 * written (fenced) before the move, so a leader crash in the middle is finished by the next one.
 */
export class FailoverCoordinator {
  constructor(private readonly deps: FailoverDeps) {}

  /**
   * Moves the requests of `queue` (instance `from`) and, for a lost instance, removes the queue.
   * With `only`, a live instance stopped running those jobs: their waiting requests move (as a
   * draining instance's do) and the queue stays.
   */
  async moveQueue(from: string, queueName: string, reason: MoveReason, only?: ReadonlySet<string>): Promise<void> {
    const queue = this.deps.queues.get(queueName);
    if (only || reason === 'draining') {
      const { requests: pending, malformed } = this.byJob(queueName, await queue.getJobs([...PENDING_STATES]), only);
      if (!only) await this.removeFromDraining(queue, from, malformed);
      // Moved requests must not run on the draining instance too, nor move a second time, to
      // another instance, when it leaves: all of them go, put-back ones (taken once, so with a
      // processedOn) included, each job's right after its move, so that a move failing later
      // leaves none moved behind.
      for (const [job, { requests, ids }] of pending) if (await this.moveRequests(job, from, requests, 'draining')) await this.removeFromDraining(queue, from, ids);
      return;
    }
    // Marked by a worker at the end of its close (worker-service.ts): what waits in its queue it
    // handed back, not run or aborted at the end of its grace period.
    const drained = (await this.deps.queues.connection.hexists(queue.keys.meta, DRAINED_FIELD)) === 1;
    // One read of every request (BullMQ reads the states in one script), then which of them wait: a
    // request taken meanwhile counts as taken, one put back as waiting; none is left out.
    const jobs = await queue.getJobs([...PENDING_STATES, 'active']);
    const waiting = new Set(drained ? await queue.getRanges([...PENDING_STATES]) : []);
    const { requests: all } = this.byJob(queueName, jobs);
    for (const [job, { requests, ids }] of all) {
      // A drained instance's waiting requests move as its drain's did, with failover off too (a run
      // aborted at the end of the grace period runs again): they came after the drain's move (the
      // enqueue of a fire planned before the drain, a request a closed consumer fetched and put back).
      if (drained && !this.deps.jobs().get(job)?.view.config?.failover) {
        const left = requests.filter((_, i) => !waiting.has(ids[i]));
        const handedBack = requests.filter((_, i) => waiting.has(ids[i]));
        if (handedBack.length > 0 && !(await this.moveRequests(job, from, handedBack, 'draining'))) left.push(...handedBack);
        if (left.length > 0) await this.moveRequests(job, from, left, 'lost');
      } else await this.moveRequests(job, from, requests, 'lost');
    }
    await queue.obliterate({ force: true });
    this.deps.log.info({ queue: queueName, from, moved: [...all.values()].reduce((n, e) => n + e.ids.length, 0) }, 'lost instance queue emptied and removed');
  }

  /** The requests of `jobs` (those of the jobs in `only`, when given) by job, and the ids of malformed ones (dropped). */
  private byJob(queue: string, jobs: readonly Job[], only?: ReadonlySet<string>): { requests: Map<string, { requests: ExecutionRequest[]; ids: string[] }>; malformed: string[] } {
    const requests = new Map<string, { requests: ExecutionRequest[]; ids: string[] }>();
    const malformed: string[] = [];
    for (const job of jobs) {
      if (only && !(typeof job.data?.job === 'string' && only.has(job.data.job))) continue;
      const parsed = executionRequestSchema.safeParse(job.data);
      if (!parsed.success) {
        this.deps.log.warn({ queue, id: job.id }, 'malformed request in a failed queue; dropped');
        malformed.push(job.id!);
        continue;
      }
      let entry = requests.get(parsed.data.job);
      if (!entry) requests.set(parsed.data.job, (entry = { requests: [], ids: [] }));
      entry.requests.push(parsed.data);
      entry.ids.push(job.id!);
    }
    return { requests, malformed };
  }

  /**
   * Removes requests from a draining instance's queue. The instance stopped taking requests before
   * it said it was draining; one it took anyway (BullMQ refuses to remove a locked job) is logged:
   * its item may run there as well as where it was moved.
   */
  private async removeFromDraining(queue: ReturnType<QueuePool['get']>, from: string, ids: readonly string[]): Promise<void> {
    const removed = await Promise.all(ids.map((id) => queue.remove(id).catch(() => 0)));
    const kept = ids.filter((_, i) => removed[i] !== 1);
    if (kept.length > 0) this.deps.log.warn({ queue: queue.name, from, ids: kept }, 'moved requests the draining instance took meanwhile; they may run twice');
  }

  /** Finishes the intents a previous leader left (flow 7); the moves dedupe by job id. */
  async resumeIntents(job: string): Promise<void> {
    const dir = registryPaths.leaderFailoverItems(job);
    let names: string[];
    try {
      names = await this.deps.zk.children(dir);
    } catch {
      return;
    }
    for (const name of names) {
      const item = Number(name);
      const path = registryPaths.leaderFailoverItem(job, item);
      const text = await this.deps.zk.getText(path);
      if (text === undefined) continue;
      let intent: FailoverIntent;
      try {
        intent = failoverIntentCodec.decode(Buffer.from(text), path);
      } catch (err) {
        this.deps.log.error({ err, job, item }, 'unreadable failover intent; dropped');
        await this.deps.zk.fencedMulti(this.deps.fence()).delete(path).commit();
        continue;
      }
      const view = this.deps.jobs().get(job)?.view;
      const live = new Map((view?.eligibleInstances() ?? []).map((i) => [i.instanceId, i.info.queue]));
      // The chosen target may have died since; then the item goes where failover sends it now
      // (at least once beats never).
      const fallback = view?.targetsFor([item], intent.from).get(item);
      const byQueue = new Map<string, ExecutionRequest[]>();
      for (const move of intent.moves) {
        const target = live.get(move.target) === move.queue ? { id: move.target, queue: move.queue } : fallback && { id: fallback.instanceId, queue: fallback.info.queue };
        if (!target) continue;
        const request = this.failoverRequest(job, item, move.fireTime, intent.from, undefined, move.fireItems);
        byQueue.set(target.queue, [...(byQueue.get(target.queue) ?? []), request]);
        this.deps.onMoved(request, target.id);
      }
      await this.deps.queues.enqueue(byQueue);
      await this.deps.zk.fencedMulti(this.deps.fence()).delete(path).commit();
    }
  }

  /**
   * Moves `requests` to live instances of `job`, or reports them missed when they cannot run
   * (failover off, nowhere to run). Returns false when it left them where they are: a draining
   * instance's requests with nowhere to go stay in its queue, and move (or are reported) when it
   * leaves, once another instance may have come.
   */
  private async moveRequests(job: string, from: string, requests: ExecutionRequest[], reason: MoveReason): Promise<boolean> {
    const state = this.deps.jobs().get(job);
    const config = state?.view.config;
    if (reason === 'lost' && !config?.failover) {
      for (const r of requests) this.deps.onMissed({ job, item: r.item, fireTime: r.fireTime, from, reason: 'failover-off' });
      await this.sendGivenUp(job, from, requests);
      return true;
    }
    const targets = state?.view.targetsFor(new Set(requests.map((r) => r.item)), from) ?? new Map<number, LiveInstance>();
    if (targets.size === 0 && reason === 'draining') {
      this.deps.log.warn({ job, from, items: requests.map((r) => r.item) }, 'no other live instance for a draining instance\'s items; they move when it leaves');
      return false;
    }
    if (targets.size === 0) {
      this.deps.log.warn({ job, from, items: requests.map((r) => r.item) }, 'no live instance to take the items; they run at the next fire');
      for (const r of requests) this.deps.onMissed({ job, item: r.item, fireTime: r.fireTime, from, reason: 'failover-off' });
      return true;
    }
    const intents = new Map<number, FailoverIntent>();
    const byQueue = new Map<string, ExecutionRequest[]>();
    // Oldest fire first: a target takes an item's requests in the order they were enqueued.
    const ordered = [...requests].sort((a, b) => a.item - b.item || a.fireTime - b.fireTime);
    const instanceOf = new Map<string, string>();
    for (const [i, r] of ordered.entries()) {
      const target = targets.get(r.item)!;
      instanceOf.set(target.info.queue, target.instanceId);
      const move = { fireTime: r.fireTime, source: r.source, target: target.instanceId, queue: target.info.queue, ...(r.fireItems !== undefined && { fireItems: r.fireItems }) };
      const intent = intents.get(r.item);
      if (intent) {
        intent.moves.push(move);
        intent.fireTime = Math.max(intent.fireTime, r.fireTime);
      } else intents.set(r.item, { from, fireTime: r.fireTime, moves: [move] });
      const previous = i > 0 ? ordered[i - 1] : undefined;
      const moved = this.failoverRequest(job, r.item, r.fireTime, from, previous?.item === r.item && previous.fireTime < r.fireTime ? previous.fireTime : undefined, r.fireItems);
      byQueue.set(target.info.queue, [...(byQueue.get(target.info.queue) ?? []), moved]);
    }
    await this.writeIntents(job, intents);
    await this.deps.queues.enqueue(byQueue);
    for (const [queue, list] of byQueue) for (const request of list) this.deps.onMoved(request, instanceOf.get(queue)!);
    const tx = this.deps.zk.fencedMulti(this.deps.fence());
    for (const item of intents.keys()) tx.delete(registryPaths.leaderFailoverItem(job, item));
    await tx.commit();
    return true;
  }

  private async writeIntents(job: string, intents: ReadonlyMap<number, FailoverIntent>): Promise<void> {
    await this.deps.zk.ensurePath(registryPaths.leaderFailoverItems(job));
    const tx = this.deps.zk.fencedMulti(this.deps.fence());
    for (const [item, intent] of intents) {
      const path = registryPaths.leaderFailoverItem(job, item);
      if (await this.deps.zk.exists(path)) tx.set(path, failoverIntentCodec.encode(intent));
      else tx.create(path, failoverIntentCodec.encode(intent));
    }
    await tx.commit();
  }

  /**
   * Items of a lost instance that will not run (failover off) still end their fires: each goes as a
   * `givenUp` request to a live instance of the job, which counts it ended for its fire, so that the
   * fire's `afterFire` runs (once-per-fire listeners only: requests without `fireItems` send nothing).
   * With no live instance nothing could run `afterFire` anyway.
   */
  private async sendGivenUp(job: string, from: string, requests: readonly ExecutionRequest[]): Promise<void> {
    const counted = requests.filter((r) => r.fireItems !== undefined);
    if (counted.length === 0) return;
    const targets = this.deps.jobs().get(job)?.view.targetsFor(new Set(counted.map((r) => r.item)), from) ?? new Map<number, LiveInstance>();
    const byQueue = new Map<string, ExecutionRequest[]>();
    for (const r of counted) {
      const target = targets.get(r.item);
      if (!target) continue;
      const request: ExecutionRequest = { ...this.failoverRequest(job, r.item, r.fireTime, from, undefined, r.fireItems), givenUp: true };
      byQueue.set(target.info.queue, [...(byQueue.get(target.info.queue) ?? []), request]);
    }
    await this.deps.queues.enqueue(byQueue);
  }

  private failoverRequest(job: string, item: number, fireTime: number, from: string, after?: number, fireItems?: number): ExecutionRequest {
    const request: ExecutionRequest = { job, item, fireTime, source: 'FAILOVER', epoch: this.deps.epoch(), from };
    if (after !== undefined) request.after = after;
    if (fireItems !== undefined) request.fireItems = fireItems;
    return request;
  }
}

/**
 * This namespace's queues in Redis (BullMQ `prefix`) that no live instance owns: instances that died
 * while no leader was watching. Queue names are `{namespace}.{instanceId}.{session}`; the instance id
 * is recovered from the name (it may contain dots, the session id never does).
 */
export async function findOrphanedQueues(redis: RedisClient, prefix: string, namespace: string, liveQueues: ReadonlySet<string>): Promise<Array<{ from: string; queue: string }>> {
  return (await namespaceQueues(redis, prefix, namespace))
    .filter((queue) => !liveQueues.has(queue))
    .map((queue) => ({ from: queue.slice(namespace.length + 1, queue.lastIndexOf('.')), queue }));
}
