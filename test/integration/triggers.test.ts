/**
 * Manual triggers (DESIGN.md flow 10) against real ZooKeeper, Redis and nodes: the leader runs every
 * enabled item of a triggered job once with source TRIGGER, a trigger that finds an item running
 * runs it once more right after, a disabled job's trigger is refused, and a trigger survives a
 * leader change and runs once.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { defineJob, type FireContext } from '../../src/shared/config/job-definition';
import { createRedisConnection } from '../../src/shared/redis/redis-connection';
import { jobConfigCodec } from '../../src/shared/config/job-config';
import { registryPaths } from '../../src/shared/registry/registry-paths';
import { triggerRequestCodec } from '../../src/shared/registry/trigger-request';
import type { ZkClient } from '../../src/shared/zk';
import { TestCluster } from '../helpers/cluster';
import { closeServices, startRedis, startZooKeeper, waitFor } from '../helpers/services';
import { closeZkClients, connectZk } from '../helpers/zk';

let zk: ZooKeeperServer;
let redis: RedisServer;
let cluster: TestCluster;
let admin: ZkClient;

beforeAll(async () => {
  [zk, redis] = await Promise.all([startZooKeeper(), startRedis()]);
});
afterAll(closeServices);
beforeEach(async () => {
  cluster = new TestCluster(zk, redis);
  admin = await connectZk(zk.connectionString, { namespace: cluster.namespace });
});
afterEach(async () => {
  await cluster.close();
  await closeZkClients();
});

let serial = 0;
/** Writes a trigger request as the admin layer does; returns its id. */
async function trigger(job: string): Promise<string> {
  const requestId = `${Date.now().toString(36)}-${(serial += 1)}`;
  await admin.ensurePath(registryPaths.triggers(job));
  await admin.create(registryPaths.trigger(job, requestId), triggerRequestCodec.encode({ requestId, requestedAt: Date.now(), requestedBy: 'test' }));
  return requestId;
}

const triggerRuns = (job: string) => cluster.starts(job).filter((s) => s.source === 'TRIGGER');

describe('manual triggers', () => {
  it('a trigger-only job runs each item once with source TRIGGER, and the request is gone', async () => {
    const job = defineJob({ name: 'on-demand', shardingTotalCount: 3, shardingItemParameters: '0=a,1=b,2=c', execute: () => sleep(20) });
    for (const id of ['w1', 'w2']) await cluster.start({ roles: ['worker'], jobs: [job], instanceId: id });
    const leader = await cluster.start({ roles: ['scheduler'], instanceId: 'leader' });
    await waitFor(() => leader.leader!.isLeader, { message: 'leader elected' });
    await sleep(1_500);
    expect(cluster.starts('on-demand')).toEqual([]); // no cron: nothing runs by itself
    const requestId = await trigger('on-demand');
    await waitFor(() => triggerRuns('on-demand').length === 3, { timeoutMs: 10_000, message: 'three TRIGGER runs' });
    await waitFor(async () => (await admin.exists(registryPaths.trigger('on-demand', requestId))) === null, { message: 'the request node removed' });
    await sleep(1_000);
    const runs = triggerRuns('on-demand');
    expect(runs.map((r) => r.item).sort()).toEqual([0, 1, 2]);
    expect(new Set(runs.map((r) => r.fireTime)).size).toBe(1);
    expect(runs[0].fireTime % 1_000).not.toBe(0); // never taken for a scheduled fire
    expect(new Set(runs.map((r) => r.instanceId))).toEqual(new Set(['w1', 'w2']));
    expect(cluster.finishes('on-demand').every((f) => f.status === 'completed')).toBe(true);
  });

  it('a triggered fire has its once-per-fire listeners: beforeFire and afterFire once per trigger, around its items', async () => {
    const calls: Array<{ event: string; fireTime: number; source: string; items: number; at: number }> = [];
    const record = (event: string) => (fire: FireContext) => void calls.push({ event, fireTime: fire.fireTime, source: fire.source, items: fire.shardingTotalCount, at: Date.now() });
    const job = defineJob({ name: 'on-demand-listened', shardingTotalCount: 3, execute: () => sleep(50), listeners: { beforeFire: record('before'), afterFire: record('after') } });
    for (const id of ['w1', 'w2']) await cluster.start({ roles: ['worker'], jobs: [job], instanceId: id });
    const leader = await cluster.start({ roles: ['scheduler'], instanceId: 'leader' });
    await waitFor(() => leader.leader!.isLeader, { message: 'leader elected' });
    for (const round of [1, 2]) {
      await trigger('on-demand-listened');
      await waitFor(() => calls.filter((c) => c.event === 'after').length === round, { timeoutMs: 10_000, message: `afterFire of trigger ${round}` });
    }
    await sleep(500);
    const fires = [...new Set(triggerRuns('on-demand-listened').map((r) => r.fireTime))];
    expect(fires).toHaveLength(2);
    for (const fireTime of fires) {
      const ofFire = calls.filter((c) => c.fireTime === fireTime);
      expect(ofFire.map((c) => [c.event, c.source, c.items])).toEqual([['before', 'TRIGGER', 3], ['after', 'TRIGGER', 3]]);
      const starts = cluster.starts('on-demand-listened').filter((s) => s.fireTime === fireTime);
      const finishes = cluster.finishes('on-demand-listened').filter((f) => f.fireTime === fireTime);
      expect(ofFire[0].at).toBeLessThanOrEqual(Math.min(...starts.map((s) => s.at)));
      expect(ofFire[1].at).toBeGreaterThanOrEqual(Math.max(...finishes.map((f) => f.at)));
    }
  });

  it('a trigger that finds an item running runs it once more right after; nothing is dropped', async () => {
    let first = true;
    const job = defineJob({
      name: 'slow-once',
      shardingTotalCount: 1,
      misfire: false,
      execute: () => {
        const wait = first ? 2_000 : 10;
        first = false;
        return sleep(wait);
      },
    });
    await cluster.start({ roles: ['worker'], jobs: [job], instanceId: 'w1' });
    const leader = await cluster.start({ roles: ['scheduler'], instanceId: 'leader' });
    await waitFor(() => leader.leader!.isLeader, { message: 'leader elected' });
    await trigger('slow-once');
    await waitFor(() => triggerRuns('slow-once').length === 1, { timeoutMs: 10_000, message: 'the first trigger runs' });
    await trigger('slow-once');
    await waitFor(() => cluster.finishes('slow-once').filter((f) => f.status === 'completed').length === 2, { timeoutMs: 10_000, message: 'both triggers completed' });
    const [a, b] = triggerRuns('slow-once');
    const aEnd = cluster.finishes('slow-once').find((f) => f.fireTime === a.fireTime)!;
    expect(b.fireTime).toBeGreaterThan(a.fireTime);
    // Not at the same time (misfire off does not drop it either): right after the first ended.
    expect(b.at).toBeGreaterThanOrEqual(aEnd.at);
    expect(b.at - aEnd.at).toBeLessThan(1_500);
    expect(cluster.overlaps('slow-once')).toEqual([]);
  });

  it('a trigger whose enqueue Redis refused runs once Redis takes writes again, under the same leader', async () => {
    // Found in review: the failure was logged and the trigger stayed undone until a leader change.
    const job = defineJob({ name: 'refused-trigger', shardingTotalCount: 2, execute: () => undefined });
    await cluster.start({ roles: ['worker'], jobs: [job], instanceId: 'w1' });
    const leader = await cluster.start({ roles: ['scheduler'], instanceId: 'leader' });
    await waitFor(() => leader.leader!.isLeader, { message: 'leader elected' });
    const redisAdmin = createRedisConnection(redis.url);
    let requestId: string;
    try {
      await redisAdmin.config('SET', 'maxmemory-policy', 'noeviction');
      await redisAdmin.config('SET', 'maxmemory', '1');
      requestId = await trigger('refused-trigger');
      await sleep(1_500);
      expect(triggerRuns('refused-trigger')).toEqual([]);
    } finally {
      await redisAdmin.config('SET', 'maxmemory', '0');
      redisAdmin.disconnect();
    }
    await waitFor(() => triggerRuns('refused-trigger').length === 2, { timeoutMs: 15_000, message: 'both items ran' });
    await waitFor(async () => (await admin.exists(registryPaths.trigger('refused-trigger', requestId))) === null, { message: 'the request node removed' });
    expect(leader.leader!.isLeader).toBe(true);
    expect(triggerRuns('refused-trigger').map((s) => s.item).sort()).toEqual([0, 1]);
  });

  it('a disabled job refuses a trigger: nothing runs and the request is removed', async () => {
    const job = defineJob({ name: 'off', shardingTotalCount: 2, execute: () => undefined });
    await cluster.start({ roles: ['worker'], jobs: [job], instanceId: 'w1' });
    const leader = await cluster.start({ roles: ['scheduler'], instanceId: 'leader' });
    await waitFor(() => leader.leader!.isLeader, { message: 'leader elected' });
    const refused: string[] = [];
    leader.leader!.on('trigger:dispatched', (e) => e.refused && refused.push(e.refused));
    const config = jobConfigCodec.decode((await admin.get(registryPaths.jobConfig('off'))).data, 'config');
    await admin.set(registryPaths.jobConfig('off'), jobConfigCodec.encode({ ...config, disabled: true }));
    await sleep(500);
    const requestId = await trigger('off');
    await waitFor(() => refused.length === 1, { timeoutMs: 10_000, message: 'the trigger refused' });
    expect(refused).toEqual(['job disabled']);
    expect(await admin.exists(registryPaths.trigger('off', requestId))).toBeNull();
    await sleep(1_000);
    expect(cluster.starts('off')).toEqual([]);
  });

  it('a trigger written just before the leader is killed runs exactly once on the new leader', async () => {
    const job = defineJob({ name: 'handover', shardingTotalCount: 4, execute: () => sleep(10) });
    for (const id of ['w1', 'w2']) await cluster.start({ roles: ['worker'], jobs: [job], instanceId: id });
    const s1 = await cluster.start({ roles: ['scheduler'], instanceId: 's1' });
    const s2 = await cluster.start({ roles: ['scheduler'], instanceId: 's2' });
    await waitFor(() => s1.leader!.isLeader, { message: 's1 leads' });
    await trigger('handover');
    await s1.zk.close(); // right after: the leader's session ends abruptly, as with kill -9
    await waitFor(() => s2.leader!.isLeader, { timeoutMs: 10_000, message: 's2 takes over' });
    await waitFor(() => triggerRuns('handover').length >= 4, { timeoutMs: 10_000, message: 'the trigger ran on the new leader' });
    await sleep(1_500);
    const keys = triggerRuns('handover').map((r) => `${r.fireTime}|${r.item}`);
    expect(keys.sort()).toEqual([...new Set(keys)].sort());
    expect(keys).toHaveLength(4);
  });
});
