/**
 * How long a leader's death stops the dispatch: `N=10000 MIX=issue23 npx tsx bench/tools/takeover.ts [DIST]`.
 * Starts its own ZooKeeper and Redis, registers N one-item jobs (monitorExecution off; MIX=issue23:
 * 1% every second, 20% every minute, the rest hourly or daily; else all every second) through a
 * worker process, starts a leader process (both running DIST, default this checkout's dist/;
 * `npm run build` first), then a second scheduler in this process (from the sources), which is next
 * in line. WARM=off starts it with SHARDCRON_WARM_STANDBY=off. Once it is ready (warm: every job
 * loaded; off: following), the leader is killed with SIGKILL and the tool prints the time from the
 * kill to the standby's election, from the election to its `leader:elected` (every job prepared)
 * and to its first dispatch, its CPU and ZooKeeper's over the takeover, and its RSS.
 * SESSION_MS sets every process's ZooKeeper session timeout (default 4000). The kill comes at
 * second KILL_AT of a minute (default 5), so that with MIX=issue23 the every-minute jobs' fire
 * falls in the takeover or not the same way in every run. PROFILE=file.cpuprofile
 * writes a CPU profile of the standby from the kill until it has dispatched and prepared every job.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import path from 'node:path';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { startNode } from '../../src';
import { spawnRegisteringWorker } from '../lib/job-mix';
import { procSample } from '../lib/services';
import { RedisServer } from '../../src/dev/redis-server';
import { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { runTool } from '../lib/tool';

const N = Number(process.env.N ?? 10_000);
const SESSION_MS = Number(process.env.SESSION_MS ?? 4_000);
const WARM = process.env.WARM !== 'off';

const LEADER = `
const { startNode } = require(process.argv[1]);
(async () => {
  const node = await startNode({ roles: ['scheduler'] });
  node.leader.on('leader:elected', () => process.stdout.write('ready\\n'));
})();`;

/** CPU milliseconds of `pid` so far. */
const cpuMs = (pid: number): number => Math.round(procSample(pid).cpuSeconds * 1000);

/** Spawns a node running `script` and resolves once it prints `ready`. */
function spawnReady(script: string, args: string[], env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['-e', script, ...args], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`${env.SHARDCRON_INSTANCE_ID} exited with ${code}`)));
    child.stdout!.on('data', (chunk) => {
      if (String(chunk).includes('ready')) resolve(child);
    });
  });
}

async function main(): Promise<void> {
  if (!Number.isInteger(N) || N < 1) throw new Error(`N must be a positive whole number, got ${process.env.N}`);
  const dist = path.resolve(process.argv[2] ?? path.join(__dirname, '..', '..', 'dist'));
  const zk = await ZooKeeperServer.start({ jvm: 'server', maxHeapMb: Number(process.env.ZK_HEAP_MB ?? 2048) });
  const redis = await RedisServer.start();
  const env = {
    SHARDCRON_ZK: zk.connectionString,
    SHARDCRON_REDIS_URL: redis.url,
    SHARDCRON_NAMESPACE: 'takeover',
    SHARDCRON_LOG_LEVEL: 'silent',
    SHARDCRON_ZK_SESSION_TIMEOUT_MS: String(SESSION_MS),
  };
  const children: ChildProcess[] = [];
  try {
    const started = Date.now();
    children.push((await spawnRegisteringWorker(dist, N, process.env.MIX ?? '', { ...env, SHARDCRON_INSTANCE_ID: 'worker-1' })).child);
    const leader = await spawnReady(LEADER, [dist], { ...env, SHARDCRON_INSTANCE_ID: 'leader-1' });
    children.push(leader);
    process.stdout.write(`${N} jobs registered and led after ${Date.now() - started} ms\n`);

    // STANDBY_LOG=info: the standby's log on stdout (pino lines).
    Object.assign(process.env, env, { SHARDCRON_INSTANCE_ID: 'standby-1', SHARDCRON_WARM_STANDBY: WARM ? 'on' : 'off', SHARDCRON_LOG_LEVEL: process.env.STANDBY_LOG ?? 'silent' });
    // The standby's longest event-loop stall and garbage-collection pause, and its session losses.
    const loopDelay = monitorEventLoopDelay({ resolution: 20 });
    loopDelay.enable();
    let longestGcMs = 0;
    const gcs = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) longestGcMs = Math.max(longestGcMs, entry.duration);
    });
    gcs.observe({ entryTypes: ['gc'] });
    const loadStarted = Date.now();
    // PROFILE_LOAD=file.cpuprofile: a CPU profile of the standby's load instead.
    const loadSession = new Session();
    loadSession.connect();
    if (process.env.PROFILE_LOAD) {
      await loadSession.post('Profiler.enable');
      await loadSession.post('Profiler.start');
    }
    const node = await startNode({ roles: ['scheduler'] });
    const standby = node.leader!;
    let sessionsLost = 0;
    node.zk.on('lost', () => (sessionsLost += 1));
    const stalls = () => `longest event-loop stall ${Math.round(loopDelay.max / 1e6)} ms, longest GC pause ${Math.round(longestGcMs)} ms, sessions lost ${sessionsLost}`;
    if (WARM) {
      const ready = await new Promise<{ jobs: number; loadMs: number }>((resolve) => standby.once('standby:ready', resolve));
      process.stdout.write(`standby loaded ${ready.jobs} jobs in ${ready.loadMs} ms (${Date.now() - loadStarted} ms after its start); RSS ${Math.round(process.memoryUsage().rss / 2 ** 20)} MB; ${stalls()}\n`);
      loopDelay.reset();
      longestGcMs = 0;
      if (process.env.PROFILE_LOAD) fs.writeFileSync(process.env.PROFILE_LOAD, JSON.stringify((await loadSession.post('Profiler.stop')).profile));
      loadSession.disconnect();
    }
    // Let the leader's fires and the standby's watches settle into the steady state, then wait
    // for second KILL_AT of a minute.
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    const killAt = Number(process.env.KILL_AT ?? 5);
    await new Promise((resolve) => setTimeout(resolve, (((killAt * 1000 - (Date.now() % 60_000)) % 60_000) + 60_000) % 60_000));

    const timings: Record<string, number> = {};
    let dispatches = 0;
    standby.on('fire:dispatched', () => {
      if (timings.dispatched === undefined || Date.now() - timings.dispatched <= 1_000) dispatches += 1;
    });
    // The first dispatch comes once the jobs about to fire are prepared, `leader:elected` once every job is.
    const done = Promise.all([
      new Promise<void>((resolve) => {
        standby.election.once('leader:elected', () => (timings.elected = Date.now()));
        standby.once('leader:elected', () => {
          timings.prepared = Date.now();
          resolve();
        });
      }),
      new Promise<void>((resolve) => {
        standby.once('fire:dispatched', () => {
          timings.dispatched = Date.now();
          resolve();
        });
      }),
    ]);
    const session = new Session();
    session.connect();
    if (process.env.PROFILE) {
      await session.post('Profiler.enable');
      await session.post('Profiler.start');
    }
    const zkBefore = cpuMs(zk.pid!);
    const cpuBefore = process.cpuUsage();
    leader.kill('SIGKILL');
    const killed = Date.now();
    await done;
    const cpu = process.cpuUsage(cpuBefore);
    process.stdout.write(
      `${WARM ? 'warm' : 'cold'} standby, ${N} jobs, ${SESSION_MS} ms sessions: kill to elected ${timings.elected - killed} ms; ` +
        `elected to every job prepared ${timings.prepared - timings.elected} ms, to first dispatch ${timings.dispatched - timings.elected} ms; ` +
        `kill (at second ${new Date(killed).getUTCSeconds()}) to first dispatch ${timings.dispatched - killed} ms; standby CPU ${Math.round((cpu.user + cpu.system) / 1000)} ms, ZooKeeper CPU ${cpuMs(zk.pid!) - zkBefore} ms; ` +
        `standby RSS ${Math.round(process.memoryUsage().rss / 2 ** 20)} MB\n`,
    );
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    process.stdout.write(`job-fires dispatched in the first second after the first: ${dispatches}; since the standby was ready: ${stalls()}\n`);
    gcs.disconnect();
    if (process.env.PROFILE) fs.writeFileSync(process.env.PROFILE, JSON.stringify((await session.post('Profiler.stop')).profile));
    session.disconnect();
    await node.close();
  } finally {
    for (const child of children) child.kill('SIGKILL');
    await zk.stop();
    await redis.stop();
  }
}

runTool(main);
