/**
 * Requests Redis acknowledged and then lost. Replication from a Redis primary to its replicas is
 * asynchronous: when the primary dies, the writes it acknowledged but had not yet sent are gone from
 * the promoted replica. For the leader those are the requests of its last enqueues. Its ledger does
 * not cover them: a new leader replays ledgers, but the Redis failover changes no leader, and by then
 * the ledger may name a later fire than the lost one.
 *
 * So the leader remembers what it enqueued in the last {@link RECONCILE_WINDOW_MS} and, each time
 * its Redis connection is ready again after a loss (a Sentinel promotion, a managed Redis failover,
 * a plain reconnect), enqueues again those that Redis no longer has. This is the only place that
 * does it: the boundary is {@link QueuePool}'s enqueue path, which records, and this class, which
 * re-adds; nothing else in the leader knows about it (docs/deployment.md, "What a Redis failover can lose").
 */
import { Cluster } from 'ioredis';
import type { Logger } from '../shared/logger';
import { executionJobId, type ExecutionRequest } from '../shared/registry/execution-request';
import type { QueuePool } from './queue-pool';
import type { TaskChain } from './task-chain';

export { MAX_REMEMBERED, RECONCILE_WINDOW_MS, RecentEnqueues } from './recent-enqueues';

/** EXISTS commands per pipeline. */
const CHECK_CHUNK = 1_000;

/** What one reconcile found: requests remembered, and those Redis had lost (enqueued again). */
export interface ReconcileResult {
  requests: number;
  missing: number;
  /** The lost ones: `job|fireTime|item` (their BullMQ ids). */
  ids: string[];
}

export interface RedisReconcileDeps {
  queues: QueuePool;
  chain: TaskChain;
  isLeader(): boolean;
  /** Queues of the instances that take requests now; a queue moved or gone meanwhile gets nothing back. */
  liveQueues(): ReadonlySet<string>;
  log: Logger;
  onReconciled(result: ReconcileResult): void;
}

/**
 * Re-adds, after each loss of the leader's Redis connection, the remembered requests Redis lost.
 * A `Redis` client (one endpoint, Sentinel) reports a loss as `close` and its end as `ready`. A
 * `Cluster` client stays up while one shard fails over; it drops the failed node from its pool
 * (`-node`), and the reconcile's commands then wait for the shard's new primary.
 */
export class RedisReconcile {
  private lost = false;
  /** A reconcile is queued on the chain and has not started: more losses meanwhile need no other. */
  private queued = false;
  private readonly onLoss = () => (this.lost = true);
  /** The dataset the connection last reached ({@link datasetNow}); undefined before the first or on a Cluster. */
  private dataset: string | undefined;
  private readonly onReady = () => {
    if (!this.lost) return this.rememberFirstDataset();
    this.lost = false;
    this.schedule();
  };
  private readonly onNodeDropped = () => this.schedule();

  constructor(private readonly deps: RedisReconcileDeps) {}

  start(): void {
    const connection = this.deps.queues.connection;
    if (connection.status === 'ready') this.rememberFirstDataset();
    connection.on('close', this.onLoss);
    connection.on('ready', this.onReady);
    if (connection instanceof Cluster) connection.on('-node', this.onNodeDropped);
  }

  close(): void {
    const connection = this.deps.queues.connection;
    connection.off('close', this.onLoss);
    connection.off('ready', this.onReady);
    connection.off('-node', this.onNodeDropped);
  }

  private schedule(): void {
    if (this.queued) return;
    this.queued = true;
    // On the chain: after the enqueues that waited for the reconnect, and never beside a queue move.
    void this.deps.chain.run(async () => {
      this.queued = false;
      await this.reconcile();
    }, 'reconcile after a Redis reconnect failed');
  }

  /** The dataset of the first connection, which a reconnect is compared with. */
  private rememberFirstDataset(): void {
    void this.datasetNow().then((d) => (this.dataset ??= d));
  }

  /**
   * Which dataset the connection reaches now: the server process (`run_id`) and its replication
   * history (`master_replid`, new when a replica is promoted or a server resyncs from another). While
   * both stay the same the server kept every write it acknowledged. Undefined on a Cluster (the
   * client reports a shard's failover as a dropped node instead) or when INFO cannot be read.
   */
  private async datasetNow(): Promise<string | undefined> {
    const connection = this.deps.queues.connection;
    if (connection instanceof Cluster) return undefined;
    try {
      const info = await connection.info();
      const runId = /^run_id:(\w+)/m.exec(info)?.[1];
      const replId = /^master_replid:(\w+)/m.exec(info)?.[1];
      return runId && replId ? `${runId}/${replId}` : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * Enqueues again the remembered requests of live queues whose BullMQ job is gone, unless the
   * connection came back to the same dataset (a plain reconnect: nothing was lost). The existence
   * check only spares writes: the add is idempotent by job id while a request waits or runs (BullMQ
   * ignores an id it has), and a request that ran, whose job went when it completed, reaches the
   * worker that ran it again, which skips it (queue-pool.ts).
   */
  async reconcile(): Promise<ReconcileResult> {
    const result: ReconcileResult = { requests: 0, missing: 0, ids: [] };
    if (!this.deps.isLeader()) return result;
    const dataset = await this.datasetNow();
    const before = this.dataset;
    if (dataset !== undefined) this.dataset = dataset;
    if (dataset !== undefined && dataset === before) {
      this.deps.log.info({ dataset }, 'Redis reconnected to the same server and dataset; it lost nothing');
      this.deps.onReconciled(result);
      return result;
    }
    const live = this.deps.liveQueues();
    const lost = new Map<string, ExecutionRequest[]>();
    for (const [name, requests] of this.deps.queues.recent.byQueue()) {
      if (!live.has(name)) continue;
      result.requests += requests.length;
      const queue = this.deps.queues.get(name);
      for (let i = 0; i < requests.length; i += CHECK_CHUNK) {
        const chunk = requests.slice(i, i + CHECK_CHUNK);
        const pipeline = this.deps.queues.connection.pipeline();
        for (const request of chunk) pipeline.exists(queue.toKey(executionJobId(request)));
        const replies = (await pipeline.exec()) ?? [];
        chunk.forEach((request, j) => {
          const [err, count] = replies[j] ?? [null, 1];
          if (err || count !== 0) return;
          // Late by now: owed work, like a replayed ledger's (ExecutionRequest.catchUp).
          lost.set(name, [...(lost.get(name) ?? []), { ...request, catchUp: true }]);
          result.ids.push(executionJobId(request));
        });
      }
    }
    result.missing = result.ids.length;
    if (result.missing > 0) {
      await this.deps.queues.enqueue(lost);
      this.deps.log.warn({ requests: result.requests, missing: result.missing, ids: result.ids.slice(0, 20) }, 'Redis lost requests it had acknowledged (a failover?); enqueued them again');
    } else {
      this.deps.log.info({ requests: result.requests }, 'Redis reconnected; it lost none of the requests enqueued lately');
    }
    this.deps.onReconciled(result);
    return result;
  }
}
