/**
 * The warm standby (docs/design-notes.md, "Warm standby"): the scheduler next in line loads every
 * job while it waits, the one after it loads nothing, and a takeover by a warm standby loses and
 * doubles no fire, also of jobs that changed and of a worker lost while it waited.
 */
import { defineJob, type ShardcronNode } from '../../src';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { jobConfigCodec } from '../../src/shared/config/job-config';
import { TestCluster } from '../helpers/cluster';
import { closeServices, startRedis, startZooKeeper, waitFor } from '../helpers/services';
import { closeZkClients, connectZk } from '../helpers/zk';

let zk: ZooKeeperServer;
let redis: RedisServer;
let cluster: TestCluster;

beforeAll(async () => {
  [zk, redis] = await Promise.all([startZooKeeper(), startRedis()]);
});
afterAll(closeServices);
beforeEach(() => {
  cluster = new TestCluster(zk, redis);
});
afterEach(async () => {
  await cluster.close();
  await closeZkClients();
});

const everySecond = '* * * * * ?';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A scheduler-only node and the `standby:ready` events it emits. */
async function scheduler(instanceId: string, warmStandby?: boolean): Promise<{ node: ShardcronNode; ready: Array<{ jobs: number }> }> {
  const node = await cluster.start({ roles: ['scheduler'], instanceId, ...(warmStandby !== undefined && { warmStandby }) });
  const ready: Array<{ jobs: number }> = [];
  node.leader!.on('standby:ready', (event) => ready.push(event));
  return { node, ready };
}

/** The first `count` fires of `job` after `afterMs` on which all of `items` started. */
const completeFiresAfter = (job: string, items: number, afterMs: number, count: number): Promise<number[]> => cluster.waitForCompleteFires(job, items, afterMs, count, 20_000);

/** Every fire of `job` from its first to its last started each item exactly once. */
function expectEveryFireOnce(job: string, items: number): void {
  const starts = cluster.starts(job);
  const keys = starts.map((r) => `${r.fireTime}|${r.item}`);
  expect(new Set(keys).size).toBe(keys.length);
  const fires = [...new Set(starts.map((r) => r.fireTime))].sort((x, y) => x - y);
  for (let fire = fires[0]; fire < fires[fires.length - 1]; fire += 1_000) {
    expect([fire, new Set(starts.filter((r) => r.fireTime === fire).map((r) => r.item))]).toEqual([fire, new Set(Array.from({ length: items }, (_, i) => i))]);
  }
}

describe('warm standby', () => {
  it('the candidate next in line loads every job, the one after it none; the standby takes over with the changes made while it waited', async () => {
    const often = defineJob({ name: 'often', cron: everySecond, shardingTotalCount: 2, execute: () => sleep(10) });
    const hourly = defineJob({ name: 'hourly', cron: '0 0 * * * ?', execute: () => undefined });
    await cluster.start({ roles: ['worker'], jobs: [often, hourly], instanceId: 'w1' });
    await cluster.start({ roles: ['worker'], jobs: [often], instanceId: 'w2' });
    const s1 = await scheduler('s1');
    const s2 = await scheduler('s2');
    const s3 = await scheduler('s3');
    await waitFor(() => s2.ready.length > 0, { message: 's2 loads the jobs as the standby' });
    expect(s2.ready).toEqual([expect.objectContaining({ jobs: 2 })]);
    await completeFiresAfter('often', 2, 0, 2);
    expect(s1.node.leader!.isLeader).toBe(true);
    expect(s1.ready).toEqual([]);
    expect(s3.ready).toEqual([]);

    // While s2 waits: a job is added, the hourly one becomes an every-second job.
    const added = defineJob({ name: 'added', cron: everySecond, execute: () => undefined });
    await cluster.start({ roles: ['worker'], jobs: [added], instanceId: 'w3' });
    const admin = await connectZk(zk.connectionString, { namespace: cluster.namespace });
    const config = jobConfigCodec.decode(Buffer.from((await admin.getText('/hourly/config'))!), '/hourly/config');
    await admin.set('/hourly/config', jobConfigCodec.encode({ ...config, cron: everySecond }));
    await completeFiresAfter('added', 1, 0, 1);

    await s1.node.zk.close(); // the leader's session ends abruptly
    const tookOver = Date.now();
    await waitFor(() => s2.node.leader!.isLeader, { message: 's2 elected' });
    await completeFiresAfter('often', 2, tookOver + 1_000, 3);
    await completeFiresAfter('added', 1, tookOver + 1_000, 3);
    await completeFiresAfter('hourly', 1, tookOver + 1_000, 3);
    for (const [job, items] of [['often', 2], ['added', 1]] as const) expectEveryFireOnce(job, items);
    // s3 is next in line now: it loads the three jobs.
    await waitFor(() => s3.ready.length > 0, { message: 's3 loads the jobs as the new standby' });
    expect(s3.ready).toEqual([expect.objectContaining({ jobs: 3 })]);
  });

  it('a worker lost together with the leader: the warm standby that takes over runs its items on the survivor', async () => {
    const job = defineJob({ name: 'split', cron: everySecond, shardingTotalCount: 4, execute: () => sleep(10) });
    await cluster.start({ roles: ['worker'], jobs: [job], instanceId: 'w1' });
    const w2 = await cluster.start({ roles: ['worker'], jobs: [job], instanceId: 'w2' });
    const s1 = await scheduler('s1');
    const s2 = await scheduler('s2');
    await waitFor(() => s2.ready.length > 0, { message: 's2 loads the jobs as the standby' });
    await completeFiresAfter('split', 4, 0, 2);
    expect(cluster.starts('split').some((r) => r.instanceId === 'w2')).toBe(true);

    await Promise.all([w2.zk.close(), s1.node.zk.close()]);
    const lost = Date.now();
    await waitFor(() => s2.node.leader!.isLeader, { message: 's2 elected' });
    const fires = await completeFiresAfter('split', 4, lost + 1_000, 3);
    for (const fire of fires) expect(cluster.starts('split').filter((r) => r.fireTime === fire).map((r) => r.instanceId)).toEqual(['w1', 'w1', 'w1', 'w1']);
  });

  it("a job that never fired and whose item nodes the standby saw is not laid out again by the standby's takeover", async () => {
    const tick = defineJob({ name: 'tick', cron: everySecond, execute: () => undefined });
    const daily = defineJob({ name: 'daily', cron: '0 0 3 * * ?', shardingTotalCount: 3, execute: () => undefined });
    await cluster.start({ roles: ['worker'], jobs: [tick, daily], instanceId: 'w1' });
    const admin = await connectZk(zk.connectionString, { namespace: cluster.namespace });
    const s1 = await scheduler('s1');
    await waitFor(async () => (await admin.children('/daily/sharding').catch(() => [])).length === 3, { message: 'the leader lays out daily' });
    const s2 = await scheduler('s2');
    await waitFor(() => s2.ready.length > 0, { message: 's2 loads the jobs as the standby' });
    const registry = (s2.node.leader as unknown as { registry: { layOut(job: string, total: number): void } }).registry;
    const layOut = jest.spyOn(registry, 'layOut');
    await s1.node.zk.close();
    const tookOver = Date.now();
    await waitFor(() => s2.node.leader!.isLeader, { message: 's2 elected' });
    await completeFiresAfter('tick', 1, tookOver + 1_000, 2);
    expect(layOut.mock.calls.map(([job]) => job)).not.toContain('daily');
    expect((await admin.children('/daily/sharding')).sort()).toEqual(['0', '1', '2']);
  });

  it('with warmStandby off the next in line loads nothing until elected, and still takes over', async () => {
    const job = defineJob({ name: 'cold', cron: everySecond, shardingTotalCount: 2, execute: () => undefined });
    await cluster.start({ roles: ['worker'], jobs: [job], instanceId: 'w1' });
    const s1 = await scheduler('s1', false);
    const s2 = await scheduler('s2', false);
    await completeFiresAfter('cold', 2, 0, 2);
    expect(s2.ready).toEqual([]);
    await s1.node.zk.close();
    const tookOver = Date.now();
    await waitFor(() => s2.node.leader!.isLeader, { message: 's2 elected' });
    await completeFiresAfter('cold', 2, tookOver + 1_000, 2);
    expectEveryFireOnce('cold', 2);
  });
});
