/**
 * Scenario 3, worker failover: kill -9 a worker process while it runs items of a failover job and
 * time each item's FAILOVER start on the survivor from the kill. Peer: BullMQ's stalled-job
 * recovery with default settings (kill -9 the worker running a job; time until another one starts it).
 */
import { Queue } from 'bullmq';
import IORedis from 'ioredis';
import type { BenchContext } from '../lib/context';
import { ProcessGroup, spawnBullmq, spawnShardcron, type BenchMessage, type BenchProcess } from '../lib/procs';
import { benchZkClient, cronAt, nextWholeSecond, setCron, startServices, type Services } from '../lib/services';
import { round, sleep, waitUntil } from '../lib/stats';

export interface WorkerFailoverRun {
  sessionTimeoutMs: number;
  /** Items the killed worker was running. */
  items: number[];
  /** FAILOVER start on the survivor minus kill time, per item (ms). */
  restartMs: number[];
  maxMs: number;
  /** When the leader re-dispatched them (its item:failover event), minus kill time. */
  movedMs: number;
}

export interface StallRun {
  /** Start on the other worker minus kill time (ms). */
  recoveryMs: number;
}

export interface FailoverResult {
  shardcron: WorkerFailoverRun[];
  bullmq: StallRun[];
}

const ITEMS = 4;
const starts = (p: BenchProcess, source?: string) => p.events('start').filter((m) => !source || m.source === source);

async function shardcronRun(ctx: BenchContext, services: Services, sessionTimeoutMs: number): Promise<WorkerFailoverRun> {
  const group = new ProcessGroup();
  const namespace = ctx.unique('fo');
  const base = { zk: services.zk.connectionString, redisUrl: services.redis.url, namespace, sessionTimeoutMs };
  const spec = [{ prefix: 'fo', count: 1, items: ITEMS, failover: true, sleepMs: 600_000, cron: cronAt(Date.now() + 12 * 3600_000) }];
  const zk = await benchZkClient(services.zk.connectionString, namespace);
  try {
    const [a, b] = await Promise.all(
      ['worker-a', 'worker-b'].map((id) => spawnShardcron(group, { ...base, instanceId: id, roles: 'worker', concurrency: 10, jobs: spec, events: ['start'] })),
    );
    const leader = await spawnShardcron(group, { ...base, instanceId: 'leader-1', roles: 'scheduler' });
    await waitUntil(() => leader.events('elected').length > 0, 30_000, 'leader elected');
    await setCron(zk, ['fo0'], cronAt(nextWholeSecond(2_000)));
    await waitUntil(() => starts(a).length + starts(b).length >= ITEMS, 30_000, 'all items started');
    const victim = starts(a).length > 0 ? a : b;
    const survivor = victim === a ? b : a;
    const items = starts(victim).map((m) => m.item as number).sort((x, y) => x - y);
    await sleep(500);
    const killedAt = victim.kill('SIGKILL');
    const restarted = (item: number): BenchMessage | undefined => starts(survivor, 'FAILOVER').find((m) => m.item === item);
    await waitUntil(() => items.every((i) => restarted(i)), sessionTimeoutMs + 30_000, 'failover starts');
    const restartMs = items.map((i) => round((restarted(i)!.at as number) - killedAt));
    const moved = leader.events('failover').map((m) => m.at as number);
    return { sessionTimeoutMs, items, restartMs, maxMs: Math.max(...restartMs), movedMs: round(Math.min(...moved) - killedAt) };
  } finally {
    await group.close();
    await zk.close();
  }
}

async function bullmqRun(ctx: BenchContext, services: Services): Promise<StallRun> {
  const group = new ProcessGroup();
  const name = ctx.unique('stall');
  const connection = new IORedis(services.redis.url, { maxRetriesPerRequest: null });
  const queue = new Queue(name, { connection });
  try {
    const procs = await Promise.all(
      ['bullmq-a', 'bullmq-b'].map((id) => spawnBullmq(group, { redisUrl: services.redis.url, queue: name, name: id, concurrency: 1, sleepMs: 600_000, events: ['start'] })),
    );
    await queue.add('long', { fireTime: Date.now() });
    const victim = await waitUntil(() => procs.find((p) => p.events('start').length > 0), 30_000, 'BullMQ job started');
    const survivor = procs.find((p) => p !== victim)!;
    await sleep(500);
    const killedAt = victim.kill('SIGKILL');
    const start = await waitUntil(() => survivor.events('start')[0], 180_000, 'BullMQ stalled job picked up');
    return { recoveryMs: round((start.at as number) - killedAt) };
  } finally {
    await group.close();
    await queue.close();
    connection.disconnect();
  }
}

export async function runFailover(ctx: BenchContext): Promise<FailoverResult> {
  const quick = ctx.mode === 'quick';
  const services = await startServices(200);
  try {
    const shardcron: WorkerFailoverRun[] = [];
    for (const timeout of quick ? [2_000, 4_000] : [2_000, 4_000, 10_000]) {
      ctx.log(`failover: worker kill -9, session timeout ${timeout} ms`);
      const run = await shardcronRun(ctx, services, timeout);
      ctx.log(`  restarted after ${run.restartMs.join(', ')} ms (leader moved them at +${run.movedMs} ms)`);
      shardcron.push(run);
    }
    const bullmq: StallRun[] = [];
    for (let i = 0; i < (quick ? 1 : 3); i += 1) {
      ctx.log('failover: BullMQ worker kill -9, default stalled-job settings');
      const run = await bullmqRun(ctx, services);
      ctx.log(`  picked up after ${run.recoveryMs} ms`);
      bullmq.push(run);
    }
    return { shardcron, bullmq };
  } finally {
    await services.close();
  }
}
