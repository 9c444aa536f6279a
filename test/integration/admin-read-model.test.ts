/**
 * The admin layer against real ZooKeeper and Redis and real shardcron processes: the read model
 * answers polls from memory and follows the cluster; corrupt nodes are reported by path; config
 * updates are validated; a removal reports the requests a worker is still running.
 */
import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { Admin, ReadModel } from '../../src/admin';
import { CATCH_UP_MS } from '../../src/admin/read-model';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { jobConfigCodec } from '../../src/shared/config/job-config';
import { defineJob } from '../../src/shared/config/job-definition';
import { ConfigError, ErrorCodes } from '../../src/shared/errors';
import { executionJobId, type ExecutionRequest } from '../../src/shared/registry/execution-request';
import { itemRecordKey } from '../../src/shared/registry/item-records';
import { QUEUE_PREFIX } from '../../src/shared/registry/queue-names';
import { registryPaths as paths } from '../../src/shared/registry/registry-paths';
import { createRedisConnection } from '../../src/shared/redis/redis-connection';
import type { ZkClient } from '../../src/shared/zk';
import { ProcessCluster } from '../helpers/process-cluster';
import { closeServices, eventually, startRedis, startZooKeeper, waitFor } from '../helpers/services';
import { closeZkClients, connectZk, uniqueNamespace } from '../helpers/zk';

const SESSION_MS = 2_000;
/** Fires once, in 2199: the cluster writes nothing while the polls are counted. */
const QUIET_CRON = '0 0 0 1 1 ? 2199';

let zkServer: ZooKeeperServer;
let redisServer: RedisServer;

beforeAll(async () => {
  [zkServer, redisServer] = await Promise.all([startZooKeeper(), startRedis()]);
});

afterAll(closeServices);

afterEach(async () => {
  jest.restoreAllMocks();
  await closeZkClients();
});

/**
 * Counts the reads `zk` sends (get, children, exists) from now on, leaving out the client's own
 * heartbeat (`exists('/')` without a watch, every third of the session timeout).
 */
function countReads(zk: ZkClient): { reads(): string[]; reset(): void } {
  const spies = (['get', 'children', 'exists'] as const).map((method) => [method, jest.spyOn(zk, method) as jest.SpyInstance] as const);
  const isHeartbeat = (method: string, args: unknown[]) => method === 'exists' && args[0] === '/' && args.length === 1;
  return {
    reads: () => spies.flatMap(([method, spy]) => spy.mock.calls.filter((args: unknown[]) => !isHeartbeat(method, args)).map((args: unknown[]) => `${method} ${String(args[0])}`)),
    reset: () => spies.forEach(([, spy]) => spy.mockClear()),
  };
}

describe('the read model over a live cluster', () => {
  let cluster: ProcessCluster;
  let zk: ZkClient;
  let model: ReadModel;
  let admin: Admin;
  let redis: Redis;

  beforeAll(async () => {
    cluster = new ProcessCluster({ zk: zkServer.connectionString, redisUrl: redisServer.url, sessionTimeoutMs: SESSION_MS });
    const jobs = [{ name: 'quiet', cron: QUIET_CRON, shardingTotalCount: 3 }];
    await Promise.all([cluster.start('leader', 'scheduler', jobs), cluster.start('w1', 'worker', jobs), cluster.start('w2', 'worker', jobs)]);
  });

  afterAll(async () => {
    await cluster.close();
  });

  beforeEach(async () => {
    zk = await connectZk(zkServer.connectionString, { namespace: cluster.namespace });
    redis = createRedisConnection(redisServer.url);
    admin = new Admin({ zk, redis, namespace: cluster.namespace });
    // The leader lays out the items of a job that never fired: wait until it has, so the cluster is quiet.
    await waitFor(async () => (await Promise.all([0, 1, 2].map((i) => zk.exists(paths.shardingItem('quiet', i))))).every(Boolean), { message: 'items laid out' });
  });

  afterEach(async () => {
    await model?.close();
    await admin.close();
    redis.disconnect();
  });

  it('answers every poll from memory: no ZooKeeper read per poll once started', async () => {
    const counter = countReads(zk);
    model = await new ReadModel({ zk }).start();
    const [detail] = await Promise.all([model.getJob('quiet'), model.listJobs(), model.listInstances()]);
    expect(detail.items.map((i) => i.item)).toEqual([0, 1, 2]);
    // The start read every job node, and the first detail every item node.
    const startReads = counter.reads();
    expect(startReads.length).toBeGreaterThan(10);
    expect(startReads).toEqual(expect.arrayContaining(['get /quiet/config', 'children /.cluster/instances', 'get /.cluster/instances/w1', 'children /quiet/sharding/2']));

    counter.reset();
    for (let poll = 0; poll < 20; poll += 1) {
      const [jobs, job, instances] = await Promise.all([model.listJobs(), model.getJob('quiet'), model.listInstances()]);
      expect(jobs).toEqual([expect.objectContaining({ name: 'quiet', cron: QUIET_CRON, shardingTotalCount: 3, instances: 2, lastFireTime: null })]);
      expect(jobs[0].status).not.toBe('CRASHED');
      expect(job.items).toHaveLength(3);
      expect(instances.map((i) => [i.instanceId, i.jobs, i.state])).toEqual([
        ['w1', ['quiet'], 'ready'],
        ['w2', ['quiet'], 'ready'],
      ]);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(counter.reads()).toEqual([]);
  });

  it('tells a lease held between runs from a run: an item is RUNNING only while its record shows a run', async () => {
    // A holder's lease on item 0 (as w1's worker leaves it between runs), and its item record.
    const holder = await connectZk(zkServer.connectionString, { namespace: cluster.namespace });
    await holder.create(paths.shardingRunning('quiet', 0), 'w1', 'ephemeral');
    const record = itemRecordKey(cluster.namespace, 'quiet', 0);
    const statusOf = async () => (await admin.readModel().getJob('quiet')).items[0]!.status;
    // While its record shows a run, the item is RUNNING (once the model has seen the node).
    await redis.hset(record, 'h', 'w1', 'e', 'epoch', 'r', '1795000000000');
    await eventually(async () => expect(await statusOf()).toBe('RUNNING'));
    // The run ended, the lease stays: not running.
    await redis.hdel(record, 'r');
    expect(await statusOf()).not.toBe('RUNNING');
    expect(await holder.exists(paths.shardingRunning('quiet', 0))).not.toBeNull();
    await redis.del(record);
    await holder.delete(paths.shardingRunning('quiet', 0));
  });

  it('follows the cluster: a disabled item shows DISABLED, a killed worker disappears, within seconds', async () => {
    model = await new ReadModel({ zk }).start();
    await model.getJob('quiet');

    await admin.disableItem('quiet', 1);
    const disabledAt = Date.now();
    await eventually(async () => expect((await model.getJob('quiet')).items[1].status).toBe('DISABLED'), { timeoutMs: 2_000 });
    expect(Date.now() - disabledAt).toBeLessThan(2_000);
    await admin.enableItem('quiet', 1);
    await eventually(async () => expect((await model.getJob('quiet')).items[1].status).not.toBe('DISABLED'), { timeoutMs: 2_000 });

    cluster.signal('w2', 'SIGKILL');
    const killedAt = Date.now();
    await eventually(async () => expect((await model.listInstances()).map((i) => i.instanceId)).toEqual(['w1']), { timeoutMs: SESSION_MS + 4_000, intervalMs: 100 });
    // ZooKeeper removes the node when the session expires (2 s); the model sees it within a round trip.
    expect(Date.now() - killedAt).toBeLessThan(SESSION_MS + 2_000);
    expect((await model.listJobs())[0].instances).toBe(1);
  });
});

describe('the read model and admin operations on hand-written nodes', () => {
  let zk: ZkClient;
  let writer: ZkClient;
  let admin: Admin;
  let redis: Redis;
  const config = (name: string, overrides: Record<string, unknown> = {}) =>
    defineJob({ name, cron: '0/5 * * * * ?', shardingTotalCount: 2, execute: () => undefined, ...overrides }).config;

  beforeEach(async () => {
    const namespace = uniqueNamespace('admin');
    [zk, writer] = await Promise.all([connectZk(zkServer.connectionString, { namespace }), connectZk(zkServer.connectionString, { namespace })]);
    redis = createRedisConnection(redisServer.url);
    admin = new Admin({ zk, redis, namespace });
    await writer.ensurePath(paths.job('good'));
    await writer.create(paths.jobConfig('good'), jobConfigCodec.encode(config('good')));
  });

  afterEach(async () => {
    await admin.close();
    redis.disconnect();
  });

  it('reports each unreadable node by its path and keeps answering', async () => {
    await writer.ensurePath(paths.jobServers('good'));
    await writer.create(paths.jobServer('good', '10.0.0.9'), 'MAYBE');
    await writer.ensurePath(paths.instances());
    await writer.create(paths.instance('w9'), '{not json', 'ephemeral');
    await writer.ensurePath(paths.job('broken'));
    await writer.create(paths.jobConfig('broken'), JSON.stringify({ name: 'broken', shardingTotalCount: 'many' }));
    await writer.ensurePath('/.cluster');

    expect((await admin.listJobs()).map((j) => j.name)).toEqual(['good']);
    expect(admin.problems().map((p) => [p.path, p.code])).toEqual([
      ['/.cluster/instances/w9', ErrorCodes.CORRUPT_DATA],
      ['/broken/config', ErrorCodes.CORRUPT_DATA],
      ['/good/servers/10.0.0.9', ErrorCodes.CORRUPT_DATA],
    ]);
    expect(admin.problems()[1].message).toMatch(/corrupt config at \/broken\/config[\s\S]*shardingTotalCount/);
    await expect(admin.getJob('broken')).rejects.toMatchObject({ code: ErrorCodes.CORRUPT_DATA, details: { path: '/broken/config' } });
    await expect(admin.getJob('nope')).rejects.toMatchObject({ code: ErrorCodes.JOB_NOT_FOUND, message: 'Job "nope" not found' });
    await expect(admin.getJob('.cluster')).rejects.toMatchObject({ code: ErrorCodes.INVALID_CONFIG });

    // Repaired: the problem goes and the job shows up.
    await writer.set(paths.jobConfig('broken'), jobConfigCodec.encode(config('broken')));
    await eventually(async () => expect((await admin.listJobs()).map((j) => j.name)).toEqual(['broken', 'good']), { timeoutMs: 2_000 });
    expect(admin.problems().map((p) => p.path)).not.toContain('/broken/config');
  });

  it('updates a config with a versioned write, validated like a definition, every bad field named', async () => {
    const next = await admin.updateConfig('good', { shardingTotalCount: 4, failover: true, cron: null });
    expect(next).toMatchObject({ shardingTotalCount: 4, failover: true });
    expect(next.cron).toBeUndefined();
    expect(jobConfigCodec.decode((await writer.get(paths.jobConfig('good'))).data, paths.jobConfig('good'))).toEqual(next);
    await eventually(async () => expect((await admin.getJob('good')).items).toHaveLength(4), { timeoutMs: 2_000 });

    const failure = await admin.updateConfig('good', { shardingTotalCount: -1, typo: 1, name: 'other' }).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(ConfigError);
    expect((failure as ConfigError).issues.map((i) => i.field).sort()).toEqual(['name', 'shardingTotalCount', 'typo']);
    await expect(admin.updateConfig('missing', { failover: true })).rejects.toMatchObject({ code: ErrorCodes.JOB_NOT_FOUND });

    // A writer racing the update: the version check makes it read again and apply on top.
    const { stat } = await writer.get(paths.jobConfig('good'));
    const racing = writer.set(paths.jobConfig('good'), jobConfigCodec.encode({ ...next, description: 'by someone else' }), stat.version);
    const [, updated] = await Promise.all([racing, admin.updateConfig('good', { jobParameter: 'p' })]);
    expect(updated).toMatchObject({ jobParameter: 'p', description: 'by someone else' });
  });

  it('shows its own writes in the next read: a switch or an update returns once the read model has it', async () => {
    // Started and watching the job and its items: reads answer from memory from now on.
    expect((await admin.getJob('good')).items.map((i) => i.status)).not.toContain('DISABLED');
    // Each write returns as soon as the model has it, not at the end of the bound.
    const timed = async <T>(write: Promise<T>): Promise<T> => {
      const from = Date.now();
      const result = await write;
      expect(Date.now() - from).toBeLessThan(CATCH_UP_MS / 2);
      return result;
    };
    for (let round = 0; round < 5; round++) {
      expect(await timed(admin.disableJob('good'))).toEqual({ changed: true });
      expect((await admin.getJob('good')).status).toBe('DISABLED');
      await timed(admin.enableJob('good'));
      expect((await admin.getJob('good')).config.disabled).toBe(false);
      expect(await timed(admin.disableItem('good', 1))).toEqual({ changed: true });
      expect((await admin.getJob('good')).items[1].status).toBe('DISABLED');
      await timed(admin.enableItem('good', '1'));
      expect((await admin.getJob('good')).items[1].status).not.toBe('DISABLED');
    }
    await timed(admin.updateConfig('good', { description: 'seen at once' }));
    expect((await admin.getJob('good')).config.description).toBe('seen at once');
    // A job created while the model runs: listed and read by the time the creation returns.
    await timed(admin.createJob({ name: 'made-now', type: 'SCRIPT', cron: '0/5 * * * * ?', shardingTotalCount: 1, script: { command: ['/bin/true'] } }));
    expect((await admin.getJob('made-now')).config.type).toBe('SCRIPT');
    // A write the model never reaches (here a version far ahead): the wait is bounded.
    const { stat } = await writer.get(paths.jobConfig('good'));
    const waitedFrom = Date.now();
    await admin.readModel().configCaughtUp('good', { version: 1_000_000, ctimeMs: stat.ctimeMs });
    expect(Date.now() - waitedFrom).toBeGreaterThanOrEqual(CATCH_UP_MS - 20);
    expect(Date.now() - waitedFrom).toBeLessThan(CATCH_UP_MS + 2_000);
  });

  it('refuses to trigger a disabled job with JOB_DISABLED, and an item outside the total with NOT_FOUND', async () => {
    await admin.disableJob('good');
    await expect(admin.trigger('good')).rejects.toMatchObject({ code: ErrorCodes.JOB_DISABLED });
    await admin.enableJob('good');
    const { requestId } = await admin.trigger('good', { requestedBy: 'test' });
    expect(await writer.exists(paths.trigger('good', requestId))).not.toBeNull();
    await expect(admin.disableItem('good', 2)).rejects.toMatchObject({ code: ErrorCodes.NOT_FOUND });
    await expect(admin.disableItem('good', -1)).rejects.toMatchObject({ code: ErrorCodes.INVALID_CONFIG });
    await expect(admin.enableServer('10.9.9.9')).rejects.toMatchObject({ code: ErrorCodes.NOT_FOUND });
  });

  it('removes a job: a request a worker is running is reported, and a second removal takes it once it ended', async () => {
    const queueName = `${admin.namespace}.w1.s1`;
    const queue = new Queue(queueName, { connection: redis, prefix: QUEUE_PREFIX });
    const request = (job: string, item: number): ExecutionRequest => ({ job, item, fireTime: 1_000, source: 'NORMAL', epoch: 1 });
    const add = (r: ExecutionRequest, delay?: number) => queue.add(r.job, r, { jobId: executionJobId(r), ...(delay && { delay }) });
    await add(request('good', 0));
    await add(request('good', 1), 60_000);
    await add(request('other', 0));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const workerRedis = createRedisConnection(redisServer.url);
    const worker = new Worker(queueName, () => released, { connection: workerRedis, prefix: QUEUE_PREFIX, concurrency: 1 });
    try {
      await waitFor(async () => (await queue.getActiveCount()) === 1, { message: 'a request taken by the worker' });
      const active = (await queue.getJobs(['active']))[0];

      const first = await admin.removeJob('good', { lockedWaitMs: 300, settleMs: 100 });
      expect(first.zookeeperNodes).toBeGreaterThanOrEqual(2);
      expect(first.lockedRequests).toEqual(active.name === 'good' ? [{ queue: queueName, id: active.id }] : []);
      expect(await writer.exists(paths.job('good'))).toBeNull();

      release();
      await waitFor(async () => (await queue.getActiveCount()) === 0, { message: 'the run ended' });
      if (first.lockedRequests.length > 0) {
        const second = await admin.removeJob('good', { settleMs: 100 });
        expect(second).toMatchObject({ zookeeperNodes: 0, removedRequests: 1, lockedRequests: [] });
      }
      const left = await queue.getJobs(['wait', 'delayed', 'active', 'completed', 'failed', 'prioritized']);
      expect(left.map((j) => j.name)).toEqual(['other']);
      await expect(admin.removeJob('good', { settleMs: 100 })).rejects.toMatchObject({ code: ErrorCodes.JOB_NOT_FOUND });
    } finally {
      release();
      await worker.close();
      await queue.close();
      workerRedis.disconnect();
    }
  });
});
