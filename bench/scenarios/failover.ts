/**
 * Scenario 3, worker failover: kill -9 a worker process while it runs items of a failover job and
 * time each item's FAILOVER start on the survivor from the kill. Peer: BullMQ's stalled-job
 * recovery with default settings (kill -9 the worker running a job; time until another one starts it).
 *
 * Also issue 22's shape, which the first one did not show: three processes with both roles, a
 * ZooKeeper ticking every 500 ms, 2 s sessions, 9 items every second (400 ms each), kill -9 a process
 * while it runs items, once with the leader surviving and once with the leader dying with the worker.
 * A one-shot job leaves nothing stranded behind the items in flight; an every-second job leaves the
 * fires enqueued on the dead instance before its session expired, and those must not go first.
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

/** One run of the 3-node shape. */
export interface ShapeFailoverRun {
  leaderDies: boolean;
  /** Restart of each item the killed process was running, minus kill time (ms). */
  inFlightMs: number[];
  /** Per (fire, item) of the fires from the kill on, first start - max(kill, fire time), the largest (ms). */
  maxLatenessMs: number;
  /** (fire, item) pairs from the kill to 5 s after it that never started. */
  lost: number;
}

export interface FailoverResult {
  shardcron: WorkerFailoverRun[];
  shapes?: ShapeFailoverRun[];
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

const SHAPE_ITEMS = 9;

async function shapeRun(ctx: BenchContext, services: Services, leaderDies: boolean): Promise<ShapeFailoverRun> {
  const group = new ProcessGroup();
  const namespace = ctx.unique('shape');
  const spec = [{ prefix: 'nine', count: 1, items: SHAPE_ITEMS, failover: true, misfire: false, sleepMs: 400, cron: '* * * * * ?' }];
  try {
    const nodes = await Promise.all(
      ['node-1', 'node-2', 'node-3'].map((id) =>
        spawnShardcron(group, { zk: services.zk.connectionString, redisUrl: services.redis.url, namespace, sessionTimeoutMs: 2_000, instanceId: id, roles: 'scheduler,worker', jobs: spec, events: ['start'] }),
      ),
    );
    const all = () => nodes.flatMap((n) => starts(n).map((m): BenchMessage & { node: string } => ({ ...m, node: n.name })));
    await waitUntil(() => new Set(all().filter((m) => m.source === 'NORMAL').map((m) => m.node)).size === 3, 30_000, 'all three nodes run items');
    const leader = nodes.find((n) => n.events('elected').length > 0)!;
    const victim = leaderDies ? leader : nodes.find((n) => n !== leader)!;
    // 100 ms after a fire: the victim runs its items of that fire (400 ms each).
    const fire = nextWholeSecond(500);
    await sleep(fire + 100 - Date.now());
    const inFlight = starts(victim).filter((m) => m.fireTime === fire).map((m) => m.item as number);
    const killedAt = victim.kill('SIGKILL');
    await sleep(8_000);
    const first = new Map<string, number>();
    for (const m of all()) {
      if (m.node === victim.name) continue;
      const key = `${m.fireTime as number}|${m.item as number}`;
      first.set(key, Math.min(first.get(key) ?? Number.POSITIVE_INFINITY, m.at as number));
    }
    let lost = 0;
    let maxLatenessMs = 0;
    for (let f = fire + 1_000; f <= killedAt + 5_000; f += 1_000) {
      for (let item = 0; item < SHAPE_ITEMS; item += 1) {
        const at = first.get(`${f}|${item}`);
        if (at === undefined) lost += 1;
        else maxLatenessMs = Math.max(maxLatenessMs, at - Math.max(killedAt, f));
      }
    }
    const inFlightMs = inFlight.map((item) => round((first.get(`${fire}|${item}`) ?? Number.NaN) - killedAt));
    for (const ms of inFlightMs) maxLatenessMs = Math.max(maxLatenessMs, ms);
    return { leaderDies, inFlightMs, maxLatenessMs: round(maxLatenessMs), lost };
  } finally {
    await group.close();
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
  const shardcron: WorkerFailoverRun[] = [];
  const bullmq: StallRun[] = [];
  const services = await startServices(200);
  try {
    for (const timeout of quick ? [2_000, 4_000] : [2_000, 4_000, 10_000]) {
      ctx.log(`failover: worker kill -9, session timeout ${timeout} ms`);
      const run = await shardcronRun(ctx, services, timeout);
      ctx.log(`  restarted after ${run.restartMs.join(', ')} ms (leader moved them at +${run.movedMs} ms)`);
      shardcron.push(run);
    }
    for (let i = 0; i < (quick ? 1 : 3); i += 1) {
      ctx.log('failover: BullMQ worker kill -9, default stalled-job settings');
      const run = await bullmqRun(ctx, services);
      ctx.log(`  picked up after ${run.recoveryMs} ms`);
      bullmq.push(run);
    }
  } finally {
    await services.close();
  }
  // Issue 22's shape runs on a ZooKeeper of its own, ticking every 500 ms as in the report.
  const shapes: ShapeFailoverRun[] = [];
  const shapeServices = await startServices(500);
  try {
    for (const leaderDies of [false, true]) {
      for (let i = 0; i < (quick ? 1 : 3); i += 1) {
        ctx.log(`failover: 3 nodes with both roles, kill -9 ${leaderDies ? 'the leader' : 'a node that is not the leader'}`);
        const run = await shapeRun(ctx, shapeServices, leaderDies);
        ctx.log(`  in-flight items restarted after ${run.inFlightMs.join(', ')} ms; latest item ${run.maxLatenessMs} ms late; ${run.lost} lost`);
        shapes.push(run);
      }
    }
  } finally {
    await shapeServices.close();
  }
  return { shardcron, shapes, bullmq };
}
