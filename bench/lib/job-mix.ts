/**
 * The worker process the scale tools (bench/tools/leader-load.ts, leader-rss.ts, takeover.ts) start
 * to register N one-item jobs (monitorExecution off, no-op): every second, or with mix `issue23` 1%
 * every second, 20% every minute and the rest hourly or daily (issue 23's mix). It also times each
 * start of an every-second job from its fire time, for the fires due between SIGUSR1 (start
 * counting) and SIGUSR2 (print the figures): {@link askStartLatency}.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { summarize, type Summary } from './stats';

const REGISTERING_WORKER = `
const { defineJob, startNode } = require(process.argv[1]);
(async () => {
  const n = Number(process.argv[2]);
  const cron = (i) => process.argv[3] !== 'issue23' ? '* * * * * ?' : i < n / 100 ? '* * * * * ?' : i < n / 100 + n / 5 ? '0 * * * * ?' : i % 2 ? '0 0 * * * ?' : '0 0 3 * * ?';
  // Fire-to-start of the every-second jobs: [fire time, ms late] of the fires due from SIGUSR1 on
  // (older fires a new leader still catches up are not the steady state).
  const starts = [];
  let counting = false;
  let since = Infinity;
  process.on('SIGUSR1', () => { starts.length = 0; counting = true; since = Date.now(); });
  process.on('SIGUSR2', () => {
    counting = false;
    process.stdout.write('latency ' + JSON.stringify(starts) + '\\n');
  });
  const everySecond = (i) => cron(i) === '* * * * * ?';
  const jobs = Array.from({ length: n }, (_, i) => defineJob({ name: 's' + i, cron: cron(i), monitorExecution: false, execute: everySecond(i) ? async (ctx) => { if (counting && ctx.fireTime >= since) starts.push([ctx.fireTime, Date.now() - ctx.fireTime]); } : async () => {} }));
  const started = Date.now();
  await startNode({ roles: ['worker'], jobs, concurrency: 200 });
  process.stdout.write('registered ' + (Date.now() - started) + '\\n');
})();`;

/**
 * Spawns that worker on `dist` (a build of shardcron) with `env`; resolves once `startNode` resolved,
 * with the process and how long its registration took.
 */
export function spawnRegisteringWorker(dist: string, n: number, mix: string, env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; registeredMs: number }> {
  const child = spawn(process.execPath, ['-e', REGISTERING_WORKER, dist, String(n), mix], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`the registering worker exited with ${code}`)));
    child.stdout!.on('data', (chunk) => {
      const registered = /registered (\d+)/.exec(String(chunk));
      if (registered) resolve({ child, registeredMs: Number(registered[1]) });
    });
  });
}

/** How many of the N jobs of `mix` fire every minute: the `everySecondJobs` after the every-second ones (the worker's `cron` above). */
export function everyMinuteJobs(n: number, mix: string): number {
  return mix === 'issue23' ? Math.ceil(n / 100 + n / 5) - Math.ceil(n / 100) : 0;
}

/** How many of the N jobs of `mix` fire every second: s0 to s{count - 1} (the worker's `cron` above). */
export function everySecondJobs(n: number, mix: string): number {
  return mix === 'issue23' ? Math.ceil(n / 100) : n;
}

/** What the registering worker measured of its every-second jobs' starts (ms from the fire time). */
export interface StartLatency {
  /** Every start counted. */
  all: Summary;
  /** Distinct fire times among them. */
  fires: number;
  /** Starts of fires in the first 3 s of a minute, when the every-minute jobs fire too. */
  minute: Summary;
}

/** Starts the worker's count of fire-to-start times (SIGUSR1); returns when, the first fire counted. */
export function countStartLatency(worker: ChildProcess): number {
  worker.kill('SIGUSR1');
  return Date.now();
}

/** Stops the count (SIGUSR2) and resolves with what the worker printed. */
export function askStartLatency(worker: ChildProcess, timeoutMs = 10_000): Promise<StartLatency> {
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
      // [fire time, ms from it to the start] per start.
      const starts = JSON.parse(line[1]) as Array<[number, number]>;
      resolve({
        all: summarize(starts.map(([, late]) => late)),
        fires: new Set(starts.map(([fire]) => fire)).size,
        minute: summarize(starts.filter(([fire]) => fire % 60_000 < 3_000).map(([, late]) => late)),
      });
    };
    worker.stdout!.on('data', onData);
    worker.kill('SIGUSR2');
  });
}
