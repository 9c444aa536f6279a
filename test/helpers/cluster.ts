/**
 * Several shardcron nodes against one real ZooKeeper and Redis, inside the test process, each with
 * its own ZooKeeper session, plus an execution log collected from every worker.
 */
import pino from 'pino';
import { startNode, type ShardcronNode, type StartNodeOptions } from '../../src/node';
import type { ExecutionEvent } from '../../src/worker/item-executor';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { waitFor } from './services';
import { uniqueNamespace } from './zk';

/** The last lines the nodes logged, printed when a node's close does not end. */
const recentLines = {
  lines: [] as string[],
  write(line: string): void {
    this.lines.push(line);
    if (this.lines.length > 2_000) this.lines.splice(0, 500);
  },
};

/** Logs go to a file when SHARDCRON_TEST_LOG names one, else to the recent lines above. */
const logger = process.env.SHARDCRON_TEST_LOG
  ? pino({ level: 'debug' }, pino.destination(process.env.SHARDCRON_TEST_LOG))
  : pino({ level: 'debug' }, recentLines);

/** Longer than a worker's default shutdown grace (30 s) with its drain. */
const CLOSE_TIMEOUT_MS = 45_000;

export class TestCluster {
  readonly nodes: ShardcronNode[] = [];
  /** Every start and finish, in the order workers reported them. */
  readonly log: ExecutionEvent[] = [];

  constructor(
    private readonly zk: ZooKeeperServer,
    private readonly redis: RedisServer,
    /** Default: a new one; give another cluster's to join it. */
    readonly namespace = uniqueNamespace('cluster'),
  ) {}

  async start(options: StartNodeOptions & { instanceId: string }): Promise<ShardcronNode> {
    const node = await startNode({
      env: {},
      zk: this.zk.connectionString,
      redisUrl: this.redis.url,
      namespace: this.namespace,
      zkSessionTimeoutMs: 2_000,
      ip: '127.0.0.1',
      logger,
      ...options,
    });
    node.worker?.on('item:started', (r) => this.log.push(r));
    node.worker?.on('item:finished', (r) => this.log.push(r));
    this.nodes.push(node);
    return node;
  }

  starts(job?: string): ExecutionEvent[] {
    return this.log.filter((r) => r.event === 'start' && (!job || r.job === job));
  }

  finishes(job?: string): ExecutionEvent[] {
    return this.log.filter((r) => r.event === 'finish' && (!job || r.job === job));
  }

  /** Waits until `count` complete fires of `job` have a fire time after `afterMs`; returns the first `count`. */
  waitForCompleteFires(job: string, items: number, afterMs: number, count: number, timeoutMs = 15_000): Promise<number[]> {
    return waitFor(
      () => {
        const fires = this.completeFires(job, items).filter((f) => f > afterMs);
        return fires.length >= count ? fires.slice(0, count) : undefined;
      },
      { timeoutMs, message: `${count} complete fires of ${job} after ${new Date(afterMs).toISOString()}` },
    );
  }

  /** Fire times (ascending) for which every item in `items` has started. */
  completeFires(job: string, items: number): number[] {
    const byFire = new Map<number, Set<number>>();
    for (const r of this.starts(job)) {
      const set = byFire.get(r.fireTime) ?? new Set<number>();
      set.add(r.item);
      byFire.set(r.fireTime, set);
    }
    return [...byFire].filter(([, set]) => set.size === items).map(([f]) => f).sort((a, b) => a - b);
  }

  /** instanceId -> sorted items started for one fire. */
  placement(job: string, fireTime: number): Record<string, number[]> {
    const out: Record<string, number[]> = {};
    for (const r of this.starts(job)) {
      if (r.fireTime !== fireTime) continue;
      (out[r.instanceId] ??= []).push(r.item);
    }
    for (const items of Object.values(out)) items.sort((a, b) => a - b);
    return out;
  }

  /**
   * Pairs of executions of the same (job, item) whose [start, finish] intervals overlap on two
   * different instances: invariant I1 says there are none.
   */
  overlaps(job: string): Array<[ExecutionEvent, ExecutionEvent]> {
    const intervals: Array<{ start: ExecutionEvent; end: number }> = [];
    const open = new Map<string, ExecutionEvent>();
    for (const r of this.log.filter((x) => x.job === job)) {
      const key = `${r.instanceId}|${r.fireTime}|${r.item}|${r.source}`;
      if (r.event === 'start') open.set(key, r);
      else if (open.has(key)) {
        intervals.push({ start: open.get(key)!, end: r.at });
        open.delete(key);
      }
    }
    for (const start of open.values()) intervals.push({ start, end: Number.POSITIVE_INFINITY });
    const out: Array<[ExecutionEvent, ExecutionEvent]> = [];
    for (let i = 0; i < intervals.length; i += 1) {
      for (let j = i + 1; j < intervals.length; j += 1) {
        const a = intervals[i];
        const b = intervals[j];
        if (a.start.item !== b.start.item || a.start.instanceId === b.start.instanceId) continue;
        if (a.start.at < b.end && b.start.at < a.end) out.push([a.start, b.start]);
      }
    }
    return out;
  }

  /**
   * Closes every node. A node whose close has not ended after {@link CLOSE_TIMEOUT_MS} fails the
   * call with its last log lines, which say what it was waiting for, instead of a bare hook timeout.
   */
  async close(): Promise<void> {
    const began = Date.now();
    const stuck: string[] = [];
    await Promise.allSettled(
      this.nodes.splice(0).reverse().map(async (node) => {
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), CLOSE_TIMEOUT_MS)));
        const ended = await Promise.race([node.close().then(() => 'closed' as const, () => 'closed' as const), late]);
        clearTimeout(timer);
        if (ended === 'late') stuck.push(node.instanceId);
      }),
    );
    if (stuck.length === 0) return;
    const theirs = recentLines.lines.filter((line) => stuck.some((id) => line.includes(`"instanceId":${JSON.stringify(id)}`)));
    // A node's close logs its first step at once (debug): none since `began` means it never got to run.
    const since = theirs.filter((line) => Number(/"time":(\d+)/.exec(line)?.[1] ?? 0) >= began).length;
    throw new Error(`node(s) ${stuck.join(', ')} still closing after ${CLOSE_TIMEOUT_MS} ms, with ${since} line(s) logged since the close began at ${began}; their last log lines:\n${theirs.slice(-60).join('')}`);
  }
}
