/**
 * What a leader of N jobs holds in memory, as its own process:
 * `N=100000 MIX=issue23 npx tsx bench/tools/leader-rss.ts [DIST]` (`npm run build` first).
 * Starts its own ZooKeeper and Redis, registers N jobs through WORKERS worker processes (default 1;
 * bench/lib/job-mix.ts, with its MIX and STRATEGY; each runs every job), then spawns a scheduler-only process on DIST (default: this checkout's dist/) and samples
 * it every 5 s for WATCH_S seconds after `leader:elected` (default 60): RSS, V8 heap total and used,
 * external and array buffers, and counts its garbage collections. At the end it asks the leader for a full GC and prints the live heap.
 * The workers time their every-second jobs' starts from their fire times, for the fires due from
 * LATENCY_FROM_S seconds after the election (default 30: a first leader catches up the fires that
 * came due while it loaded, up to 2 session timeouts of them one by one) to the end of the watch:
 * p50, p99, max, and the p99 of the fires in the first 3 s of each minute, when the every-minute
 * jobs fire too, and for the latest fires when the leader had enqueued them (job s0's `fire:dispatched`
 * from its fire time). For the first 6 s of each minute it then reads the completed requests back
 * from Redis (bench/lib/stages.ts): when the leader began their enqueue and when a worker took them,
 * over the 6 s and fire by fire, next to the fire's starts.
 * Last, ZooKeeper's znodes, data, RSS and heap in use. HEAP_SNAPSHOT=file.heapsnapshot writes the leader's heap at the end.
 * LEADER_NODE_ARGS (e.g. "--max-semi-space-size=4") and LEADER_ENV (e.g. "MALLOC_ARENA_MAX=2") are
 * passed to the leader's process, WORKER_NODE_ARGS and WORKER_ENV to the workers', to compare
 * settings in one session.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { askStarts, countStartLatency, envAssignments, everyMinuteJobs, everySecondJobs, spawnRegisteringWorker, startLatency } from '../lib/job-mix';
import { busiestCommands, procSample, redisCommandStats, schedStat, zkFootprint } from '../lib/services';
import { findQueues, queueStages } from '../lib/stages';
import { summarize, triple } from '../lib/stats';
import { QUEUE_PREFIX } from '../../src/shared/registry/queue-names';
import { RedisServer } from '../../src/dev/redis-server';
import { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { runTool } from '../lib/tool';

const N = Number(process.env.N ?? 10_000);
/** Worker processes, each registering the same N jobs (issue 23's setup has 2); the first registers alone, then the others join. */
const WORKERS = Number(process.env.WORKERS ?? 1);
const WATCH_S = Number(process.env.WATCH_S ?? 60);
const LATENCY_FROM_S = Number(process.env.LATENCY_FROM_S ?? 30);

const LEADER = `
const { startNode } = require(process.argv[1]);
const { PerformanceObserver, constants } = require('node:perf_hooks');
// Garbage collections: full (mark-compact) ones and the pause of all, from the election on.
const gcs = { full: 0, pauseMs: 0, maxPauseMs: 0 };
let counting = false;
new PerformanceObserver((list) => {
  if (!counting) return;
  for (const entry of list.getEntries()) {
    if (entry.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) gcs.full += 1;
    gcs.pauseMs += entry.duration;
    gcs.maxPauseMs = Math.max(gcs.maxPauseMs, entry.duration);
  }
}).observe({ entryTypes: ['gc'] });
(async () => {
  const started = Date.now();
  const node = await startNode({ roles: ['scheduler'] });
  // Fires the leader skipped (by reason) and its elections: a fire missing from the workers' count is explained here or lost.
  const skipped = {};
  let elections = 0;
  node.leader.on('fire:skipped', ({ reason }) => { skipped[reason] = (skipped[reason] ?? 0) + 1; });
  // When the leader had enqueued each fire of job s0 (every mix's first every-second job), from its
  // fire time (negative: ahead): a late fire enqueued late is the leader's, one enqueued ahead the take's.
  const enqueued = {};
  node.leader.on('fire:dispatched', ({ job, fireTime }) => { if (counting && job === 's0') enqueued[fireTime] = Date.now() - fireTime; });
  node.leader.on('leader:elected', () => {
    elections += 1;
    if (elections > 1) return;
    counting = true;
    process.send({ elected: Date.now() - started });
  });
  process.on('message', (m) => {
    if (m === 'mem') process.send({ mem: process.memoryUsage(), gcs, skipped, elections, enqueued });
    if (m === 'gc') { global.gc(); process.send({ live: process.memoryUsage() }); }
    if (m === 'snapshot') { require('v8').writeHeapSnapshot(process.env.HEAP_SNAPSHOT); process.send({ mem: process.memoryUsage() }); }
  });
})();`;

const mb = (bytes: number) => Math.round(bytes / 2 ** 20);
const show = (m: NodeJS.MemoryUsage) => `rss ${mb(m.rss)} heapTotal ${mb(m.heapTotal)} heapUsed ${mb(m.heapUsed)} external ${mb(m.external)} arrayBuffers ${mb(m.arrayBuffers)}`;

async function main(): Promise<void> {
  if (!Number.isInteger(N) || N < 1) throw new Error(`N must be a positive whole number, got ${process.env.N}`);
  if (!Number.isInteger(WORKERS) || WORKERS < 1) throw new Error(`WORKERS must be a positive whole number, got ${process.env.WORKERS}`);
  if (!Number.isFinite(WATCH_S) || WATCH_S < 0) throw new Error(`WATCH_S must be a number of seconds, got ${process.env.WATCH_S}`);
  if (!Number.isInteger(LATENCY_FROM_S) || LATENCY_FROM_S < 0 || LATENCY_FROM_S % 5 !== 0) throw new Error(`LATENCY_FROM_S must be a whole number of seconds divisible by 5, got ${process.env.LATENCY_FROM_S}`);
  const dist = path.resolve(process.argv[2] ?? path.join(__dirname, '..', '..', 'dist'));
  const zk = await ZooKeeperServer.start({ jvm: 'server', maxHeapMb: Number(process.env.ZK_HEAP_MB ?? 2048) });
  const redis = await RedisServer.start();
  const env = { PATH: process.env.PATH, SHARDCRON_ZK: zk.connectionString, SHARDCRON_REDIS_URL: redis.url, SHARDCRON_NAMESPACE: 'rss', SHARDCRON_LOG_LEVEL: 'silent' };
  const workers: ChildProcess[] = [];
  let leader: ChildProcess | undefined;
  try {
    for (let k = 1; k <= WORKERS; k += 1) {
      const registering = await spawnRegisteringWorker(dist, N, process.env.MIX ?? '', { ...env, SHARDCRON_INSTANCE_ID: `worker-${k}` });
      workers.push(registering.child);
      process.stdout.write(`worker-${k}: ${registering.jobs} jobs registered ${registering.registeredMs} ms\n`);
    }
    const extraEnv = envAssignments(process.env.LEADER_ENV);
    const nodeArgs = (process.env.LEADER_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
    leader = spawn(process.execPath, ['--expose-gc', ...nodeArgs, '-e', LEADER, dist], {
      // Completed requests stay (the newest 100,000) for the stage breakdown at the end.
      env: { ...env, SHARDCRON_COMPLETED_KEPT: '100000', ...extraEnv, SHARDCRON_INSTANCE_ID: 'leader-1', ...(process.env.HEAP_SNAPSHOT ? { HEAP_SNAPSHOT: path.resolve(process.env.HEAP_SNAPSHOT) } : {}) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const child = leader;
    let gcs = { full: 0, pauseMs: 0, maxPauseMs: 0 };
    let skipped: Record<string, number> = {};
    let elections = 0;
    let enqueued: Record<string, number> = {};
    const ask = (what: 'mem' | 'gc' | 'snapshot') =>
      new Promise<NodeJS.MemoryUsage>((resolve) => {
        child.once('message', (m: { mem?: NodeJS.MemoryUsage; live?: NodeJS.MemoryUsage; gcs?: typeof gcs; skipped?: typeof skipped; elections?: number; enqueued?: typeof enqueued }) => {
          if (m.gcs) gcs = m.gcs;
          if (m.enqueued) enqueued = m.enqueued;
          if (m.skipped) skipped = m.skipped;
          if (m.elections !== undefined) elections = m.elections;
          resolve((m.mem ?? m.live)!);
        });
        child.send(what);
      });
    const electedMs = await new Promise<number>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`the leader exited with ${code}`)));
      child.once('message', (m: { elected: number }) => resolve(m.elected));
    });
    process.stdout.write(`leader elected ${electedMs} ms after its start (${nodeArgs.join(' ') || 'no node flags'}; ${process.env.LEADER_ENV || 'no extra env'})\n`);
    let maxRss = 0;
    let countedFrom: number | undefined;
    // The scheduler's count for each process over the latency window: CPU run, and time runnable but
    // waiting for one of the machine's CPUs (what a held request's timer also waits for).
    const scheduled: Array<[string, number | undefined, boolean]> = [['leader', child.pid, false], ...workers.map((w, k): [string, number | undefined, boolean] => [`worker-${k + 1}`, w.pid, false]), ['redis', redis.pid, false], ['zookeeper (all threads)', zk.pid, true]];
    const schedAll = () => scheduled.map(([, pid, all]) => (pid === undefined ? undefined : schedStat(pid, all)));
    let schedFrom: ReturnType<typeof schedAll> | undefined;
    let commandsFrom: Awaited<ReturnType<typeof redisCommandStats>> | undefined;
    for (let s = 0; s <= WATCH_S; s += 5) {
      const m = await ask('mem');
      maxRss = Math.max(maxRss, m.rss);
      process.stdout.write(`  +${s}s ${show(m)}\n`);
      if (s === LATENCY_FROM_S) {
        countedFrom = Math.min(...workers.map(countStartLatency));
        schedFrom = schedAll();
        commandsFrom = await redisCommandStats(redis.port);
      }
      if (s < WATCH_S) await new Promise((resolve) => setTimeout(resolve, 5_000));
    }
    if (countedFrom !== undefined) {
      const everySecond = everySecondJobs(N, process.env.MIX ?? '');
      const starts = (await Promise.all(workers.map((w) => askStarts(w)))).flat();
      const latency = startLatency(starts, everySecond);
      const schedTo = schedAll();
      const commandsTo = await redisCommandStats(redis.port);
      const windowS = WATCH_S - LATENCY_FROM_S;
      const sched = scheduled.map(([name], k) => {
        const a = schedFrom?.[k];
        const b = schedTo[k];
        return a && b ? `${name} ${((b.cpuMs - a.cpuMs) / 1000).toFixed(1)} / ${((b.waitMs - a.waitMs) / 1000).toFixed(1)}` : `${name} n/a`;
      });
      process.stdout.write(`CPU run / runnable waiting for a CPU over the ${windowS} s of the count (s, main thread): ${sched.join('; ')}\n`);
      if (commandsFrom) process.stdout.write(`Redis's busiest commands over the count (calls / time): ${busiestCommands(commandsFrom, commandsTo)}\n`);
      process.stdout.write(
        `${everySecond} every-second jobs, fire to start (p50 / p99 / max) of the fires due from +${LATENCY_FROM_S} s to +${WATCH_S} s: ${latency.all.n} starts of ${latency.fires} fires, ${triple(latency.all)}; in the first 3 s of a minute: ${latency.minute.n} starts, ${triple(latency.minute)}\n`,
      );
      const time = (t: number) => new Date(t).toISOString().slice(11, 19);
      process.stdout.write(`  fires between the first and the last counted with fewer than ${everySecond} starts: ${latency.short.length === 0 ? 'none' : latency.short.map((f) => `${time(f.fire)} (${f.starts})`).join(', ')}\n`);
      const enqueuedAt = (fire: number) => (enqueued[fire] === undefined ? 'n/a' : `${enqueued[fire]} ms`);
      process.stdout.write(`  the latest fires (fire time: p50 / max; s0's enqueue by the leader, from the fire time): ${latency.worst.map((w) => `${time(w.fire)} ${w.p50} / ${w.max} ms; ${enqueuedAt(w.fire)}`).join(', ')}\n`);
      const { quiet } = latency;
      process.stdout.write(`  fires in seconds 3-59 of a minute: ${quiet.all.n} starts, ${triple(quiet.all)}; over those fires, each one's first start ${triple(quiet.first)}, its last ${triple(quiet.last)}\n`);
      // Where the first 6 s of each minute go, every-second jobs only (s0 .. s{everySecond - 1}).
      const queues = await findQueues(redis.url, QUEUE_PREFIX, 'rss.');
      for (let minute = Math.ceil(countedFrom / 60_000) * 60_000; minute + 6_000 <= Date.now(); minute += 60_000) {
        const stages = await queueStages(redis.url, queues, QUEUE_PREFIX, { from: minute, to: minute + 6_000 }, (job) => {
          const data = job.data as { job: string; fireTime: number };
          return Number(data.job.slice(1)) < everySecond ? data.fireTime : Number.NaN;
        }, true, 0, 1_000);
        process.stdout.write(`  minute ${new Date(minute).toISOString().slice(11, 19)}, its first 6 s (p50 / p99 / max from the fire time): enqueue began ${triple(stages.enqueueBegins)}; taken by a worker ${triple(stages.pickedUp)}\n`);
        // Fire by fire: where each of the minute's first seconds loses its time (enqueue, take, start).
        for (const bucket of stages.buckets ?? []) {
          const started = summarize(starts.filter(([fire]) => fire === bucket.from).map(([, late]) => late));
          process.stdout.write(`    fire :${String(new Date(bucket.from).getUTCSeconds()).padStart(2, '0')}: enqueue began ${triple(bucket.enqueueBegins)}; taken ${triple(bucket.pickedUp)}; started ${triple(started)}\n`);
        }
        // The every-minute jobs of that minute: what rate-monotonic order costs them (prioritized behind the every-second ones).
        const everyMinute = everyMinuteJobs(N, process.env.MIX ?? '');
        if (everyMinute === 0) continue;
        const rare = await queueStages(redis.url, queues, QUEUE_PREFIX, { from: minute, to: minute + 3_000 }, (job) => {
          const data = job.data as { job: string; fireTime: number };
          const index = Number(data.job.slice(1));
          return index >= everySecond && index < everySecond + everyMinute ? data.fireTime : Number.NaN;
        }, true);
        process.stdout.write(`    its ${everyMinute} every-minute jobs (${rare.pickedUp.n} of their requests still kept in Redis): enqueue began ${triple(rare.enqueueBegins)}; taken by a worker ${triple(rare.pickedUp)}\n`);
      }
    }
    process.stdout.write(`the leader: ${elections} election(s); fires skipped by reason since its start: ${JSON.stringify(skipped)}\n`);
    process.stdout.write(`garbage collections over ${WATCH_S} s after elected: ${gcs.full} full; pauses ${Math.round(gcs.pauseMs)} ms in all, longest ${Math.round(gcs.maxPauseMs)} ms\n`);
    const live = await ask('gc');
    process.stdout.write(`leader RSS max ${mb(maxRss)} MB over ${WATCH_S} s after elected (/proc: ${Math.round(procSample(child.pid!).rssMb)} MB); after a full GC: ${show(live)}\n`);
    // Issue 23 asks for ZooKeeper's own heap and znode count next to the leader's.
    const footprint = await zkFootprint(zk.port, zk.pid!);
    process.stdout.write(`ZooKeeper: ${footprint.znodes} znodes, ${footprint.dataMb.toFixed(1)} MB of data, RSS ${Math.round(footprint.rssMb)} MB, heap in use ${footprint.heapUsedMb === undefined ? 'n/a (jcmd could not attach)' : `${Math.round(footprint.heapUsedMb)} MB`}\n`);
    // HEAP_SNAPSHOT=file: the leader's heap, written by the leader itself.
    if (process.env.HEAP_SNAPSHOT) await ask('snapshot');
  } finally {
    leader?.kill('SIGKILL');
    for (const worker of workers) worker.kill('SIGKILL');
    await zk.stop();
    await redis.stop();
  }
}

runTool(main);
