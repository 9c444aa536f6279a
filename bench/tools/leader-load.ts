/**
 * How long a new leader takes to load N jobs: `N=10000 npx tsx bench/tools/leader-load.ts [DIST]`.
 * Starts its own ZooKeeper and Redis, registers N one-item every-second jobs (monitorExecution off;
 * with MIX=issue23, 1% every second, 20% every minute and the rest hourly or daily)
 * through a worker process running DIST (default: this checkout's dist/; `npm run build` first),
 * then starts a scheduler in this process (from the sources) and prints the time from its start to
 * `leader:elected` (every job view loaded, the timer armed), its CPU and ZooKeeper's over that time,
 * and its RSS. PROFILE=file.cpuprofile also writes a CPU profile of the load.
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import path from 'node:path';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { startNode } from '../../src';
import { spawnRegisteringWorker } from '../lib/job-mix';
import { procSample } from '../lib/services';
import { RedisServer } from '../../src/dev/redis-server';
import { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { runTool } from '../lib/tool';

const N = Number(process.env.N ?? 10_000);

/** CPU milliseconds of `pid` so far. */
const cpuMs = (pid: number): number => Math.round(procSample(pid).cpuSeconds * 1000);

async function main(): Promise<void> {
  if (!Number.isInteger(N) || N < 1) throw new Error(`N must be a positive whole number, got ${process.env.N}`);
  const dist = path.resolve(process.argv[2] ?? path.join(__dirname, '..', '..', 'dist'));
  const zk = await ZooKeeperServer.start({ jvm: 'server', maxHeapMb: Number(process.env.ZK_HEAP_MB ?? 2048) });
  const redis = await RedisServer.start();
  const env = { SHARDCRON_ZK: zk.connectionString, SHARDCRON_REDIS_URL: redis.url, SHARDCRON_NAMESPACE: 'load', SHARDCRON_LOG_LEVEL: 'silent' };
  let worker: ChildProcess | undefined;
  try {
    const registering = await spawnRegisteringWorker(dist, N, process.env.MIX ?? '', { ...env, SHARDCRON_INSTANCE_ID: 'worker-1' });
    worker = registering.child;
    process.stdout.write(`${N} jobs registered ${registering.registeredMs} ms\n`);
    Object.assign(process.env, env, { SHARDCRON_INSTANCE_ID: 'leader-1' });
    const session = new Session();
    session.connect();
    if (process.env.PROFILE) {
      await session.post('Profiler.enable');
      await session.post('Profiler.start');
    }
    const zkBefore = cpuMs(zk.pid!);
    const cpuBefore = process.cpuUsage();
    const started = Date.now();
    const node = await startNode({ roles: ['scheduler'] });
    await new Promise<void>((resolve) => node.leader!.on('leader:elected', () => resolve()));
    const cpu = process.cpuUsage(cpuBefore);
    const loadedMs = Date.now() - started;
    const rssMb = Math.round(process.memoryUsage().rss / 2 ** 20);
    // The live heap: what a full collection leaves (the tool's own few MB included).
    v8.setFlagsFromString('--expose-gc');
    (runInNewContext('gc') as () => void)();
    const liveMb = Math.round(process.memoryUsage().heapUsed / 2 ** 20);
    process.stdout.write(`leader load ${loadedMs} ms; leader CPU ${Math.round((cpu.user + cpu.system) / 1000)} ms, ZooKeeper CPU ${cpuMs(zk.pid!) - zkBefore} ms; leader RSS ${rssMb} MB, live heap ${liveMb} MB after a full GC\n`);
    // HEAP_SNAPSHOT=file: the loaded leader's heap, for a look at what each job costs.
    if (process.env.HEAP_SNAPSHOT) v8.writeHeapSnapshot(process.env.HEAP_SNAPSHOT);
    if (process.env.PROFILE) fs.writeFileSync(process.env.PROFILE, JSON.stringify((await session.post('Profiler.stop')).profile));
    session.disconnect();
    await node.close();
  } finally {
    worker?.kill('SIGKILL');
    await zk.stop();
    await redis.stop();
  }
}

runTool(main);
