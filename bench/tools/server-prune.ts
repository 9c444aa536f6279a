/**
 * A rolling deploy onto a new address: `N=10000 ROLLOUTS=3 RETENTION_MS=10000 npx tsx
 * bench/tools/server-prune.ts [DIST]` (DIST a built dist/ directory; default this checkout's, after
 * `npm run build`; OLD_BUILD=1 for a build without the sweep). On its own ZooKeeper and Redis: a scheduler-only leader, and a worker of N
 * hourly one-item jobs on 10.9.0.1; then, ROLLOUTS times, the worker is replaced by one on the next
 * address (the old one stopped, the new one started, as a Kubernetes rollout of one pod does).
 * Prints ZooKeeper's znode count after each rollout and once the leader's retention has passed,
 * and how long the leader took to remove the old address's nodes, with its CPU meanwhile.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { RedisServer } from '../../src/dev/redis-server';
import { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { zkFootprint } from '../lib/services';
import { runTool } from '../lib/tool';

const N = Number(process.env.N ?? 10_000);
const ROLLOUTS = Number(process.env.ROLLOUTS ?? 3);
const RETENTION_MS = Number(process.env.RETENTION_MS ?? 10_000);
/** OLD_BUILD=1: DIST predates SHARDCRON_SERVER_RETENTION_MS (which it would refuse as unknown). */
const OLD_BUILD = process.env.OLD_BUILD === '1';

/** CPU milliseconds of `pid` so far (utime + stime from /proc, 100 ticks a second). */
function cpuMs(pid: number | undefined): number {
  if (pid === undefined) return 0;
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

const NODE = `
const { defineJob, startNode } = require(process.argv[1]);
(async () => {
  const n = Number(process.argv[2]);
  const roles = process.env.SHARDCRON_ROLES.split(',');
  const jobs = roles.includes('worker') ? Array.from({ length: n }, (_, i) => defineJob({ name: 'h' + i, cron: '0 0 * * * ?', monitorExecution: false, execute: async () => {} })) : [];
  const node = await startNode({ roles, jobs, ...(process.env.BENCH_IP && { ip: process.env.BENCH_IP }) });
  process.send({ type: 'ready' });
  process.on('SIGTERM', () => node.close().then(() => process.exit(0)));
})();`;

function spawnNode(dist: string, env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, ['-e', NODE, dist, String(N)], { env: { PATH: process.env.PATH, SHARDCRON_LOG_LEVEL: 'silent', ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
}

const ready = (child: ChildProcess): Promise<void> =>
  new Promise((resolve, reject) => {
    child.on('message', (m: { type: string }) => m.type === 'ready' && resolve());
    child.once('exit', (code) => reject(new Error(`a node exited with ${code}`)));
  });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const dist = path.resolve(process.argv[2] ?? path.join(__dirname, '..', '..', 'dist'));
  const zk = await ZooKeeperServer.start({ jvm: 'server', maxHeapMb: 2048 });
  const redis = await RedisServer.start();
  const base = { SHARDCRON_ZK: zk.connectionString, SHARDCRON_REDIS_URL: redis.url, SHARDCRON_NAMESPACE: 'prune', ...(OLD_BUILD ? {} : { SHARDCRON_SERVER_RETENTION_MS: String(RETENTION_MS) }) };
  const children: ChildProcess[] = [];
  const znodes = async () => (await zkFootprint(zk.port, zk.pid!)).znodes;
  // Until the znode count stays put over 2 s (the workers' server nodes made, the leader's removals done).
  const settle = async (): Promise<number> => {
    let last = await znodes();
    for (;;) {
      await sleep(2_000);
      const now = await znodes();
      if (now === last) return now;
      last = now;
    }
  };
  try {
    const leader = spawnNode(dist, { ...base, SHARDCRON_ROLES: 'scheduler', SHARDCRON_INSTANCE_ID: 'leader-1' });
    children.push(leader);
    await ready(leader);
    let worker = spawnNode(dist, { ...base, SHARDCRON_ROLES: 'worker', SHARDCRON_INSTANCE_ID: 'w-1', BENCH_IP: '10.9.0.1' });
    children.push(worker);
    await ready(worker);
    process.stdout.write(`${N} jobs, one worker on 10.9.0.1: ${await settle()} znodes\n`);
    for (let r = 1; r <= ROLLOUTS; r += 1) {
      const ip = `10.9.0.${r + 1}`;
      const next = spawnNode(dist, { ...base, SHARDCRON_ROLES: 'worker', SHARDCRON_INSTANCE_ID: `w-${r + 1}`, BENCH_IP: ip });
      children.push(next);
      await ready(next);
      worker.kill('SIGTERM');
      await new Promise((resolve) => worker.once('exit', resolve));
      const goneAt = Date.now();
      const cpu0 = cpuMs(leader.pid);
      worker = next;
      const before = await settle();
      process.stdout.write(`rollout ${r} to ${ip}: ${before} znodes with the old address's nodes\n`);
      // Until the count drops by the old address's N nodes (or 3 retentions pass).
      let after = before;
      while (after > before - N && Date.now() - goneAt < 3 * RETENTION_MS + 60_000) {
        await sleep(250);
        after = await znodes();
      }
      const prunedAt = Date.now();
      process.stdout.write(`  removed ${before - after} nodes ${prunedAt - goneAt} ms after the old worker left (retention ${RETENTION_MS} ms); leader CPU meanwhile ${cpuMs(leader.pid) - cpu0} ms; ${await settle()} znodes now\n`);
    }
  } finally {
    for (const child of children) child.kill('SIGKILL');
    await zk.stop();
    await redis.stop();
  }
}

runTool(main);
