import type { ExecutionRequest, ExecutionSource } from '../shared/registry/execution-request';
import { fireLedgerCodec, type FireLedger } from '../shared/registry/fire-ledger';
import type { JobConfig } from '../shared/config/job-config';
import type { Logger } from '../shared/logger';
import { registryPaths } from '../shared/registry/registry-paths';
import { readItemRuns } from '../shared/registry/item-records';
import { decodeRunningNode } from '../shared/registry/running-node';
import { forEachLimited } from '../shared/concurrency';
import { ErrorCodes } from '../shared/errors';
import { ZkError, type ZkClient } from '../shared/zk';
import { assignmentStillValid, changedItems, planAssignment, sharedAssignment, type Assignment } from '../shared/sharding/assignment';
import { fireRequests } from './dispatch-plan';
import type { Fence } from './leader-election';
import type { JobView } from './job-view';
import { mergeByQueue, type QueuePool } from './queue-pool';

/** The leader's memory of one job between fires. */
export interface JobState {
  view: JobView;
  assignment: Assignment | undefined;
  needsReshard: boolean;
  /**
   * Counts the reshard triggers seen (instances, servers, flag, total). A plan remembers it, and its
   * commit clears `needsReshard` only if no trigger came meanwhile: an instance that registered
   * while a fire was being planned was otherwise left out until the next change (issue 22: one of
   * three processes started together had not joined 9 s later).
   */
  reshards: number;
  /** The items the job's last reshard left on their running instances, and its {@link reshards} then (FirePlan.held). */
  held?: { items: readonly number[]; reshards: number };
  /** Streaming DATAFLOW jobs: whether the leader flagged a pending reshard (`leader/sharding/necessary`, see JobRegistry). */
  streamFlagged?: boolean;
  /** The leader's writes and deletes of that flag, in order. */
  streamFlagOps?: Promise<void>;
  /** Whether the ledger node exists (created once, then only set). */
  ledgerReady: boolean;
  /**
   * Items whose `sharding/{i}/instance` node is known to exist, from the first reshard on: bits of a
   * number while every such item is below {@link OWNER_BITS} (a Set per job cost about 180 bytes,
   * and every job of a 100,000-job leader gets one at its first fire), a Set beyond.
   */
  ownerNodes?: number | Set<number>;
  /** Items whose `sharding/{i}/instance` node could not be written yet; retried with the next fire. */
  unrecorded?: Set<number>;
  /** The job's view has loaded (JobRegistry). */
  loaded: boolean;
  /** The job's takeover work has begun: a job loading while leadership begins is prepared once (JobRegistry). */
  prepared: boolean;
}

/**
 * A job's state as a leader or standby first holds it. Every field a leader sets on most jobs is
 * there from the start: one added later moves the object's fields past its four in-object slots
 * into a property array of their own, about 76 bytes more per job, and the two sets that said
 * "loaded" and "prepared" cost 8 MB at 100,000 jobs (a heap snapshot of the leader-rss tool).
 */
export function newJobState(view: JobView): JobState {
  return { view, assignment: undefined, needsReshard: true, ledgerReady: false, reshards: 0, ownerNodes: undefined, unrecorded: undefined, loaded: false, prepared: false };
}

/** Items below this are bits of {@link JobState.ownerNodes}. */
const OWNER_BITS = 30;

function hasOwnerNode(state: JobState, item: number): boolean {
  const known = state.ownerNodes;
  if (typeof known === 'number') return item < OWNER_BITS && (known & (1 << item)) !== 0;
  return known?.has(item) ?? false;
}

function addOwnerNode(state: JobState, item: number): void {
  const known = state.ownerNodes ?? 0;
  if (typeof known === 'number' && item < OWNER_BITS) {
    state.ownerNodes = known | (1 << item);
    return;
  }
  let set = known;
  if (typeof set === 'number') {
    const bits = set;
    set = new Set();
    for (let i = 0; i < OWNER_BITS; i += 1) if (bits & (1 << i)) set.add(i);
  }
  set.add(item);
  state.ownerNodes = set;
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
  /** Whether the plan computed the assignment anew (a reshard, whether or not items moved). */
  resharded: boolean;
  /**
   * Items still running on instances the strategy does not give them to, kept there by the reshard
   * (a worker that joined gets nothing while they run). While any, the job reshards again at its
   * next fire, reading only their `running` nodes, until they are free.
   */
  held: number[];
  /** The job's {@link JobState.reshards} when the plan was made. */
  reshards: number;
}

/** Why a fire did not dispatch. */
export type SkipReason = 'disabled' | 'no-config' | 'no-eligible-instance' | 'missed' | 'no-enabled-item';

/** A ZooKeeper multi may hold this many ops; keeps each request far below jute.maxbuffer (1 MB). */
const OPS_PER_MULTI = 400;
/** Multis of one tick in flight at once: enough to hide round trips, few enough to keep the garbage young. */
const MULTIS_IN_FLIGHT = 4;
/** Item listings of a layout in flight at once: the ticks' writes share the session's queue with them. */
const LISTINGS_AT_ONCE = 32;

/**
 * Turns due fires into ledgers and execution requests. Planning reads only the caches; the commit
 * is one fenced multi per tick (chunked when huge); the enqueue is one addBulk per queue.
 */
export class FireDispatcher {
  constructor(
    private readonly zk: ZkClient,
    private readonly queues: QueuePool,
    private readonly log: Logger,
    /** Where the item records are (item leases); unset: a `running` node always counts as a run. */
    private readonly namespace?: string,
  ) {}

  /** Builds the plan of one fire, or says why there is none. */
  async plan(state: JobState, fireTime: number, source: ExecutionSource, epoch: number, catchUp = false): Promise<FirePlan | SkipReason> {
    const { view } = state;
    const reshards = state.reshards;
    const config = view.config;
    if (!config) return 'no-config';
    if (config.disabled) return 'disabled';
    const eligible = view.eligibleInstances();
    if (eligible.length === 0) return 'no-eligible-instance';
    const eligibleIds = new Set(eligible.map((i) => i.instanceId));
    let assignment = state.assignment;
    let changed: number[] = [];
    let resharded = false;
    let held: number[] = [];
    const flagged = view.shardingFlagged;
    if (state.needsReshard || flagged || !assignment || !assignmentStillValid(assignment, config.shardingTotalCount, eligibleIds)) {
      // Retrying a reshard held by running items, with no new reason since: only those items can
      // have changed (the others are where the strategy puts them), so only theirs are read.
      const retry = state.held && state.held.reshards === reshards && !flagged ? state.held.items : undefined;
      const planned = planAssignment({
        job: config.name,
        total: config.shardingTotalCount,
        strategy: config.shardingStrategy || 'AVG_ALLOCATION',
        instances: eligible.map((i) => ({ instanceId: i.instanceId, ip: i.info.ip })),
        running: await this.runningItems(state, config, eligibleIds, retry),
      });
      const next = planned.assignment;
      held = planned.held;
      changed = changedItems(assignment, next);
      // Kept as the job's state until its next reshard: one object for equal assignments.
      assignment = sharedAssignment(next);
      resharded = true;
      if (changed.length > 0 || held.length === 0) this.log.info({ job: config.name, assignment, changed, ...(held.length > 0 && { held }) }, 'resharded');
      else this.log.debug({ job: config.name, held }, 'reshard held by running items; tried again at the next fire');
    }
    const { requests, dispatched, queues } = fireRequests({
      job: config.name,
      fireTime,
      source,
      epoch,
      catchUp,
      assignment,
      queueOf: (instanceId) => view.instance(instanceId)!.queue,
      itemDisabled: (item) => view.itemDisabled(item),
      fireListeners: config.fireListeners,
    });
    if (requests.size === 0 && changed.length === 0) return 'no-enabled-item';
    return {
      job: config.name,
      ledger: { fireTime, epoch, source, assignment: dispatched, queues },
      changed,
      assignment,
      clearFlag: flagged && held.length === 0,
      resharded,
      held,
      requests,
      reshards,
    };
  }

  /**
   * Writes the ledgers of every plan in fenced multis (one per tick unless huge). A deposed
   * leader's multi fails on the fence, so it can never overwrite what the new leader decided.
   * This is the only write on a fire's way; the per-item owner nodes follow the enqueue
   * ({@link recordAssignments}).
   */
  async commit(plans: readonly FirePlan[], states: ReadonlyMap<string, JobState>, fence: Fence): Promise<void> {
    await this.ensureLedgerNodes(plans, states);
    // Chunks of jobs, each encoded only when its multi is about to be sent.
    const chunks: FirePlan[][] = [[]];
    let ops = 1;
    for (const plan of plans) {
      const size = plan.clearFlag ? 2 : 1;
      if (ops + size > OPS_PER_MULTI) {
        chunks.push([]);
        ops = 1;
      }
      chunks[chunks.length - 1].push(plan);
      ops += size;
    }
    await forEachLimited(chunks, MULTIS_IN_FLIGHT, async (chunk) => {
      if (chunk.length === 0) return;
      const tx = this.zk.fencedMulti(fence);
      for (const plan of chunk) {
        tx.set(registryPaths.leaderFire(plan.job), fireLedgerCodec.encode(plan.ledger));
        if (plan.clearFlag) tx.delete(registryPaths.leaderShardingNecessary(plan.job));
      }
      await tx.commit();
    });
  }

  /**
   * Writes `sharding/{i}/instance` (who owns item i) for the items a reshard moved. The ledger
   * already holds the assignment, so these nodes only tell operators and tools; they are written
   * after the enqueue, in fenced multis that create what is missing, so a reshard of thousands
   * of items costs a few transactions and no time on the fire's critical path.
   */
  async recordAssignments(plans: readonly FirePlan[], states: ReadonlyMap<string, JobState>, fence: Fence): Promise<void> {
    const writes: Array<{ job: string; item: number; owner: string; state: JobState | undefined }> = [];
    const pending: Array<{ state: JobState; items: Set<number> }> = [];
    for (const plan of plans) {
      const state = states.get(plan.job);
      const items = new Set([...(state?.unrecorded ?? []), ...plan.changed]);
      if (items.size === 0) continue;
      const owners = new Map<number, string>();
      for (const [instanceId, owned] of Object.entries(plan.assignment)) for (const item of owned) owners.set(item, instanceId);
      for (const item of items) if (owners.has(item)) writes.push({ job: plan.job, item, owner: owners.get(item)!, state });
      // Until they are written, they are retried with the job's next fire.
      if (state) {
        state.unrecorded ??= new Set();
        for (const item of items) if (owners.has(item)) state.unrecorded.add(item);
        pending.push({ state, items });
      }
    }
    if (writes.length === 0) return;
    const missing = await this.missingItemNodes(writes.filter((w) => !(w.state && hasOwnerNode(w.state, w.item))));
    let tx = this.zk.fencedMulti(fence);
    let batch: typeof writes = [];
    const flush = async () => {
      if (tx.size > 1) await tx.commit();
      for (const w of batch) if (w.state) addOwnerNode(w.state, w.item);
      tx = this.zk.fencedMulti(fence);
      batch = [];
    };
    for (const w of writes) {
      const path = registryPaths.shardingInstance(w.job, w.item);
      const absent = missing.get(path);
      if (absent === 'item') tx.create(registryPaths.shardingItem(w.job, w.item));
      if (absent) tx.create(path, w.owner);
      else tx.set(path, w.owner);
      batch.push(w);
      if (tx.size >= OPS_PER_MULTI) await flush();
    }
    await flush();
    for (const { state, items } of pending) {
      for (const item of items) state.unrecorded?.delete(item);
      if (state.unrecorded?.size === 0) state.unrecorded = undefined;
    }
  }

  /**
   * Creates the missing `sharding/{i}` nodes of jobs that never fired, or whose item count grew,
   * ahead of their first fire. A worker's lock is a multi that needs the item node: without it
   * every lock of a job's first fire failed, a failed lock took the whole batch of locks with it,
   * and the first fire of 10,000 new items took 11 s where the next ones took 2. Creates from
   * several jobs share a fenced multi; a multi that meets a node created meanwhile (by a worker or
   * by a fire's owner nodes) is done again one node at a time.
   */
  async layOutItems(jobs: ReadonlyArray<{ job: string; total: number }>, fence: Fence): Promise<number> {
    const existing = await this.existingItems(jobs.map((j) => j.job));
    const paths = jobs.flatMap(({ job, total }) =>
      Array.from({ length: total }, (_, item) => item)
        .filter((item) => !existing.get(job)!.has(String(item)))
        .map((item) => registryPaths.shardingItem(job, item)),
    );
    const created = (err: unknown) => {
      if (!(err instanceof ZkError && err.code === ErrorCodes.ZK_NODE_EXISTS)) throw err;
    };
    for (let i = 0; i < paths.length; i += OPS_PER_MULTI) {
      const chunk = paths.slice(i, i + OPS_PER_MULTI);
      const tx = this.zk.fencedMulti(fence);
      for (const path of chunk) tx.create(path);
      await tx.commit().catch(async (err: unknown) => {
        created(err);
        await forEachLimited(chunk, 64, (path) => this.zk.fencedMulti(fence).create(path).commit().then(() => undefined, created));
      });
    }
    return paths.length;
  }

  /** Enqueues the requests of every plan, grouped per queue. */
  async enqueue(plans: readonly FirePlan[]): Promise<void> {
    await this.queues.enqueue(mergeByQueue(plans.map((plan) => plan.requests)));
  }

  /**
   * Items running now on an eligible instance, read from their `running` nodes. Only at a reshard,
   * which keeps such items where they run; one read per item, a bounded number at a time. With item
   * leases a `running` node is held between runs too: the item's record in Redis tells whether its
   * holder runs it now, and an idle lease does not keep the item (its holder lets go when asked).
   * Only the items in `only`, when given (a held reshard's retry).
   */
  private async runningItems(state: JobState, config: JobConfig, eligible: ReadonlySet<string>, only?: readonly number[]): Promise<Map<number, string>> {
    const running = new Map<number, string>();
    // Without monitorExecution no run has a `running` node: nothing to read (a new leader's first
    // fire of each job reshards, and at 100,000 jobs these reads held up its first tick).
    if (!config.monitorExecution) return running;
    const total = config.shardingTotalCount;
    const job = state.view.job;
    await forEachLimited(
      only?.filter((item) => item < total) ?? Array.from({ length: total }, (_, item) => item),
      64,
      async (item) => {
        const data = await this.zk.getText(registryPaths.shardingRunning(job, item));
        const owner = data === undefined ? undefined : decodeRunningNode(data).instanceId;
        if (owner && eligible.has(owner)) running.set(item, owner);
      },
    );
    if (this.namespace === undefined || running.size === 0) return running;
    const records = await readItemRuns(this.queues.connection, this.namespace, job, [...running.keys()]);
    for (const [item, owner] of running) {
      const record = records.get(item);
      if (record?.holder === owner && record.running === undefined) running.delete(item);
    }
    return running;
  }

  /**
   * The item nodes (`sharding/{i}` names) each job has, one children read per job, all in
   * parallel; a job's `sharding` node is created when it has none.
   */
  private async existingItems(jobs: readonly string[]): Promise<Map<string, Set<string>>> {
    const existing = new Map<string, Set<string>>();
    // A bounded number at a time: after a warm takeover this lists the items of every job that has
    // not fired yet (79,000 of 100,000 in bench/tools/takeover.ts), and all of them at once held the
    // first tick's ledger write behind them in the session's queue for 6.8 s.
    await forEachLimited(jobs, LISTINGS_AT_ONCE, async (job) => {
      const names = await this.zk.children(registryPaths.jobSharding(job)).catch((err: unknown) => {
        if (err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE) return [];
        throw err;
      });
      existing.set(job, new Set(names));
    });
    const absentSharding = jobs.filter((job) => existing.get(job)!.size === 0);
    await forEachLimited(absentSharding, LISTINGS_AT_ONCE, (job) => this.zk.ensurePath(registryPaths.jobSharding(job)));
    return existing;
  }

  /**
   * Which `sharding/{i}/instance` nodes do not exist yet: 'node' when only it is missing, 'item'
   * when `sharding/{i}` is missing too. One children read per job and one exists per node, all in
   * parallel; reads are cheap, unlike the failed creates of a mkdirp per node.
   */
  private async missingItemNodes(writes: ReadonlyArray<{ job: string; item: number }>): Promise<Map<string, 'node' | 'item'>> {
    const missing = new Map<string, 'node' | 'item'>();
    const existingItems = await this.existingItems([...new Set(writes.map((w) => w.job))]);
    await Promise.all(
      writes.map(async ({ job, item }) => {
        const path = registryPaths.shardingInstance(job, item);
        if (!existingItems.get(job)!.has(String(item))) missing.set(path, 'item');
        else if (!(await this.zk.exists(path))) missing.set(path, 'node');
      }),
    );
    return missing;
  }

  /** Creates, once per job, the ledger node the commit only `set`s. */
  private async ensureLedgerNodes(plans: readonly FirePlan[], states: ReadonlyMap<string, JobState>): Promise<void> {
    const missing = plans.filter((p) => states.get(p.job)?.ledgerReady === false).map((p) => p.job);
    await forEachLimited(missing, 128, async (job) => {
      const path = registryPaths.leaderFire(job);
      if (!(await this.zk.exists(path))) await this.zk.ensurePath(path);
      const state = states.get(job);
      if (state) state.ledgerReady = true;
    });
  }
}
