/**
 * How many bytes of watched paths a worker, a leader and a warm standby re-arm after a reconnect:
 * `N=2000 npx tsx bench/tools/watch-bytes.ts`. Starts its own ZooKeeper and Redis, N one-item jobs
 * (namespace `watchbytes`, names `job-0`...), and prints watches and path bytes per job for each role.
 */
import { defineJob, startNode } from '../../src';
import { RedisServer } from '../../src/dev/redis-server';
import { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import type { WatchRegistry } from '../../src/shared/zk/driver/watch-registry';
const N = Number(process.env.N ?? 2000);
function bytes(node: { zk: unknown }): { watches: number; bytes: number } {
  const session = (node.zk as { current: { raw: { connectionManager: { watcherManager: WatchRegistry } } } }).current;
  const reg = session.raw.connectionManager.watcherManager;
  const chunks = reg.chunks(Infinity);
  const paths = chunks.flatMap((c) => [...c.data, ...c.exist, ...c.child]);
  return { watches: paths.length, bytes: paths.reduce((n, p) => n + 4 + Buffer.byteLength(p), 0) };
}
(async () => {
  const zk = await ZooKeeperServer.start({ jvm: 'server', maxHeapMb: 1024 });
  const redis = await RedisServer.start();
  const common = { zk: zk.connectionString, redisUrl: redis.url, namespace: 'watchbytes' };
  const jobs = Array.from({ length: N }, (_, i) => defineJob({ name: `job-${i}`, cron: '0 * * * * ?', execute: async () => {} }));
  const worker = await startNode({ ...common, roles: ['worker'], jobs, instanceId: 'worker-1' });
  const leader = await startNode({ ...common, roles: ['scheduler'], instanceId: 'leader-1' });
  await new Promise<void>((r) => leader.leader!.once('leader:elected', () => r()));
  const standby = await startNode({ ...common, roles: ['scheduler'], instanceId: 'standby-1' });
  await new Promise<void>((r) => standby.leader!.once('standby:ready', () => r()));
  for (const [name, node] of [['worker', worker], ['leader', leader], ['standby', standby]] as const) {
    const b = bytes(node);
    console.log(`${N} jobs, ${name}: ${b.watches} watches (${(b.watches / N).toFixed(1)} per job), ${b.bytes} bytes of paths (${Math.round(b.bytes / N)} per job; 1 MB at ${Math.round(1048575 / (b.bytes / N))} jobs)`);
  }
  await Promise.all([standby.close(), leader.close(), worker.close()]);
  await zk.close(); await redis.close();
  process.exit(0);
})();
