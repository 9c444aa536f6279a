/**
 * A worker joining a running namespace: `N=10000 npx tsx bench/tools/worker-join.ts [DIST...]` (each
 * DIST a built dist/ directory; default this checkout's, after `npm run build`). For each DIST, on its
 * own ZooKeeper and Redis: worker-1 registers N one-item hourly jobs plus 100 jobs of 4 items firing
 * every second, a scheduler-only process leads, and once the every-second jobs run, worker-2 starts
 * with the same jobs. Prints how long worker-2 took to register and to start its first item (the
 * leader gives it items of the every-second jobs at their next fire after it joined).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { RedisServer } from '../../src/dev/redis-server';
import { ZooKeeperServer } from '../../src/dev/zookeeper-server';

const N = Number(process.env.N ?? 10_000);

const NODE = `
const { defineJob, startNode } = require(process.argv[1]);
(async () => {
  const n = Number(process.argv[2]);
  const say = (m) => process.send && process.send(m);
  const hourly = Array.from({ length: n }, (_, i) => defineJob({ name: 'h' + i, cron: '0 0 * * * ?', monitorExecution: false, execute: async () => {} }));
  const everySecond = Array.from({ length: 100 }, (_, i) => defineJob({ name: 's' + i, cron: '* * * * * ?', shardingTotalCount: 4, execute: async () => say({ type: 'start', at: Date.now() }) }));
  const roles = process.env.SHARDCRON_ROLES.split(',');
  const started = Date.now();
  await startNode({ roles, jobs: roles.includes('worker') ? [...hourly, ...everySecond] : [], concurrency: 200 });
  say({ type: 'ready', ms: Date.now() - started });
})();`;

function spawnNode(dist: string, env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, ['-e', NODE, dist, String(N)], { env: { PATH: process.env.PATH, SHARDCRON_LOG_LEVEL: 'silent', ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
}

const next = (child: ChildProcess, type: string): Promise<{ type: string; ms?: number; at?: number }> =>
  new Promise((resolve, reject) => {
    const onMessage = (m: { type: string }) => {
      if (m.type !== type) return;
      child.off('message', onMessage);
      resolve(m);
    };
    child.on('message', onMessage);
    child.once('exit', (code) => reject(new Error(`a node exited with ${code}`)));
  });

async function measure(dist: string): Promise<string> {
  const zk = await ZooKeeperServer.start();
  const redis = await RedisServer.start();
  const base = { SHARDCRON_ZK: zk.connectionString, SHARDCRON_REDIS_URL: redis.url, SHARDCRON_NAMESPACE: 'join' };
  const children: ChildProcess[] = [];
  try {
    const first = spawnNode(dist, { ...base, SHARDCRON_ROLES: 'worker', SHARDCRON_INSTANCE_ID: 'worker-1' });
    children.push(first);
    const firstReady = await next(first, 'ready');
    const leader = spawnNode(dist, { ...base, SHARDCRON_ROLES: 'scheduler', SHARDCRON_INSTANCE_ID: 'leader-1' });
    children.push(leader);
    await next(first, 'start');
    const t0 = Date.now();
    const second = spawnNode(dist, { ...base, SHARDCRON_ROLES: 'worker', SHARDCRON_INSTANCE_ID: 'worker-2' });
    children.push(second);
    const firstItem = next(second, 'start');
    const ready = await next(second, 'ready');
    const item = await firstItem;
    return `${dist}: worker-1 registered in ${firstReady.ms} ms; worker-2 joined: registered in ${ready.ms} ms, first item started ${(item.at ?? 0) - t0} ms after it was spawned`;
  } finally {
    for (const child of children) child.kill('SIGKILL');
    await zk.stop();
    await redis.stop();
  }
}

async function main(): Promise<void> {
  const dists = process.argv.slice(2).map((d) => path.resolve(d));
  for (const dist of dists.length > 0 ? dists : [path.join(__dirname, '..', '..', 'dist')]) process.stdout.write(`${await measure(dist)}\n`);
}

main().then(() => process.exit(0), (err) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
