/**
 * Raw BullMQ on issue 23's busy mix, the peer of leader-rss.ts's `MIX=issue23-busy` run on the same
 * machine: what fire-to-start p99 BullMQ itself gives the every-second jobs while the every-minute
 * ones fire, with no leader, no ZooKeeper and no lock.
 *
 * `N=100000 WORKERS=2 MODE=at-fire|delayed|schedulers [PRIORITY=1] npx tsx bench/tools/busy-mix-bullmq.ts`
 *
 * The mix of N jobs (bench/lib/job-mix.ts, `issue23-busy`): N/100 every second, N/5 every minute and
 * 100 of 100 items every minute, one BullMQ job per item and fire: with N = 100,000, 1,000 jobs each
 * second and 30,000 more at second 0 of each minute. One shared queue; WORKERS worker processes
 * (default 2), each one BullMQ Worker of CONCURRENCY (default 200, as the shardcron workers of
 * leader-rss.ts) with a no-op processor. How the jobs get there, MODE:
 * - `at-fire` (default): this process adds each fire's jobs at its fire time (`addBulk` of CHUNK,
 *   default 1,000), the every-second and the every-minute ones on their own, so that neither waits
 *   for the other's adds (at second 0 they go in whichever order the two timers wake);
 * - `delayed`: the same, LEAD_MS (default 1,000) before the fire time, MINUTE_LEAD_MS (default
 *   5,000) for the minute's, as delayed jobs due at the fire time (`timestamp` and `delay` from one
 *   reading of the clock; what shardcron's leader does with its lead and the workers' hold);
 * - `schedulers`: one BullMQ Job Scheduler per job and item (31,000 with N = 100,000).
 * PRIORITY=1 gives the every-minute jobs a BullMQ priority, so that the every-second ones, on the
 * wait list, are taken first (shardcron's rate-monotonic order). Completed and failed jobs are removed.
 *
 * It counts from WARMUP_S (default 20) for COUNT_S seconds (default 120, so two minutes' bursts are
 * in it), leaving out fires due in its last 3 s: the every-second jobs' fire-to-start p50 / p99 /
 * max, and in the first 3 s of a minute; the every-minute jobs' starts per minute; the event-loop
 * delay and garbage collections of each worker; CPU run and
 * waiting for a CPU of every process (as leader-rss.ts prints them) and Redis's busiest commands.
 * BENCH_WORKER_PROFILE=dir writes each worker's CPU profile of the count there, BENCH_WORKER_ALLOC=dir
 * a sampling profile of its allocations (bench/lib/job-mix.ts, countingSource).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import IORedis from 'ioredis';
import { askStarts, countStartLatency, everyMinuteJobs, everySecondJobs, countingSource, startLatency, WIDE_JOB_ITEMS, WIDE_JOBS } from '../lib/job-mix';
import { busiestCommands, redisCommandStats, schedStat } from '../lib/services';
import { summarize, triple } from '../lib/stats';
import { RedisServer } from '../../src/dev/redis-server';
import { runTool } from '../lib/tool';

const N = Number(process.env.N ?? 100_000);
const WORKERS = Number(process.env.WORKERS ?? 2);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 200);
const MODE = process.env.MODE ?? 'at-fire';
const PRIORITIZED = process.env.PRIORITY === '1';
const CHUNK = Number(process.env.CHUNK ?? 1_000);
const LEAD_MS = Number(process.env.LEAD_MS ?? 1_000);
const MINUTE_LEAD_MS = Number(process.env.MINUTE_LEAD_MS ?? 5_000);
const WARMUP_S = Number(process.env.WARMUP_S ?? 20);
const COUNT_S = Number(process.env.COUNT_S ?? 120);
/** The priority of every-minute jobs with PRIORITY=1 (any: the every-second ones have none, so come first). */
const MINUTE_PRIORITY = 10;
const QUEUE = 'busy';
/** The items of the mix's wide jobs, every minute. */
const WIDE_ITEMS = WIDE_JOBS * WIDE_JOB_ITEMS;
/** Fires due this close to the count's end are left out: their late starts would come after it. */
const COUNT_TAIL_MS = 3_000;

/**
 * One worker process: a BullMQ Worker on the queue; counts, between SIGUSR1 and SIGUSR2, the
 * every-second jobs' starts as [fire time, ms late] and the every-minute ones' per fire, and prints
 * them with its event-loop delay in the lines askStarts (bench/lib/job-mix.ts) reads.
 */
const WORKER = `
const { Worker } = require(process.argv[1]);
const IORedis = require(process.argv[2]);
const nominal = (job) => job.id.startsWith('repeat:') ? Number(job.id.slice(job.id.lastIndexOf(':') + 1)) : job.data.fireTime;
const minute = {};
${countingSource('bullmq-worker', "process.stdout.write('minute ' + JSON.stringify(minute) + '\\n');")}
const connection = new IORedis(process.argv[3], { maxRetriesPerRequest: null });
const worker = new Worker(process.argv[4], async (job) => {
  const fire = nominal(job);
  if (!counting || fire < since) return;
  const late = Date.now() - fire;
  if (job.data.kind === 's') starts.push([fire, late]);
  else (minute[fire] ??= []).push(late);
}, { connection, concurrency: Number(process.argv[5]) });
worker.on('error', (err) => process.stderr.write('worker error: ' + err.message + '\\n'));
worker.waitUntilReady().then(() => process.stdout.write('ready\\n'));
`;

function spawnWorker(redisUrl: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['-e', WORKER, require.resolve('bullmq'), require.resolve('ioredis'), redisUrl, QUEUE, String(CONCURRENCY)], { stdio: ['ignore', 'pipe', 'inherit'], env: process.env });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`a worker exited with ${code}`)));
    const onData = (chunk: Buffer) => {
      if (!String(chunk).includes('ready')) return;
      child.stdout!.off('data', onData);
      resolve(child);
    };
    child.stdout!.on('data', onData);
  });
}

type Spec = { name: string; data: { kind: 's' | 'm'; fireTime?: number }; opts: Record<string, unknown> };

const REMOVAL = { removeOnComplete: true, removeOnFail: true };

/** The every-second jobs of the fire at `at`. */
function secondJobs(at: number, count: number): Spec[] {
  return Array.from({ length: count }, () => ({ name: 's', data: { kind: 's', fireTime: at }, opts: REMOVAL }));
}

/** The every-minute jobs and the wide jobs' items of the fire at `at` (second 0 of a minute). */
function minuteJobs(at: number, count: number): Spec[] {
  const opts = { ...REMOVAL, ...(PRIORITIZED && { priority: MINUTE_PRIORITY }) };
  return Array.from({ length: count }, () => ({ name: 'm', data: { kind: 'm', fireTime: at }, opts }));
}

/** Adds `jobs` in chunks of CHUNK; `delayed`: each chunk as delayed jobs due at `at` while that is ahead. */
async function addFire(queue: Queue, at: number, jobs: Spec[], delayed: boolean): Promise<void> {
  for (let i = 0; i < jobs.length; i += CHUNK) {
    const now = Date.now();
    const due = delayed && at > now ? { timestamp: now, delay: at - now } : {};
    await queue.addBulk(jobs.slice(i, i + CHUNK).map((j) => ({ ...j, opts: { ...j.opts, ...due } })));
  }
}

/**
 * `at-fire` and `delayed`: adds each fire's jobs at its time less `leadMs` (0: at it), every
 * `periodMs`, until `stop` aborts; each fire's adds go on their own, so that one fire's never wait
 * for another's.
 */
async function produce(queue: Queue, periodMs: number, leadMs: number, jobs: (at: number) => Spec[], stop: AbortSignal): Promise<void> {
  const adds: Array<Promise<void>> = [];
  for (let at = Math.ceil((Date.now() + leadMs + 500) / periodMs) * periodMs; !stop.aborted; at += periodMs) {
    const wait = at - leadMs - Date.now();
    if (wait > 0) await sleep(wait, undefined, { signal: stop }).catch(() => undefined);
    if (stop.aborted) break;
    const fire = at;
    adds.push(addFire(queue, fire, jobs(fire), leadMs > 0).catch((err) => {
      process.stderr.write(`the add of the fire at ${new Date(fire).toISOString()} failed: ${(err as Error).message}\n`);
    }));
  }
  await Promise.all(adds);
}

/** `schedulers`: one Job Scheduler per every-second job, every-minute job and wide job's item. */
async function upsertSchedulers(queue: Queue, everySecond: number, everyMinute: number): Promise<void> {
  const specs: Array<[string, string, Spec['data'], Record<string, unknown>]> = [];
  for (let i = 0; i < everySecond; i += 1) specs.push([`s${i}`, '* * * * * *', { kind: 's' }, {}]);
  for (let i = 0; i < everyMinute + WIDE_ITEMS; i += 1) specs.push([`m${i}`, '0 * * * * *', { kind: 'm' }, PRIORITIZED ? { priority: MINUTE_PRIORITY } : {}]);
  for (let i = 0; i < specs.length; i += 500) {
    await Promise.all(specs.slice(i, i + 500).map(([id, pattern, data, opts]) => queue.upsertJobScheduler(id, { pattern }, { name: data.kind, data, opts: { removeOnComplete: true, removeOnFail: true, ...opts } })));
  }
}

async function main(): Promise<void> {
  if (!Number.isInteger(N) || N < 1000) throw new Error(`N must be a whole number of at least 1,000, got ${process.env.N}`);
  if (!['at-fire', 'delayed', 'schedulers'].includes(MODE)) throw new Error(`MODE must be at-fire, delayed or schedulers, got ${MODE}`);
  for (const [name, value] of Object.entries({ WORKERS, CONCURRENCY, CHUNK, WARMUP_S, COUNT_S })) {
    if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive whole number, got ${value}`);
  }
  for (const [name, value] of Object.entries({ LEAD_MS, MINUTE_LEAD_MS })) {
    if (!Number.isInteger(value) || value < 0 || value > 30_000) throw new Error(`${name} must be a whole number of milliseconds from 0 to 30000, got ${value}`);
  }
  const everySecond = everySecondJobs(N, 'issue23-busy');
  const everyMinute = everyMinuteJobs(N, 'issue23-busy');
  const redis = await RedisServer.start();
  const connection = new IORedis(redis.url, { maxRetriesPerRequest: null });
  const queue = new Queue(QUEUE, { connection });
  const workers: ChildProcess[] = [];
  const stop = new AbortController();
  let producing: Promise<void> | undefined;
  try {
    for (let k = 0; k < WORKERS; k += 1) workers.push(await spawnWorker(redis.url));
    const setupStarted = Date.now();
    if (MODE === 'schedulers') await upsertSchedulers(queue, everySecond, everyMinute);
    else {
      const lead = (ms: number) => (MODE === 'delayed' ? ms : 0);
      const seconds = produce(queue, 1_000, lead(LEAD_MS), (at) => secondJobs(at, everySecond), stop.signal);
      const minutes = produce(queue, 60_000, lead(MINUTE_LEAD_MS), (at) => minuteJobs(at, everyMinute + WIDE_ITEMS), stop.signal);
      producing = Promise.all([seconds, minutes]).then(() => undefined);
    }
    process.stdout.write(`raw BullMQ ${MODE}${PRIORITIZED ? ', every-minute jobs prioritized behind' : ''}: ${everySecond} every-second jobs, ${everyMinute + WIDE_ITEMS} every-minute jobs and items; ${WORKERS} workers of concurrency ${CONCURRENCY}; set up in ${Date.now() - setupStarted} ms\n`);
    await sleep(WARMUP_S * 1000);
    const scheduled: Array<[string, number | undefined]> = [['producer (this process)', process.pid], ...workers.map((w, k): [string, number | undefined] => [`worker-${k + 1}`, w.pid]), ['redis', redis.pid]];
    const schedAll = () => scheduled.map(([, pid]) => (pid === undefined ? undefined : schedStat(pid)));
    const schedFrom = schedAll();
    const commandsFrom = await redisCommandStats(redis.port);
    for (const w of workers) countStartLatency(w);
    await sleep(COUNT_S * 1000);
    const countedUntil = Date.now() - COUNT_TAIL_MS;
    const minutes: Array<Record<string, number[]>> = [];
    const starts = (await Promise.all(workers.map(async (w) => {
      let text = '';
      const collect = (chunk: Buffer) => { text += String(chunk); };
      w.stdout!.on('data', collect);
      const got = await askStarts(w);
      w.stdout!.off('data', collect);
      const line = /minute (\{.*\})\n/.exec(text);
      if (line) minutes.push(JSON.parse(line[1]!) as Record<string, number[]>);
      return got.filter(([fire]) => fire < countedUntil);
    }))).flat();
    const schedTo = schedAll();
    const commandsTo = await redisCommandStats(redis.port);
    const sched = scheduled.map(([name], k) => {
      const a = schedFrom[k];
      const b = schedTo[k];
      return a && b ? `${name} ${((b.cpuMs - a.cpuMs) / 1000).toFixed(1)} / ${((b.waitMs - a.waitMs) / 1000).toFixed(1)}` : `${name} n/a`;
    });
    process.stdout.write(`CPU run / runnable waiting for a CPU over the ${COUNT_S} s of the count (s, main thread): ${sched.join('; ')}\n`);
    process.stdout.write(`Redis's busiest commands over the count (calls / time): ${busiestCommands(commandsFrom, commandsTo)}\n`);
    const latency = startLatency(starts, everySecond);
    process.stdout.write(`${everySecond} every-second jobs, fire to start (p50 / p99 / max) of the fires due before the count's last ${COUNT_TAIL_MS / 1000} s: ${latency.all.n} starts of ${latency.fires} fires, ${triple(latency.all)}; in the first 3 s of a minute: ${latency.minute.n} starts, ${triple(latency.minute)}\n`);
    const time = (t: number) => new Date(t).toISOString().slice(11, 19);
    process.stdout.write(`  fires with fewer than ${everySecond} starts: ${latency.short.length === 0 ? 'none' : latency.short.map((f) => `${time(f.fire)} (${f.starts})`).join(', ')}\n`);
    process.stdout.write(`  the latest fires (fire time: p50 / max): ${latency.worst.map((w) => `${time(w.fire)} ${w.p50} / ${w.max} ms`).join(', ')}\n`);
    const byMinute = new Map<number, number[]>();
    for (const m of minutes) for (const [fire, lates] of Object.entries(m)) byMinute.set(Number(fire), [...(byMinute.get(Number(fire)) ?? []), ...lates]);
    for (const [fire, lates] of [...byMinute].sort(([a], [b]) => a - b)) {
      const cut = lates.length < everyMinute + WIDE_ITEMS ? ' (not all started when the count ended: its figures are not the whole burst)' : '';
      process.stdout.write(`  minute ${time(fire)}: ${lates.length} every-minute starts of ${everyMinute + WIDE_ITEMS}, fire to start ${triple(summarize(lates))}${cut}\n`);
    }
  } finally {
    stop.abort();
    await producing?.catch(() => undefined);
    for (const worker of workers) worker.kill('SIGKILL');
    await queue.close().catch(() => undefined);
    connection.disconnect();
    await redis.stop();
  }
}

runTool(main);
