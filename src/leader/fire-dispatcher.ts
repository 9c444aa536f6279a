import type { ExecutionRequest, ExecutionSource } from '../shared/execution-request';
import { fireLedgerCodec, type FireLedger } from '../shared/fire-ledger';
import type { Logger } from '../shared/logger';
import { registryPaths } from '../shared/registry-paths';
import type { ZkClient } from '../shared/zk';
import { assignmentStillValid, changedItems, computeAssignment, type Assignment } from './assignment';
import type { Fence } from './leader-election';
import type { JobView } from './job-view';
import type { QueuePool } from './queue-pool';

/** The leader's memory of one job between fires. */
export interface JobState {
  view: JobView;
  assignment: Assignment | undefined;
  needsReshard: boolean;
  /** Whether the ledger and item-instance nodes exist (created once, then only set). */
  nodesReady: Set<string>;
}

/** What one fire of one job will do; built first, committed to ZooKeeper, then enqueued. */
export interface FirePlan {
  job: string;
  ledger: FireLedger;
  /** Items whose owner changed: their `sharding/{i}/instance` nodes are rewritten. */
  changed: number[];
  assignment: Assignment;
  clearFlag: boolean;
  requests: Map<string, ExecutionRequest[]>;
}

/** Why a fire did not dispatch. */
export type SkipReason = 'disabled' | 'no-config' | 'no-eligible-instance' | 'missed' | 'no-enabled-item';

/** A ZooKeeper multi may hold this many ops; keeps each request far below jute.maxbuffer (1 MB). */
const OPS_PER_MULTI = 400;

/**
 * Turns due fires into ledgers and execution requests. Planning reads only the caches; the commit
 * is one fenced multi per tick (chunked when huge); the enqueue is one addBulk per queue.
 */
export class FireDispatcher {
  constructor(
    private readonly zk: ZkClient,
    private readonly queues: QueuePool,
    private readonly log: Logger,
  ) {}

  /** Builds the plan of one fire, or says why there is none. */
  async plan(state: JobState, fireTime: number, source: ExecutionSource, epoch: number): Promise<FirePlan | SkipReason> {
    const { view } = state;
    const config = view.config;
    if (!config) return 'no-config';
    if (config.disabled) return 'disabled';
    const eligible = view.eligibleInstances();
    if (eligible.length === 0) return 'no-eligible-instance';
    const eligibleIds = new Set(eligible.map((i) => i.instanceId));
    let assignment = state.assignment;
    let changed: number[] = [];
    const flagged = view.shardingFlagged;
    if (state.needsReshard || flagged || !assignment || !assignmentStillValid(assignment, config.shardingTotalCount, eligibleIds)) {
      const next = computeAssignment({
        job: config.name,
        total: config.shardingTotalCount,
        strategy: config.shardingStrategy || 'AVG_ALLOCATION',
        instances: eligible.map((i) => ({ instanceId: i.instanceId, ip: i.info.ip })),
        running: await this.runningItems(state, config.shardingTotalCount, eligibleIds),
      });
      changed = changedItems(assignment, next);
      assignment = next;
      this.log.info({ job: config.name, assignment, changed }, 'resharded');
    }
    const requests = new Map<string, ExecutionRequest[]>();
    const dispatched: Record<string, number[]> = {};
    const queues: Record<string, string> = {};
    for (const [instanceId, items] of Object.entries(assignment)) {
      const queue = view.instance(instanceId)!.queue;
      const enabled = items.filter((item) => !view.itemFlags(item).disabled);
      if (enabled.length === 0) continue;
      dispatched[instanceId] = enabled;
      queues[instanceId] = queue;
      const list = requests.get(queue) ?? [];
      for (const item of enabled) list.push({ job: config.name, item, fireTime, source, epoch });
      requests.set(queue, list);
    }
    if (requests.size === 0 && changed.length === 0) return 'no-enabled-item';
    return {
      job: config.name,
      ledger: { fireTime, epoch, source, assignment: dispatched, queues },
      changed,
      assignment,
      clearFlag: flagged,
      requests,
    };
  }

  /**
   * Writes the ledgers (and new assignments) of every plan in fenced multis. A deposed leader's
   * multi fails on the fence, so it can never overwrite what the new leader decided.
   */
  async commit(plans: readonly FirePlan[], states: ReadonlyMap<string, JobState>, fence: Fence): Promise<void> {
    await this.ensureNodes(plans, states);
    let tx = this.zk.fencedMulti(fence);
    for (const plan of plans) {
      tx.set(registryPaths.leaderFire(plan.job), fireLedgerCodec.encode(plan.ledger));
      for (const item of plan.changed) {
        const owner = Object.entries(plan.assignment).find(([, items]) => items.includes(item))?.[0] ?? '';
        tx.set(registryPaths.shardingInstance(plan.job, item), owner);
      }
      if (plan.clearFlag) tx.delete(registryPaths.leaderShardingNecessary(plan.job));
      if (tx.size >= OPS_PER_MULTI) {
        await tx.commit();
        tx = this.zk.fencedMulti(fence);
      }
    }
    if (tx.size > 1) await tx.commit();
  }

  /** Enqueues the requests of every plan, grouped per queue. */
  async enqueue(plans: readonly FirePlan[]): Promise<void> {
    const byQueue = new Map<string, ExecutionRequest[]>();
    for (const plan of plans) {
      for (const [queue, requests] of plan.requests) {
        const list = byQueue.get(queue);
        if (list) list.push(...requests);
        else byQueue.set(queue, [...requests]);
      }
    }
    await this.queues.enqueue(byQueue);
  }

  /** Items running now on an eligible instance, read from their `running` nodes (only at reshard). */
  private async runningItems(state: JobState, total: number, eligible: ReadonlySet<string>): Promise<Map<number, string>> {
    const running = new Map<number, string>();
    const reads: Array<Promise<void>> = [];
    for (let item = 0; item < total; item += 1) {
      if (!state.view.itemFlags(item).running) continue;
      reads.push(
        this.zk.getText(registryPaths.shardingRunning(state.view.job, item)).then((owner) => {
          if (owner && eligible.has(owner)) running.set(item, owner);
        }),
      );
    }
    await Promise.all(reads);
    return running;
  }

  /** Creates, once per job and item, the persistent nodes the multis only `set`. */
  private async ensureNodes(plans: readonly FirePlan[], states: ReadonlyMap<string, JobState>): Promise<void> {
    const missing: string[] = [];
    for (const plan of plans) {
      const ready = states.get(plan.job)?.nodesReady;
      const paths = [registryPaths.leaderFire(plan.job), ...plan.changed.map((i) => registryPaths.shardingInstance(plan.job, i))];
      for (const path of paths) if (!ready?.has(path)) missing.push(path);
    }
    await Promise.all(
      missing.map(async (path) => {
        if (!(await this.zk.exists(path))) await this.zk.ensurePath(path);
      }),
    );
    for (const plan of plans) {
      const ready = states.get(plan.job)?.nodesReady;
      ready?.add(registryPaths.leaderFire(plan.job));
      for (const item of plan.changed) ready?.add(registryPaths.shardingInstance(plan.job, item));
    }
  }
}
