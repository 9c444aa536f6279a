/**
 * Scenario 5, scale: N one-item jobs firing every second (monitorExecution off) on one leader
 * process. Measures the leader's RSS and CPU (from /proc), ZooKeeper transactions (zxid delta) and
 * write ops (mntr per-namespace write counter) per dispatched job-fire, the dispatch rate the leader
 * sustains, dispatch lag and fire-to-start latency.
 */
import path from 'node:path';
import type { BenchContext } from '../lib/context';
import { measureWindow, sleepUntil, type WindowResult } from '../lib/measure';
import { ProcessGroup, spawnShardcron, type BenchProcess } from '../lib/procs';
import { procSample, startServices, zkCounters, zkFootprint, type ProcSample, type ZkCounters, type ZkFootprint } from '../lib/services';
import { findQueues, queueStages, type Stages } from '../lib/stages';
import { round, summarize, waitUntil, type Summary } from '../lib/stats';
import { QUEUE_PREFIX } from '../../src/shared/registry/queue-names';

export interface ScaleResult {
  jobs: number;
  workers: number;
  concurrency: number;
  /** Worker processes started until ready (each writes every job's config, server and instance nodes), ms. */
  registrationMs: number;
  /** Leader process ready until elected with every job view loaded and the timer armed, ms. */
  leaderLoadMs: number;
  /** The first fire after the leader took over: dispatch time minus nominal time (creates the ledger and item nodes), ms. */
  firstFireDispatchMs: number;
  leaderRssMb: { start: number; max: number; end: number };
  /** V8 heap still in use after a full GC at the end of the window (what the job views cost). */
  leaderLiveHeapMb: number;
  /** process.memoryUsage() and V8 heap space sizes (MB) at the window's RSS peak and after the full GC. */
  leaderMemoryMb: { peak: Record<string, number>; afterGc: Record<string, number> };
  /** Leader CPU seconds per wall second over the window. */
  leaderCpuPerSecond: number;
  /** Job-fires the leader dispatched per second over the window (needed: jobs). */
  dispatchedPerSecond: number;
  zkTxnsPerDispatchedJobFire: number;
  /** ZooKeeper write ops per dispatched job-fire (one per job per fire is the target). */
  zkWritesPerJobPerFire: number;
  zkWriteOpsPerSecond: number;
  dispatchLag: Summary;
  /** The ZooKeeper server at the end of the window: znodes, their data, its RSS and heap in use. */
  zookeeper?: ZkFootprint;
  /** From the newest 20,000 completed requests per queue that belong to the window. */
  stages: Stages;
  window: WindowResult;
}

const MID_SECOND = 600;

interface Point {
  zk: ZkCounters;
  proc: ProcSample;
  dispatched: number;
  memory: Record<string, number>;
}

async function point(port: number, namespace: string, leader: BenchProcess): Promise<Point> {
  const [zk, report] = await Promise.all([zkCounters(port, namespace), leader.report(0, 1)]);
  return { zk, proc: procSample(leader.pid), dispatched: report.dispatchedTotal, memory: report.memory ?? {} };
}

/** Quick: 2,000 jobs. Full: 2,000 (what this box sustains) and 10,000 (the target size). */
export async function runScaleAll(ctx: BenchContext): Promise<ScaleResult[]> {
  const out: ScaleResult[] = [];
  // BENCH_SCALE_JOBS=10000 (comma-separated sizes) measures only those sizes.
  const sizes = process.env.BENCH_SCALE_JOBS ? process.env.BENCH_SCALE_JOBS.split(',').map(Number) : ctx.mode === 'quick' ? [2_000] : [2_000, 10_000];
  for (const jobs of sizes) out.push(await runScale(ctx, jobs));
  return out;
}

export async function runScale(ctx: BenchContext, jobs: number): Promise<ScaleResult> {
  const seconds = ctx.mode === 'quick' ? 10 : 30;
  const workers = 2;
  const concurrency = 200;
  const services = await startServices(2_000);
  const group = new ProcessGroup();
  const namespace = ctx.unique('scale');
  const base = { zk: services.zk.connectionString, redisUrl: services.redis.url, namespace };
  const spec = [{ prefix: 's', count: jobs, items: 1, monitorExecution: false, cron: '* * * * * ?' }];
  try {
    ctx.log(`scale: ${jobs} jobs x 1 item every second; ${workers} workers registering`);
    const t0 = Date.now();
    const procs = await Promise.all(
      Array.from({ length: workers }, (_, i) => spawnShardcron(group, { ...base, instanceId: `worker-${i + 1}`, roles: 'worker', concurrency, jobs: spec }, 900_000)),
    );
    const registrationMs = Date.now() - t0;
    const leader = await spawnShardcron(group, { ...base, instanceId: 'leader-1', roles: 'scheduler' }, 900_000);
    const ready = Date.now();
    const elected = await waitUntil(() => leader.events('elected')[0], 900_000, 'leader elected', 100);
    const leaderLoadMs = Math.round((elected.at as number) - ready);
    const firstFire = Math.ceil((elected.at as number) / 1000) * 1000;
    const first = await waitUntil(async () => {
      const r = await leader.report(firstFire, firstFire + 1);
      return r.dispatchLag.length > 0 ? r : undefined;
    }, 900_000, 'first fire dispatched', 250);
    const firstFireDispatchMs = Math.round(Math.max(...first.dispatchLag));
    ctx.log(`  registration ${registrationMs} ms, leader load ${leaderLoadMs} ms, first fire dispatched +${firstFireDispatchMs} ms; measuring ${seconds} s`);
    const points: Point[] = [];
    const dir = process.env.BENCH_PROFILE;
    const window = await measureWindow(procs, {
      seconds,
      perFire: jobs,
      warmupMs: 5_000,
      drainMs: 20_000,
      // Sampled mid-second (after that second's tick), so `seconds` fires fall between first and last.
      during: async (from, to) => {
        for (let t = from; t <= to; t += 1000) {
          await sleepUntil(t + MID_SECOND);
          points.push(await point(services.zk.port, namespace, leader));
          // BENCH_PROFILE=dir: a CPU and an allocation profile of the leader over the window (steady state only).
          if (t === from && dir) {
            const ms = (seconds - 1) * 1000;
            void leader.request({ type: 'profile', ms, file: path.join(dir, `scale-leader-${jobs}.cpuprofile`) }, ms + 60_000).catch(() => undefined);
            // BENCH_PROFILE_PROMOTED=1: the allocation profile keeps only what reached the old generation.
            const promoted = process.env.BENCH_PROFILE_PROMOTED === '1';
            void leader.request({ type: 'alloc-profile', ms, promoted, file: path.join(dir, `scale-leader-${jobs}.heapprofile`) }, ms + 60_000).catch(() => undefined);
          }
        }
      },
    });
    const a = points[0];
    const b = points[points.length - 1];
    const wallS = (b.proc.at - a.proc.at) / 1000;
    const dispatched = Math.max(1, b.dispatched - a.dispatched);
    const lead = await leader.report(window.from, window.to);
    if (dir) await leader.request({ type: 'heap-snapshot', file: path.join(dir, `scale-leader-${jobs}.heapsnapshot`) }, 300_000);
    const live = await leader.request<{ heapMb: number; memory: Record<string, number> }>({ type: 'gc' });
    const peak = points.reduce((p, q) => (q.proc.rssMb > p.proc.rssMb ? q : p));
    ctx.log(`  leader memory (MB) at the RSS peak: ${JSON.stringify(peak.memory)}; after a full GC: ${JSON.stringify(live.memory)}`);
    const zookeeper = await zkFootprint(services.zk.port, services.zk.pid!);
    ctx.log(`  ZooKeeper: ${zookeeper.znodes} znodes, ${round(zookeeper.dataMb)} MB of data, RSS ${round(zookeeper.rssMb)} MB, heap in use ${zookeeper.heapUsedMb === undefined ? 'n/a' : `${round(zookeeper.heapUsedMb)} MB`}`);
    const queues = await findQueues(services.redis.url, QUEUE_PREFIX, `${namespace}.`);
    const stages = await queueStages(services.redis.url, queues, QUEUE_PREFIX, window, (job) => (job.data as { fireTime: number }).fireTime, true, 20_000);
    return {
      jobs,
      workers,
      concurrency,
      registrationMs,
      leaderLoadMs,
      firstFireDispatchMs,
      leaderRssMb: { start: round(a.proc.rssMb), max: round(Math.max(...points.map((p) => p.proc.rssMb))), end: round(b.proc.rssMb) },
      leaderLiveHeapMb: round(live.heapMb),
      leaderMemoryMb: { peak: peak.memory, afterGc: live.memory },
      leaderCpuPerSecond: round((b.proc.cpuSeconds - a.proc.cpuSeconds) / wallS, 3),
      dispatchedPerSecond: round(dispatched / wallS),
      zkTxnsPerDispatchedJobFire: round((b.zk.zxid - a.zk.zxid) / dispatched, 4),
      zkWritesPerJobPerFire: round((b.zk.writeOps - a.zk.writeOps) / dispatched, 3),
      zkWriteOpsPerSecond: round((b.zk.writeOps - a.zk.writeOps) / wallS),
      dispatchLag: summarize(lead.dispatchLag),
      zookeeper,
      stages,
      window,
    };
  } finally {
    await group.close();
    await services.close();
  }
}
