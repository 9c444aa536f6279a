/**
 * A tick of more job-fires than the leader's tick chunk (TICK_CHUNK, 1,000; here 2, so that a few
 * jobs exercise it) against real ZooKeeper and Redis: it goes in chunks, jobs of shorter period
 * first, each fire of each job is dispatched once and runs once on every item, in fire order.
 */
import { defineJob } from '../../src';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { LeaderService } from '../../src/leader/leader-service';
import { createRedisClient } from '../../src/shared/redis/redis-connection';
import { queuePrefix } from '../../src/shared/registry/queue-names';
import { TestCluster } from '../helpers/cluster';
import { closeServices, expectNoLiveServices, startRedis, startZooKeeper } from '../helpers/services';
import { closeZkClients, connectZk } from '../helpers/zk';

let zk: ZooKeeperServer;
let redis: RedisServer;

beforeAll(async () => {
  [zk, redis] = await Promise.all([startZooKeeper(), startRedis()]);
});
afterAll(async () => {
  await closeServices();
  expectNoLiveServices();
});

test('a tick beyond the chunk size dispatches jobs of shorter period first, each fire once, and every item runs each fire once', async () => {
  const cluster = new TestCluster(zk, redis);
  // Three every-second jobs and three every-2-seconds ones, two items each: six job-fires every
  // even second, three chunks of two. Defined rarest first: only the period orders them.
  const rare = ['r0', 'r1', 'r2'].map((name) => defineJob({ name, cron: '0/2 * * * * ?', shardingTotalCount: 2, execute: () => undefined }));
  const often = ['f0', 'f1', 'f2'].map((name) => defineJob({ name, cron: '* * * * * ?', shardingTotalCount: 2, execute: () => undefined }));
  const zkClient = await connectZk(zk.connectionString, { namespace: cluster.namespace, sessionTimeoutMs: 2_000 });
  const connection = createRedisClient({ url: redis.url }, { name: 'leader' });
  const leader = new LeaderService({ zk: zkClient, redis: connection, namespace: cluster.namespace, queuePrefix: queuePrefix(cluster.namespace, { url: redis.url }), instanceId: 'leader', tickChunk: 2 });
  const dispatched: Array<{ job: string; fireTime: number }> = [];
  const skipped: Array<{ job: string; fireTime: number }> = [];
  leader.on('fire:dispatched', ({ job, fireTime }) => void dispatched.push({ job, fireTime }));
  leader.on('fire:skipped', (event) => void skipped.push(event));
  try {
    await cluster.start({ roles: ['worker'], jobs: [...rare, ...often], instanceId: 'w1' });
    await leader.start();
    const from = Date.now() + 1_000;
    // Four even seconds after `from`, each with all six jobs.
    const evens = await cluster.waitForCompleteFires('r2', 2, from, 4, 20_000);
    await cluster.waitForCompleteFires('f2', 2, evens[3] - 1, 1);

    for (const fireTime of evens) {
      const order = dispatched.filter((d) => d.fireTime === fireTime).map((d) => d.job);
      expect(order.slice(0, 3).sort()).toEqual(['f0', 'f1', 'f2']);
      expect(order.slice(3).sort()).toEqual(['r0', 'r1', 'r2']);
    }
    const counted = dispatched.filter((d) => d.fireTime >= evens[0] && d.fireTime <= evens[3]);
    // Each job's fires dispatched once each, in fire order.
    for (const job of [...rare, ...often].map((j) => j.name)) {
      const fires = counted.filter((d) => d.job === job).map((d) => d.fireTime);
      expect(fires).toEqual([...new Set(fires)].sort((a, b) => a - b));
      expect(fires).toHaveLength(job.startsWith('f') ? (evens[3] - evens[0]) / 1_000 + 1 : 4);
    }
    // Every item of every fire started once.
    const starts = cluster.starts().filter((s) => s.fireTime >= evens[0] && s.fireTime <= evens[3]);
    const keys = starts.map((s) => `${s.job}|${s.fireTime}|${s.item}`);
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys.length).toBe(counted.length * 2);
    expect(skipped.filter((s) => s.fireTime >= evens[0])).toEqual([]);
  } finally {
    await leader.close();
    await connection.quit();
    await cluster.close();
    await closeZkClients();
  }
});
