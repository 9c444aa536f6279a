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

/** Starts nodes of one namespace. */
function cluster(): (instanceId: string, roles: StartNodeOptions['roles'], jobs: StartNodeOptions['jobs'], shutdownGraceMs?: number) => Promise<ShardcronNode> {
  const namespace = uniqueNamespace('graceful-drain');
  return async (instanceId, roles, jobs, shutdownGraceMs = 30_000) => {
    const node = await startNode({ zk: zkServer.connectionString, redisUrl: redisServer.url, namespace, roles, jobs, instanceId, ip: '127.0.0.1', env: {}, logger: silentLogger, shutdownGraceMs });
    nodes.push(node);
    return node;
  };
}

/** The queue of `instanceId`'s current incarnation, and its state, as its instance entry says. */
async function entryOf(node: ShardcronNode, instanceId: string): Promise<{ queue: string; state: string }> {
  return instanceEntryCodec.decode((await node.zk.get(registryPaths.instance(instanceId))).data, instanceId);
}

it('a request that reaches a draining worker after its waiting requests moved runs elsewhere once it leaves (failover off)', async () => {
  const start = cluster();
  // `busy` keeps w1's drain going until the test lets its run end. Neither job fires by itself: the
  // test enqueues their requests, so w1's queue has no delayed request and a paused consumer's last
  // blocking fetch lasts at most BullMQ's drainDelay.
  const release = deferred();
  const busyRuns: number[] = [];
  const busy = defineJob({
    name: 'busy',
    cron: '0 0 0 1 1 ? 2099',
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
  const redis = createRedisConnection(redisServer.url);
  const pool = new QueuePool(redis, QUEUE_PREFIX);
  const { queue } = await entryOf(leader, 'w1');
  try {
    await pool.enqueue(new Map([[queue, [{ job: 'busy', item: 0, fireTime: Date.now(), source: 'NORMAL', epoch: 1 }]]]));
    await waitFor(() => busyRuns.length > 0, { timeoutMs: 10_000, message: 'busy running on w1' });

    const closing = w1.close();
    await waitFor(async () => (await entryOf(leader, 'w1')).state === 'draining', { message: 'w1 draining' });
    // Every consumer of w1 is paused and its last blocking fetch over: w1 takes nothing more.
    await new Promise((resolve) => setTimeout(resolve, BLOCKING_FETCH_MS + 1_000));

    const fireTime = Date.now();
    await pool.enqueue(new Map([[queue, [{ job: 'late', item: 0, fireTime, source: 'NORMAL', epoch: 1 }]]]));
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await pool.get(queue).getJobCounts('wait')).toEqual({ wait: 1 });
    expect(lateRuns).toEqual([]);

    release.resolve();
    await closing;
    await waitFor(() => lateRuns.length > 0, { timeoutMs: 10_000, message: 'the late request run after w1 left' });
    expect(lateRuns).toEqual([{ instanceId: 'w2', source: 'FAILOVER', fireTime }]);
    expect(missed).toEqual([]);
  } finally {
    release.resolve();
    await pool.close();
    redis.disconnect();
  }
});

it('past the grace period a run is aborted, and its request runs on the other worker once the first leaves (failover off)', async () => {
  const start = cluster();
  const runs: Array<Pick<ShardingContext, 'instanceId' | 'source'>> = [];
  const slow = defineJob({
    name: 'slow',
    cron: '0 0 0 1 1 ? 2099',
    failover: false,
    execute: async ({ instanceId, source, signal }) => {
      runs.push({ instanceId, source });
      if (instanceId === 'w1') await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    },
  });
  const leader = await start('leader', ['scheduler'], []);
  const missed: MissedItem[] = [];
  leader.leader!.on('item:missed', (m) => missed.push(m));
  const w1 = await start('w1', ['worker'], [slow], 1_000);
  const ended: string[] = [];
  w1.worker!.on('item:finished', (e) => ended.push(`${e.instanceId} ${e.status}`));
  await start('w2', ['worker'], [slow]);

  const redis = createRedisConnection(redisServer.url);
  const pool = new QueuePool(redis, QUEUE_PREFIX);
  try {
    const { queue } = await entryOf(leader, 'w1');
    await pool.enqueue(new Map([[queue, [{ job: 'slow', item: 0, fireTime: Date.now(), source: 'NORMAL', epoch: 1 }]]]));
    await waitFor(() => runs.length === 1, { message: 'the run on w1' });
    const closeStarted = Date.now();
    await w1.close();
    // The grace period (1 s), then the aborted run's return, well within the 5 s the close allows it.
    expect(Date.now() - closeStarted).toBeLessThan(4_000);
    expect(ended).toEqual(['w1 aborted']);
    await waitFor(() => runs.length === 2, { timeoutMs: 10_000, message: 'the aborted request run on w2' });
    expect(runs).toEqual([
      { instanceId: 'w1', source: 'NORMAL' },
      { instanceId: 'w2', source: 'FAILOVER' },
    ]);
    expect(missed).toEqual([]);
  } finally {
    await pool.close();
    redis.disconnect();
  }
});
