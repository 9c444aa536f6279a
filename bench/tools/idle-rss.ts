/**
 * Idle RSS of a worker-only node: `npx tsx bench/tools/idle-rss.ts DIST [DIST...]`, each DIST a built
 * dist/ directory (this checkout's after `npm run build`, or another commit's, to compare). Starts its
 * own ZooKeeper and Redis, then for each DIST three times: a process that starts a node with the worker
 * role and 100 one-item jobs that never fire, waits 5 s and prints its RSS and V8 heap in use.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { RedisServer } from '../../src/dev/redis-server';
import { ZooKeeperServer } from '../../src/dev/zookeeper-server';

const CHILD = `
const { defineJob, startNode } = require(process.argv[1]);
(async () => {
  const jobs = Array.from({ length: 100 }, (_, i) => defineJob({ name: 'j' + i, cron: '0 0 0 1 1 ? 2099', execute: async () => {} }));
  const node = await startNode({ roles: ['worker'], jobs });
  await new Promise((resolve) => setTimeout(resolve, 5000));
  const { rss, heapUsed } = process.memoryUsage();
  process.stdout.write(JSON.stringify({ rssMb: Math.round(rss / 2 ** 17) / 8, heapUsedMb: Math.round(heapUsed / 2 ** 17) / 8 }) + '\\n');
  await node.close();
  process.exit(0);
})();`;

async function main(): Promise<void> {
  const dists = process.argv.slice(2).map((d) => path.resolve(d));
  if (dists.length === 0) throw new Error('usage: npx tsx bench/tools/idle-rss.ts DIST [DIST...] (built dist/ directories)');
  const zk = await ZooKeeperServer.start();
  const redis = await RedisServer.start();
  try {
    for (const dist of dists) {
      for (let run = 0; run < 3; run += 1) {
        const child = spawn(process.execPath, ['-e', CHILD, dist], {
          env: { PATH: process.env.PATH, SHARDCRON_ZK: zk.connectionString, SHARDCRON_REDIS_URL: redis.url, SHARDCRON_NAMESPACE: `idle${run}x${Date.now()}`, SHARDCRON_LOG_LEVEL: 'silent' },
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        let out = '';
        child.stdout.on('data', (chunk) => (out += chunk));
        const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
        process.stdout.write(`${dist}: ${code === 0 ? out.trim() : `exited with ${code}`}\n`);
      }
    }
  } finally {
    await zk.stop();
    await redis.stop();
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
