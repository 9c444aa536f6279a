/**
 * The worker process the scale tools (bench/tools/leader-load.ts, leader-rss.ts, takeover.ts) start
 * to register N one-item jobs (monitorExecution off, no-op): every second, or with mix `issue23` 1%
 * every second, 20% every minute and the rest hourly or daily (issue 23's mix). It also times each
 * start of an every-second job from its fire time, for the fires due between SIGUSR1 (start
 * counting) and SIGUSR2 (print the figures): {@link askStartLatency}.
 */
import { spawn, type ChildProcess } from 'node:child_process';

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
    const sorted = starts.map((s) => s[1]).sort((a, b) => a - b);
    const q = (p) => sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] : null;
    // The fires in the 3 s from each whole minute on, when the every-minute jobs fire too.
    const minute = starts.filter((s) => s[0] % 60000 < 3000).map((s) => s[1]).sort((a, b) => a - b);
    const fires = new Set(starts.map((s) => s[0]));
    process.stdout.write('latency ' + JSON.stringify({ starts: sorted.length, fires: fires.size, p50: q(0.5), p99: q(0.99), max: sorted.at(-1) ?? null, minuteStarts: minute.length, minuteP99: minute.length ? minute[Math.min(minute.length - 1, Math.floor(0.99 * minute.length))] : null }) + '\\n');
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

/** What the registering worker measured of its every-second jobs' starts (ms from the fire time). */
export interface StartLatency {
  starts: number;
  /** Distinct fire times among them. */
  fires: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
  /** Starts of fires in the first 3 s of a minute, when the every-minute jobs fire too, and their p99. */
  minuteStarts: number;
  minuteP99: number | null;
}

/** Starts the worker's count of fire-to-start times (SIGUSR1). */
export function countStartLatency(worker: ChildProcess): void {
  worker.kill('SIGUSR1');
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
      const line = /latency (\{.*\})\n/.exec(text);
      if (!line) return;
      clearTimeout(timer);
      worker.stdout!.off('data', onData);
      resolve(JSON.parse(line[1]) as StartLatency);
    };
    worker.stdout!.on('data', onData);
    worker.kill('SIGUSR2');
  });
}
