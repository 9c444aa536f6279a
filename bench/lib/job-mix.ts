/**
 * The worker process the scale tools (bench/tools/leader-load.ts, leader-rss.ts, takeover.ts) start
 * to register N jobs (monitorExecution off, no-op): one item each every second, or with mix
 * `issue23` issue 23's mix: 1% every second, 20% every minute and the rest hourly or daily, one
 * item each, but for the last 100 jobs, of 100 items every minute; `issue23-busy` the same but
 * without its hourly and daily jobs (they only lengthen the load: what fires each second and each
 * minute is the same, for a run in a quarter of the time). BENCH_WORKER_PROFILE=dir writes each
 * worker's CPU profile of the counting window there, BENCH_WORKER_ALLOC=dir its allocations
 * ({@link countingSource}). STRATEGY (e.g. ROUND_ROBIN) sets the
 * jobs' sharding strategy: with the default, AVG_ALLOCATION, every one-item job's item goes to the
 * first worker. WORKER_NODE_ARGS (e.g. "--max-semi-space-size=64") are the worker processes'
 * node flags, WORKER_ENV (e.g. "SHARDCRON_CONSUMERS=2") more of their environment. It also times each
 * start of an every-second job from its fire time, for the fires due between SIGUSR1 (start
 * counting) and SIGUSR2 (print the figures): {@link askStarts} and {@link startLatency}.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { summarize, type Summary } from './stats';

/** Issue 23's wide jobs: the mix's last WIDE_JOBS jobs, of WIDE_JOB_ITEMS items each, fire every minute (N >= 1,000). */
export const WIDE_JOBS = 100;
export const WIDE_JOB_ITEMS = 100;

/**
 * Source for a bench worker script (run with `node -e`): what it counts between SIGUSR1 (start)
 * and SIGUSR2 (print), in the lines {@link askStarts} reads. The script pushes
 * `[fire time, ms late]` onto `starts` while `counting`, for fires from `since` on; this source
 * adds the event loop's delay, the garbage collections by kind (Node's gc entries: 1 minor,
 * 2 major, 4 incremental, 8 weak callbacks; count, total and longest pause), and the profiles:
 * BENCH_WORKER_PROFILE=dir a CPU profile as {profileName}-{pid}.cpuprofile, BENCH_WORKER_ALLOC=dir
 * a sampling heap profile of what it allocated, collected or not (where the young generation's
 * work comes from), as {profileName}-{pid}.heapprofile. `extraReport`: statements that print more
 * lines before the `latency` one.
 */
export function countingSource(profileName: string, extraReport = ''): string {
  return `const starts = [];
  let counting = false;
  let since = Infinity;
  const loop = require('node:perf_hooks').monitorEventLoopDelay({ resolution: 10 });
  const gcs = {};
  new (require('node:perf_hooks').PerformanceObserver)((list) => {
    if (!counting) return;
    for (const e of list.getEntries()) {
      const kind = { 1: 'minor', 2: 'major', 4: 'incremental', 8: 'weak' }[e.detail?.kind ?? e.kind] ?? 'other';
      const g = (gcs[kind] ??= { count: 0, ms: 0, max: 0 });
      g.count += 1; g.ms += e.duration; g.max = Math.max(g.max, e.duration);
    }
  }).observe({ entryTypes: ['gc'] });
  const profileDir = process.env.BENCH_WORKER_PROFILE;
  const allocDir = process.env.BENCH_WORKER_ALLOC;
  const inspector = profileDir || allocDir ? new (require('node:inspector').Session)() : undefined;
  if (inspector) inspector.connect();
  const writeProfile = (dir, ext) => (err, res) => {
    try { if (err) throw new Error(err.message); require('node:fs').mkdirSync(dir, { recursive: true }); require('node:fs').writeFileSync(require('node:path').join(dir, '${profileName}-' + process.pid + ext), JSON.stringify(res.profile)); } catch (e) { process.stderr.write('${profileName} profile not written: ' + e.message + '\\n'); }
  };
  process.on('SIGUSR1', () => {
    starts.length = 0; counting = true; since = Date.now(); loop.reset(); loop.enable();
    for (const k of Object.keys(gcs)) delete gcs[k];
    if (profileDir) inspector.post('Profiler.enable', () => inspector.post('Profiler.start'));
    if (allocDir) inspector.post('HeapProfiler.startSampling', { samplingInterval: 32768, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  });
  process.on('SIGUSR2', () => {
    counting = false;
    loop.disable();
    if (profileDir) inspector.post('Profiler.stop', writeProfile(profileDir, '.cpuprofile'));
    if (allocDir) inspector.post('HeapProfiler.stopSampling', writeProfile(allocDir, '.heapprofile'));
    process.stdout.write('loop ' + JSON.stringify({ p50: loop.percentile(50) / 1e6, p99: loop.percentile(99) / 1e6, max: loop.max / 1e6 }) + '\\n');
    for (const g of Object.values(gcs)) { g.ms = Math.round(g.ms); g.max = Math.round(g.max); }
    process.stdout.write('gc ' + JSON.stringify(gcs) + '\\n');
    ${extraReport}
    process.stdout.write('latency ' + JSON.stringify(starts) + '\\n');
  });`;
}

const REGISTERING_WORKER = `
const { defineJob, startNode } = require(process.argv[1]);
(async () => {
  const n = Number(process.argv[2]);
  const issue23 = process.argv[3] === 'issue23' || process.argv[3] === 'issue23-busy';
  const busyOnly = process.argv[3] === 'issue23-busy';
  // issue 23's wide jobs (WIDE_JOBS of WIDE_JOB_ITEMS items): the last ones, every minute.
  const wide = (i) => issue23 && n >= 1000 && i >= n - ${WIDE_JOBS};
  const cron = (i) => !issue23 ? '* * * * * ?' : i < n / 100 ? '* * * * * ?' : i < n / 100 + n / 5 || wide(i) ? '0 * * * * ?' : i % 2 ? '0 0 * * * ?' : '0 0 3 * * ?';
  // Fire-to-start of the every-second jobs (\`starts\`), counted for the fires due from SIGUSR1 on:
  // older fires a new leader still catches up are not the steady state.
  ${countingSource('worker')}
  const everySecond = (i) => cron(i) === '* * * * * ?';
  const rare = (i) => cron(i) === '0 0 * * * ?' || cron(i) === '0 0 3 * * ?';
  const jobs = Array.from({ length: n }, (_, i) => i).filter((i) => !(busyOnly && rare(i))).map((i) => defineJob({ name: 's' + i, cron: cron(i), shardingTotalCount: wide(i) ? ${WIDE_JOB_ITEMS} : 1, ...(process.env.BENCH_STRATEGY && { shardingStrategy: process.env.BENCH_STRATEGY }), monitorExecution: false, execute: everySecond(i) ? async (ctx) => { if (counting && ctx.fireTime >= since) starts.push([ctx.fireTime, Date.now() - ctx.fireTime]); } : async () => {} }));
  const started = Date.now();
  await startNode({ roles: ['worker'], jobs, concurrency: Number(process.env.BENCH_CONCURRENCY || 200) });
  process.stdout.write('registered ' + (Date.now() - started) + ' ' + jobs.length + '\\n');
})();`;

/** `NAME=value` pairs separated by blanks (a tool's LEADER_ENV or WORKER_ENV) as an environment; a value may hold `=`. */
export function envAssignments(text: string | undefined): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of (text ?? '').split(/\s+/).filter(Boolean)) {
    const at = pair.indexOf('=');
    if (at <= 0) throw new Error(`expected NAME=value, got ${pair}`);
    env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return env;
}

/**
 * Spawns that worker on `dist` (a build of shardcron) with `env`; resolves once `startNode` resolved,
 * with the process, how long its registration took and how many jobs it registered.
 */
export function spawnRegisteringWorker(dist: string, n: number, mix: string, env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; registeredMs: number; jobs: number }> {
  const strategy = process.env.STRATEGY ? { BENCH_STRATEGY: process.env.STRATEGY } : {};
  const profile = { ...(process.env.BENCH_WORKER_PROFILE && { BENCH_WORKER_PROFILE: process.env.BENCH_WORKER_PROFILE }), ...(process.env.BENCH_WORKER_ALLOC && { BENCH_WORKER_ALLOC: process.env.BENCH_WORKER_ALLOC }) };
  const concurrency = process.env.CONCURRENCY ? { BENCH_CONCURRENCY: process.env.CONCURRENCY } : {};
  const nodeArgs = (process.env.WORKER_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, '-e', REGISTERING_WORKER, dist, String(n), mix], { env: { PATH: process.env.PATH, ...env, ...strategy, ...profile, ...concurrency, ...envAssignments(process.env.WORKER_ENV) }, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`the registering worker exited with ${code}`)));
    child.stdout!.on('data', (chunk) => {
      const registered = /registered (\d+) (\d+)/.exec(String(chunk));
      if (registered) resolve({ child, registeredMs: Number(registered[1]), jobs: Number(registered[2]) });
    });
  });
}

/** The mixes the worker above knows as issue 23's: the whole one, and the one without its hourly and daily jobs. */
const ISSUE23_MIXES = new Set(['issue23', 'issue23-busy']);

/**
 * How many of the N one-item jobs of `mix` fire every minute: those right after the every-second ones
 * (the worker's `cron` above). Issue 23's 100 jobs of 100 items, the last 100, fire every minute too
 * and are not counted here.
 */
export function everyMinuteJobs(n: number, mix: string): number {
  return ISSUE23_MIXES.has(mix) ? Math.ceil(n / 100 + n / 5) - Math.ceil(n / 100) : 0;
}

/** How many of the N jobs of `mix` fire every second: s0 to s{count - 1} (the worker's `cron` above). */
export function everySecondJobs(n: number, mix: string): number {
  return ISSUE23_MIXES.has(mix) ? Math.ceil(n / 100) : n;
}

/** What the registering worker measured of its every-second jobs' starts (ms from the fire time). */
export interface StartLatency {
  /** Every start counted. */
  all: Summary;
  /** Distinct fire times among them. */
  fires: number;
  /** Starts of fires in the first 3 s of a minute, when the every-minute jobs fire too. */
  minute: Summary;
  /**
   * Fires between the first and the last counted with fewer starts than every-second jobs (none at
   * all for a whole second with no start): items not run, or not yet when the count stopped.
   */
  short: Array<{ fire: number; starts: number }>;
  /** The fires whose latest start was latest, worst first (up to 5): where the p99 comes from. */
  worst: Array<{ fire: number; p50: number; max: number }>;
  /** Starts of the other fires (second 3 to 59 of a minute), and over those fires each one's first and last start: how far one fire's starts spread with no minute burst. */
  quiet: { all: Summary; first: Summary; last: Summary };
}

/** The fires from the first counted to the last with fewer than `jobs` starts (whole seconds with none included). */
function shortFires(starts: ReadonlyArray<[number, number]>, jobs: number): StartLatency['short'] {
  const counts = new Map<number, number>();
  for (const [fire] of starts) counts.set(fire, (counts.get(fire) ?? 0) + 1);
  if (counts.size === 0) return [];
  const first = Math.min(...counts.keys());
  const last = Math.max(...counts.keys());
  const short: StartLatency['short'] = [];
  for (let fire = first; fire <= last; fire += 1_000) {
    const n = counts.get(fire) ?? 0;
    if (n < jobs) short.push({ fire, starts: n });
  }
  return short;
}

/** The `count` fires with the latest last start: each fire's time, median and latest start. */
function worstFires(starts: ReadonlyArray<[number, number]>, count: number): StartLatency['worst'] {
  const byFire = new Map<number, number[]>();
  for (const [fire, late] of starts) {
    const lates = byFire.get(fire);
    if (lates) lates.push(late);
    else byFire.set(fire, [late]);
  }
  return [...byFire]
    .map(([fire, lates]) => {
      const s = summarize(lates);
      return { fire, p50: s.p50, max: s.max };
    })
    .sort((a, b) => b.max - a.max)
    .slice(0, count);
}

/** Starts the worker's count of fire-to-start times (SIGUSR1); returns when, the first fire counted. */
export function countStartLatency(worker: ChildProcess): number {
  worker.kill('SIGUSR1');
  return Date.now();
}

/** Stops the count (SIGUSR2) and resolves with the worker's starts: [fire time, ms from it to the start] each. */
export function askStarts(worker: ChildProcess, timeoutMs = 10_000): Promise<Array<[number, number]>> {
  return new Promise((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => {
      worker.stdout!.off('data', onData);
      reject(new Error('the registering worker did not report its start latency'));
    }, timeoutMs);
    const onData = (chunk: Buffer) => {
      text += String(chunk);
      const line = /latency (\[.*\])\n/.exec(text);
      if (!line) return;
      clearTimeout(timer);
      worker.stdout!.off('data', onData);
      const loop = /loop (\{.*\})\n/.exec(text);
      if (loop) process.stdout.write(`  worker ${worker.pid} event-loop delay over the count (ms): ${loop[1]}\n`);
      const gc = /gc (\{.*\})\n/.exec(text);
      if (gc) process.stdout.write(`  worker ${worker.pid} garbage collections over the count (count, ms in all, longest ms): ${gc[1]}\n`);
      resolve(JSON.parse(line[1]) as Array<[number, number]>);
    };
    worker.stdout!.on('data', onData);
    worker.kill('SIGUSR2');
  });
}

/** The figures of starts counted by one or more workers ({@link askStarts}), of `jobs` every-second jobs. */
export function startLatency(starts: ReadonlyArray<[number, number]>, jobs: number): StartLatency {
  return {
    all: summarize(starts.map(([, late]) => late)),
    fires: new Set(starts.map(([fire]) => fire)).size,
    minute: summarize(starts.filter(([fire]) => fire % 60_000 < 3_000).map(([, late]) => late)),
    worst: worstFires(starts, 5),
    short: shortFires(starts, jobs),
    quiet: quietFires(starts.filter(([fire]) => fire % 60_000 >= 3_000)),
  };
}

/** {@link StartLatency.quiet} of `starts`, all of fires outside the first 3 s of a minute. */
function quietFires(starts: ReadonlyArray<[number, number]>): StartLatency['quiet'] {
  const byFire = new Map<number, { first: number; last: number }>();
  for (const [fire, late] of starts) {
    const seen = byFire.get(fire);
    if (seen) {
      seen.first = Math.min(seen.first, late);
      seen.last = Math.max(seen.last, late);
    } else byFire.set(fire, { first: late, last: late });
  }
  const fires = [...byFire.values()];
  return { all: summarize(starts.map(([, late]) => late)), first: summarize(fires.map((f) => f.first)), last: summarize(fires.map((f) => f.last)) };
}
