/**
 * Scenario 2, throughput: no-op items per second from the first start to the last finish of one
 * big fire (jobs x items, all due on the same second) over W worker processes, versus raw BullMQ
 * (one addBulk of the same number of jobs, same job options, W worker processes, same concurrency).
 * Both systems run side by side on the same Redis and their rounds alternate, so a change in the
 * machine's background load hits both alike.
 */
import path from 'node:path';
import { Queue } from 'bullmq';
import IORedis from 'ioredis';
import { MAX_DISPATCH_LEAD_MS } from '../../src/leader/leader-service';
import type { BenchContext } from '../lib/context';
import { sleepUntil } from '../lib/measure';
import { jobNames, mergeReports, ProcessGroup, spawnBullmq, spawnShardcron, type BenchProcess } from '../lib/procs';
import { benchZkClient, commandCallsBetween, cronAt, nextWholeSecond, procSample, redisCommandCalls, setCron, startServices, zkCounters, type Services } from '../lib/services';
import { round, sleep, waitUntil } from '../lib/stats';

export interface ThroughputRound {
  items: number;
  /** items / (last finish - first start), per second. */
  perSecond: number;
  /** First start / last finish after the nominal fire time (shardcron) or the addBulk call (BullMQ), ms. */
  firstStartMs: number;
  lastFinishMs: number;
  addBulkMs?: number;
  zkWriteOps?: number;
  zkTxns?: number;
  /** CPU time (utime + stime from /proc) per item during the round, microseconds: less noisy than wall time on a shared box. */
  cpuUsPerItem: { workers: number; leader?: number; redis: number; zookeeper?: number };
  /** RSS of the largest worker process when the round ended, MB. */
  workerRssMb?: number;
  /** Worker 1's memory when the round ended (process.memoryUsage() and V8's heap spaces, MB): what the RSS is made of. */
  workerMemoryMb?: Record<string, number>;
  /**
   * Redis commands per item during the round (INFO commandstats; the bench's own report polling is
   * IPC, not Redis), in all and for the busiest commands.
   */
  redisCallsPerItem?: { total: number; top: Record<string, number> };
}

export interface ThroughputRun {
  system: 'shardcron' | 'bullmq';
  workers: number;
  monitorExecution?: boolean;
  /** false: shardcron without its recent list in Redis (the history's cost is the difference). */
  history?: boolean;
  /** Set for the run of another build (BENCH_BASELINE_CODE): its dist/ path. */
  baseline?: string;
  concurrency: number;
  /** The unmeasured warm-up round; for shardcron the first fire after the workers joined (a reshard). */
  warmup: ThroughputRound;
  rounds: ThroughputRound[];
  /** Median of the rounds' perSecond. */
  perSecond: number;
}

export interface ThroughputResult {
  jobs: number;
  itemsPerJob: number;
  runs: ThroughputRun[];
}

/** One system under test in alternating rounds. */
export interface Contender {
  run: Omit<ThroughputRun, 'warmup' | 'rounds' | 'perSecond'>;
  round(): Promise<ThroughputRound>;
  close(): Promise<void>;
}

const CONCURRENCY = 100;
/** Jobs of every contender (their items vary by mode). */
export const JOBS = 100;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const perSecond = (count: number, spanMs: number) => Math.round((count * 1000) / Math.max(spanMs, 1));


/** CPU seconds of each pid now; call the result after the round for microseconds per item. */
function cpuMeter(pids: Record<string, number[]>): (items: number) => Record<string, number> {
  const read = () => Object.fromEntries(Object.entries(pids).map(([k, list]) => [k, list.reduce((t, pid) => t + procSample(pid).cpuSeconds, 0)]));
  const before = read();
  return (items) => {
    const after = read();
    return Object.fromEntries(Object.keys(pids).map((k) => [k, Math.round(((after[k] - before[k]) * 1e6) / Math.max(items, 1))]));
  };
}

/** Redis calls per item between two readings: in all, and the five busiest commands. */
function callsPerItem(before: Record<string, number>, after: Record<string, number>, items: number): ThroughputRound['redisCallsPerItem'] {
  const per = (n: number) => Math.round((n / Math.max(items, 1)) * 100) / 100;
  const calls = commandCallsBetween(before, after);
  return { total: per(calls.reduce((t, [, n]) => t + n, 0)), top: Object.fromEntries(calls.slice(0, 5).map(([name, n]) => [name, per(n)])) };
}

const workerRss = (procs: readonly BenchProcess[]): number => Math.round(Math.max(...procs.map((p) => procSample(p.pid).rssMb)));
const workerMemory = async (procs: readonly BenchProcess[]): Promise<Record<string, number> | undefined> => (await procs[0].report(0, 1)).memory;

/**
 * BENCH_HEAP_SNAPSHOT=dir: after the second measured round, a full GC of the worker, then a heap
 * snapshot of it (`name.heapsnapshot`): what its live heap is made of.
 */
async function heapSnapshot(proc: BenchProcess, round: number, name: string): Promise<void> {
  const dir = process.env.BENCH_HEAP_SNAPSHOT;
  if (!dir || round !== 3) return;
  await proc.request({ type: 'gc' }, 60_000);
  await proc.request({ type: 'heap-snapshot', file: path.join(dir, `${name}.heapsnapshot`) }, 120_000);
}

/**
 * Profiles a worker over a measured round (no start-up, no warm-up), the same way for shardcron's
 * worker-1 and raw BullMQ's bullmq-1: BENCH_PROFILE=dir, a sampling allocation profile of 3 s
 * (BENCH_PROFILE_PROMOTED=1: only what survived the young generation, what fills the old one);
 * BENCH_CPU_PROFILE=dir, a CPU profile of 3 s.
 */
function profileRound(proc: BenchProcess, name: string): void {
  const dir = process.env.BENCH_PROFILE;
  if (dir) {
    const promoted = process.env.BENCH_PROFILE_PROMOTED === '1';
    void proc.request({ type: 'alloc-profile', ms: 3_000, file: path.join(dir, `${name}.heapprofile`), promoted }, 60_000).catch(() => undefined);
  }
  const cpuDir = process.env.BENCH_CPU_PROFILE;
  if (cpuDir) void proc.request({ type: 'profile', ms: 3_000, file: path.join(cpuDir, `${name}.cpuprofile`) }, 60_000).catch(() => undefined);
}

async function waitFinished(procs: readonly BenchProcess[], from: number, total: number) {
  let last: ReturnType<typeof mergeReports> | undefined;
  try {
    return await waitUntil(async () => {
      last = mergeReports(await Promise.all(procs.map((p) => p.report(from, from + 1))));
      return last.finished >= total ? last : undefined;
    }, 180_000, `${total} items finished`, 100);
  } catch (err) {
    // What the workers reported last: how far the round got, and under which sources.
    const seen = last ? `${last.started} started, ${last.finished} finished, sources ${JSON.stringify(last.sources)}` : 'no report';
    throw new Error(`${(err as Error).message} (${seen})`);
  }
}

/** How a shardcron contender runs: W worker processes of {@link CONCURRENCY} and one leader, {@link JOBS} jobs of `items` items. */
export interface ShardcronSetup {
  workers: number;
  items: number;
  monitorExecution: boolean;
  /** false: no recent list in Redis (SHARDCRON_HISTORY_RECENT=0). */
  history?: boolean;
  /** Another build's dist/ (BENCH_BASELINE_CODE). */
  baseline?: string;
  /** More environment variables for every process of the cluster (scenario `ab`). */
  env?: Record<string, string>;
}

/** A shardcron contender: its processes started and the leader elected; each round is one fire of every job. */
export async function shardcronContender(ctx: BenchContext, services: Services, setup: ShardcronSetup): Promise<Contender> {
  const { workers, items: ITEMS, monitorExecution, history = true, baseline, env } = setup;
  const group = new ProcessGroup();
  const namespace = ctx.unique('tp');
  const base = { zk: services.zk.connectionString, redisUrl: services.redis.url, namespace, ...(env && { env }) };
  const spec = [{ prefix: 'tp', count: JOBS, items: ITEMS, monitorExecution, cron: cronAt(Date.now() + 12 * 3600_000) }];
  const zk = await benchZkClient(services.zk.connectionString, namespace);
  const procs = await Promise.all(
    Array.from({ length: workers }, (_, i) => spawnShardcron(group, { ...base, instanceId: `worker-${i + 1}`, roles: 'worker', concurrency: CONCURRENCY, jobs: spec, history, ...(baseline && { code: baseline }) }, 120_000)),
  );
  const leader = await spawnShardcron(group, { ...base, instanceId: 'leader-1', roles: 'scheduler', ...(baseline && { code: baseline }) });
  await waitUntil(() => leader.events('elected').length > 0, 60_000, 'leader elected');
  let rounds = 0;
  return {
    run: { system: 'shardcron', workers, monitorExecution, history, ...(baseline && { baseline }), concurrency: CONCURRENCY },
    async round() {
      const fire = nextWholeSecond(2_000);
      await setCron(zk, jobNames(spec), cronAt(fire));
      // Before the leader's longest lead: workers take and lock requests ahead of the fire.
      await sleepUntil(fire - MAX_DISPATCH_LEAD_MS - 100);
      const before = await zkCounters(services.zk.port, namespace);
      const redisBefore = await redisCommandCalls(services.redis.port);
      const cpu = cpuMeter({ workers: procs.map((p) => p.pid), leader: [leader.pid], redis: [services.redis.pid!], zookeeper: [services.zk.pid!] });
      rounds += 1;
      if (rounds === 3) profileRound(procs[0], `throughput-${workers}w-${monitorExecution ? 'on' : 'off'}${history ? '' : '-no-history'}-worker-1`);
      const r = await waitFinished(procs, fire, JOBS * ITEMS);
      const c = cpu(r.finished);
      const after = await zkCounters(services.zk.port, namespace);
      await heapSnapshot(procs[0], rounds, `throughput-${workers}w-${monitorExecution ? 'on' : 'off'}${history ? '' : '-no-history'}-worker-1`);
      return {
        workerRssMb: workerRss(procs),
        workerMemoryMb: await workerMemory(procs),
        redisCallsPerItem: callsPerItem(redisBefore, await redisCommandCalls(services.redis.port), r.finished),
        cpuUsPerItem: { workers: c.workers, leader: c.leader, redis: c.redis, zookeeper: c.zookeeper },
        items: r.finished,
        perSecond: perSecond(r.finished, r.lastFinish - r.firstStart),
        firstStartMs: round(r.firstStart - fire),
        lastFinishMs: round(r.lastFinish - fire),
        zkWriteOps: after.writeOps - before.writeOps,
        zkTxns: after.zxid - before.zxid,
      };
    },
    close: async () => {
      await group.close();
      await zk.close();
    },
  };
}

async function bullmq(ctx: BenchContext, services: Services, workers: number, ITEMS: number): Promise<Contender> {
  const group = new ProcessGroup();
  const name = ctx.unique('raw');
  const connection = new IORedis(services.redis.url, { maxRetriesPerRequest: null });
  const queue = new Queue(name, { connection });
  const procs = await Promise.all(
    Array.from({ length: workers }, (_, i) => spawnBullmq(group, { redisUrl: services.redis.url, queue: name, name: `bullmq-${i + 1}`, concurrency: CONCURRENCY })),
  );
  let rounds = 0;
  return {
    run: { system: 'bullmq', workers, concurrency: CONCURRENCY },
    async round() {
      await sleep(500);
      const batch = Date.now();
      // Same payload shape, id scheme and retention options as shardcron's execution requests.
      const jobs = Array.from({ length: JOBS * ITEMS }, (_, i) => ({
        name: 'tp',
        data: { job: `tp${i % JOBS}`, item: i, fireTime: batch, source: 'NORMAL', epoch: 1 },
        opts: { jobId: `tp|${batch}|${i}`, removeOnComplete: true, removeOnFail: { age: 86_400, count: 1_000 } },
      }));
      const redisBefore = await redisCommandCalls(services.redis.port);
      const cpu = cpuMeter({ workers: procs.map((p) => p.pid), producer: [process.pid], redis: [services.redis.pid!] });
      if (rounds === 2) profileRound(procs[0], `throughput-${workers}w-bullmq-1`);
      const t0 = Date.now();
      await queue.addBulk(jobs);
      const addBulkMs = Date.now() - t0;
      const r = await waitFinished(procs, batch, JOBS * ITEMS);
      const c = cpu(r.finished);
      rounds += 1;
      await heapSnapshot(procs[0], rounds, `throughput-${workers}w-bullmq-1`);
      return {
        workerRssMb: workerRss(procs),
        workerMemoryMb: await workerMemory(procs),
        redisCallsPerItem: callsPerItem(redisBefore, await redisCommandCalls(services.redis.port), r.finished),
        // The producer is this runner process (it also polls reports): an upper bound for addBulk's cost.
        cpuUsPerItem: { workers: c.workers, leader: c.producer, redis: c.redis },
        items: r.finished,
        perSecond: perSecond(r.finished, r.lastFinish - r.firstStart),
        firstStartMs: round(r.firstStart - t0),
        lastFinishMs: round(r.lastFinish - t0),
        addBulkMs,
      };
    },
    close: async () => {
      await group.close();
      await queue.close();
      connection.disconnect();
    },
  };
}

/** BENCH_THROUGHPUT_WORKERS=2 (comma-separated) runs those worker counts only; 1, 2 and 4 by default. */
function workerCounts(value: string | undefined): number[] {
  if (value === undefined) return [1, 2, 4];
  const counts = value.split(',').map((part) => Number(part.trim()));
  if (counts.some((n) => !Number.isInteger(n) || n < 1)) {
    throw new Error(`BENCH_THROUGHPUT_WORKERS must be positive whole numbers separated by commas, got ${JSON.stringify(value)}`);
  }
  return counts;
}

export async function runThroughput(ctx: BenchContext): Promise<ThroughputResult> {
  const quick = ctx.mode === 'quick';
  const rounds = quick ? 3 : 7;
  const items = quick ? 100 : 200;
  const runs: ThroughputRun[] = [];
  const counts = workerCounts(process.env.BENCH_THROUGHPUT_WORKERS);
  for (const workers of counts) {
    ctx.log(`throughput: ${workers} worker process(es) per system, ${JOBS} x ${items} no-op items, ${rounds} rounds after a warm-up`);
    const services = await startServices(2_000);
    const shardcron = (monitorExecution: boolean, history = true, baseline?: string) =>
      shardcronContender(ctx, services, { workers, items, monitorExecution, history, ...(baseline && { baseline }) });
    const contenders: Contender[] = [];
    try {
      contenders.push(await bullmq(ctx, services, workers, items), await shardcron(false));
      if (!quick || workers === 2) contenders.push(await shardcron(true));
      // What the recent list in Redis costs: the same workers with it and without it, side by side.
      if (workers === 2) contenders.push(await shardcron(false, false));
      // BENCH_BASELINE_CODE=/abs/dist: the same workload on another build (e.g. the commit before a change), same rounds.
      const baseline = process.env.BENCH_BASELINE_CODE;
      if (baseline && workers === 2) contenders.push(await shardcron(false, true, baseline));
      const results = contenders.map(() => [] as ThroughputRound[]);
      for (let k = 0; k <= rounds; k += 1) {
        for (const [i, c] of contenders.entries()) {
          const r = await c.round();
          results[i].push(r);
          const label = c.run.system === 'bullmq' ? 'BullMQ' : `shardcron monitorExecution=${c.run.monitorExecution ? 'on' : 'off'}${c.run.history === false ? ' history=off' : ''}${c.run.baseline ? ` (baseline ${c.run.baseline})` : ''}`;
          ctx.log(`  ${label} round ${k}${k === 0 ? ' (warm-up)' : ''}: ${r.perSecond}/s, first start +${r.firstStartMs} ms, last finish +${r.lastFinishMs} ms` +
            (r.addBulkMs === undefined ? `, ZK writes ${r.zkWriteOps}` : `, addBulk ${r.addBulkMs} ms`));
        }
      }
      for (const [i, c] of contenders.entries()) {
        const [warmup, ...measured] = results[i];
        runs.push({ ...c.run, warmup, rounds: measured, perSecond: median(measured.map((m) => m.perSecond)) });
      }
    } finally {
      for (const c of contenders) await c.close();
      await services.close();
    }
  }
  return { jobs: JOBS, itemsPerJob: items, runs };
}
