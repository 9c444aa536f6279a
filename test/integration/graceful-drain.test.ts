/**
 * A graceful shutdown (DESIGN.md flow 9) against real ZooKeeper, Redis and nodes: a request that
 * reaches a draining worker's queue after the leader moved its waiting requests away (a fire planned
 * before the drain, a request a closing consumer fetched and put back) never runs there; it moves
 * when the worker leaves, with failover off too, instead of being reported missed.
 */
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import type { MissedItem } from '../../src/leader/failover';
import { QueuePool } from '../../src/leader/queue-pool';
import { startNode, type ShardcronNode, type StartNodeOptions } from '../../src/node';
import { defineJob, type ShardingContext } from '../../src/shared/config/job-definition';
import { silentLogger } from '../../src/shared/logger';
import { createRedisConnection } from '../../src/shared/redis/redis-connection';
import { instanceEntryCodec } from '../../src/shared/registry/instance-info';
import { QUEUE_PREFIX } from '../../src/shared/registry/queue-names';
import { registryPaths } from '../../src/shared/registry/registry-paths';
import { deferred } from '../helpers/deferred';
import { closeServices, startRedis, startZooKeeper, waitFor } from '../helpers/services';
import { uniqueNamespace } from '../helpers/zk';

jest.setTimeout(60_000);

let zkServer: ZooKeeperServer;
let redisServer: RedisServer;
const nodes: ShardcronNode[] = [];

beforeAll(async () => {
  [zkServer, redisServer] = await Promise.all([startZooKeeper(), startRedis()]);
});
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.close()));
});
afterAll(closeServices);

/** BullMQ's longest wait for a consumer's blocking fetch (its drainDelay): after it, a paused consumer fetches nothing more. */
const BLOCKING_FETCH_MS = 5_000;

it('a request that reaches a draining worker after its waiting requests moved runs elsewhere once it leaves (failover off)', async () => {
  const namespace = uniqueNamespace('graceful-drain');
  const start = async (instanceId: string, roles: StartNodeOptions['roles'], jobs: StartNodeOptions['jobs']) => {
    const node = await startNode({ zk: zkServer.connectionString, redisUrl: redisServer.url, namespace, roles, jobs, instanceId, ip: '127.0.0.1', env: {}, logger: silentLogger, shutdownGraceMs: 30_000 });
    nodes.push(node);
    return node;
  };
  // `busy` keeps w1's drain going until the test lets its run end; `late` never fires by itself.
  const release = deferred();
  const busyRuns: number[] = [];
  const busy = defineJob({
    name: 'busy',
    cron: '* * * * * ?',
    failover: false,
    execute: async () => {
      busyRuns.push(Date.now());
      await release.promise;
    },
  });
  const lateRuns: Array<Pick<ShardingContext, 'instanceId' | 'source' | 'fireTime'>> = [];
  const late = defineJob({ name: 'late', cron: '0 0 0 1 1 ? 2099', failover: false, execute: ({ instanceId, source, fireTime }) => void lateRuns.push({ instanceId, source, fireTime }) });

  const leader = await start('leader', ['scheduler'], []);
  const missed: MissedItem[] = [];
  leader.leader!.on('item:missed', (m) => missed.push(m));
  const w1 = await start('w1', ['worker'], [busy, late]);
  await start('w2', ['worker'], [late]);
  await waitFor(() => busyRuns.length > 0, { timeoutMs: 10_000, message: 'busy running on w1' });

  const closing = w1.close();
  const entry = async () => instanceEntryCodec.decode((await leader.zk.get(registryPaths.instance('w1'))).data, 'w1');
  await waitFor(async () => (await entry()).state === 'draining', { message: 'w1 draining' });
  const { queue } = await entry();
  // Every consumer of w1 is paused and its last blocking fetch over: w1 takes nothing more.
  await new Promise((resolve) => setTimeout(resolve, BLOCKING_FETCH_MS + 1_000));

  const redis = createRedisConnection(redisServer.url);
  const pool = new QueuePool(redis, QUEUE_PREFIX);
  const fireTime = Date.now();
  try {
    await pool.enqueue(new Map([[queue, [{ job: 'late', item: 0, fireTime, source: 'NORMAL', epoch: 1 }]]]));
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await pool.get(queue).getJobCounts('wait')).toEqual({ wait: 1 });
    expect(lateRuns).toEqual([]);

    release.resolve();
    await closing;
    await waitFor(() => lateRuns.length > 0, { timeoutMs: 10_000, message: 'the late request run after w1 left' });
    expect(lateRuns).toEqual([{ instanceId: 'w2', source: 'FAILOVER', fireTime }]);
    expect(missed.filter((m) => m.job === 'late')).toEqual([]);
  } finally {
    await pool.close();
    redis.disconnect();
  }
});
