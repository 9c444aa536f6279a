/**
 * The worker process the scale tools (bench/tools/leader-load.ts, leader-rss.ts, takeover.ts) start
 * to register N one-item jobs (monitorExecution off, no-op): every second, or with mix `issue23` 1%
 * every second, 20% every minute and the rest hourly or daily (issue 23's mix).
 */
import { spawn, type ChildProcess } from 'node:child_process';

const REGISTERING_WORKER = `
const { defineJob, startNode } = require(process.argv[1]);
(async () => {
  const n = Number(process.argv[2]);
  const cron = (i) => process.argv[3] !== 'issue23' ? '* * * * * ?' : i < n / 100 ? '* * * * * ?' : i < n / 100 + n / 5 ? '0 * * * * ?' : i % 2 ? '0 0 * * * ?' : '0 0 3 * * ?';
  const jobs = Array.from({ length: n }, (_, i) => defineJob({ name: 's' + i, cron: cron(i), monitorExecution: false, execute: async () => {} }));
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
