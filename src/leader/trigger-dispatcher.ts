/**
 * Manual triggers (DESIGN.md flow 10): the leader acts on `/{job}/trigger/{requestId}` nodes. Every
 * enabled item runs once with source TRIGGER, on the instances the job's assignment gives now; a
 * disabled job's trigger is refused (its node deleted, the refusal reported). The node stays until
 * the requests are enqueued, and before it enqueues the leader writes its decision into the node
 * (fenced): a leader change at any point runs the trigger once, since a new leader that finds a
 * decision replays it to the same queues, where the deterministic job ids dedupe it.
 */
import { Retries } from '../shared/concurrency';
import { ErrorCodes } from '../shared/errors';
import type { Logger } from '../shared/logger';
import type { ExecutionRequest } from '../shared/registry/execution-request';
import { registryPaths } from '../shared/registry/registry-paths';
import { triggerFireTime, triggerRequestCodec, type TriggerRequest } from '../shared/registry/trigger-request';
import { ZkError, type ZkClient } from '../shared/zk';
import { dispatchedItems, reroute, withFireItems } from './dispatch-plan';
import type { FireDispatcher, JobState } from './fire-dispatcher';
import { isDeposed } from './fire-loop';
import type { Clock } from './fire-timer';
import type { JobView } from './job-view';
import type { LeaderElection } from './leader-election';
import type { QueuePool } from './queue-pool';
import type { TaskChain } from './task-chain';

/** What a trigger came to. */
export interface TriggerDispatched {
  job: string;
  requestId: string;
  fireTime: number;
  items: number;
  /** Why it did not run (a disabled job, every item disabled, an unreadable request). */
  refused?: string;
}

export interface TriggerDispatcherDeps {
  zk: ZkClient;
  log: Logger;
  queues: QueuePool;
  dispatcher: FireDispatcher;
  chain: TaskChain;
  jobs: ReadonlyMap<string, JobState>;
  election: LeaderElection;
  clock: Clock;
  onDispatched(event: TriggerDispatched): void;
  /** A trigger's plan landed (see JobRegistry.resharded). */
  resharded(job: string, reshards: number, settled: boolean): void;
}

/** The leader's handling of manual triggers. */
export class TriggerDispatcher {
  private active = false;
  /** Jobs with a trigger that could not run yet (no instance, no config): tried again when their instances change. */
  private readonly waiting = new Set<string>();
  /** Triggers (by request id) whose handling threw, tried again while this process leads. */
  private readonly retries = new Retries(() => this.active);

  constructor(private readonly deps: TriggerDispatcherDeps) {}

  /** Leadership began (every job loaded): handles the triggers already there. */
  begin(): void {
    this.active = true;
    for (const [job, state] of this.deps.jobs) for (const requestId of state.view.triggerRequests()) this.requested(job, requestId);
  }

  end(): void {
    this.active = false;
    this.waiting.clear();
    this.retries.clear();
  }

  /**
   * A trigger node appeared. Its handling is tried again while this process leads when it fails
   * (ZooKeeper or Redis failing under the decision's write or the enqueue): only the node's
   * creation drives it, so it stayed undone until a leader change. A retry reads the node again: a
   * decision that landed enqueues the same requests (deduped by job id), one gone is done.
   */
  requested(job: string, requestId: string): void {
    if (!this.active) return; // begin() finds it
    void this.deps.chain.run(async () => {
      try {
        await this.handle(job, requestId);
        this.retries.succeeded(requestId);
      } catch (err) {
        if (!this.active) throw err;
        const retryInMs = this.retries.failed(requestId, () => this.requested(job, requestId));
        this.deps.log.error({ err, job, requestId, retryInMs }, 'trigger failed; tried again');
      }
    }, `trigger ${requestId} of ${job} failed`);
  }

  /** The job's instances or servers changed: a trigger waiting for an instance may run now. */
  instancesChanged(job: string): void {
    if (!this.active || !this.waiting.delete(job)) return;
    const view = this.deps.jobs.get(job)?.view;
    for (const requestId of view?.triggerRequests() ?? []) this.requested(job, requestId);
  }

  private async handle(job: string, requestId: string): Promise<void> {
    const { zk, election } = this.deps;
    const epoch = election.epoch;
    if (!this.active || !election.isLeader || epoch === undefined) return;
    const path = registryPaths.trigger(job, requestId);
    let request: TriggerRequest;
    let version: number;
    try {
      const { data, stat } = await zk.get(path);
      version = stat.version;
      try {
        request = triggerRequestCodec.decode(data, path);
      } catch (err) {
        this.deps.log.error({ err, job, requestId }, 'unreadable trigger request; dropped');
        return this.finish(job, requestId, path, { fireTime: 0, items: 0, refused: 'unreadable trigger request' });
      }
    } catch (err) {
      if (err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE) return; // handled already
      throw err;
    }
    const state = this.deps.jobs.get(job);
    const config = state?.view.config;
    if (!state || !config) {
      this.waiting.add(job);
      return;
    }
    let requests: Map<string, ExecutionRequest[]>;
    let fireTime: number;
    if (request.dispatch) {
      // A previous leader decided and may have enqueued: the same requests to the same queues.
      fireTime = request.dispatch.fireTime;
      requests = new Map();
      const fireItems = dispatchedItems(request.dispatch.assignment);
      for (const [instanceId, items] of Object.entries(request.dispatch.assignment)) {
        const queue = request.dispatch.queues[instanceId];
        if (!queue) continue;
        requests.set(queue, items.map((item) => withFireItems({ job, item, fireTime, source: 'TRIGGER', epoch: request.dispatch!.epoch }, config.fireListeners, fireItems)));
      }
      this.reroute(state.view, requests, request.dispatch.queues);
    } else {
      if (config.disabled) return this.finish(job, requestId, path, { fireTime: 0, items: 0, refused: 'job disabled' });
      fireTime = triggerFireTime(request.requestedAt);
      const plan = await this.deps.dispatcher.plan(state, fireTime, 'TRIGGER', epoch);
      if (plan === 'disabled') return this.finish(job, requestId, path, { fireTime, items: 0, refused: 'job disabled' });
      if (plan === 'no-enabled-item') return this.finish(job, requestId, path, { fireTime, items: 0, refused: 'every item is disabled' });
      if (typeof plan === 'string') {
        this.deps.log.info({ job, requestId, reason: plan }, 'trigger waits for an instance that can run the job');
        this.waiting.add(job);
        return;
      }
      const dispatch = { fireTime, epoch, source: 'TRIGGER' as const, assignment: plan.ledger.assignment, queues: plan.ledger.queues };
      try {
        // Fenced and versioned: a deposed leader decides nothing, and two decisions cannot both land.
        await zk.fencedMulti(election.fence()).set(path, triggerRequestCodec.encode({ ...request, dispatch }), version).commit();
      } catch (err) {
        if (isDeposed(err) || (err instanceof ZkError && (err.code === ErrorCodes.ZK_BAD_VERSION || err.code === ErrorCodes.ZK_NO_NODE))) return;
        throw err;
      }
      requests = plan.requests;
      if (plan.resharded) this.deps.resharded(job, plan.reshards, plan.held.length === 0);
    }
    await this.deps.queues.enqueue(requests);
    const items = [...requests.values()].reduce((n, list) => n + list.length, 0);
    await this.finish(job, requestId, path, { fireTime, items });
  }

  /** Instances named by a decision that are gone send their items where the job's next fires go. */
  private reroute(view: JobView, requests: Map<string, ExecutionRequest[]>, queues: Readonly<Record<string, string>>): void {
    reroute(requests, queues, (id) => view.instance(id), (items, except) => {
      const targets = view.targetsFor(items, except);
      return new Map([...targets].map(([item, target]) => [item, { queue: target.info.queue }]));
    });
  }

  /** Deletes the request (fenced) and reports what it came to. */
  private async finish(job: string, requestId: string, path: string, outcome: Omit<TriggerDispatched, 'job' | 'requestId'>): Promise<void> {
    try {
      await this.deps.zk.fencedMulti(this.deps.election.fence()).delete(path).commit();
    } catch (err) {
      if (isDeposed(err)) return; // the next leader finds it, with its decision
      if (!(err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE)) throw err;
    }
    if (outcome.refused) this.deps.log.warn({ job, requestId, reason: outcome.refused }, 'trigger refused');
    else this.deps.log.info({ job, requestId, fireTime: outcome.fireTime, items: outcome.items }, 'trigger dispatched');
    this.deps.onDispatched({ job, requestId, ...outcome });
  }
}
