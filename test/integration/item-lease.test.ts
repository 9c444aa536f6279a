/**
 * Item leases (SHARDCRON_ITEM_LEASE): ItemExecutor with monitorExecution whose lock is a `running`
 * node kept across fires, each run recorded in the item's Redis record. Each instance is an executor
 * on its own ZooKeeper session and Redis connections, with the worker's subscriber for asks, against
 * a real ZooKeeper and Redis.
 */
import pino from 'pino';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { Semaphore } from '../../src/shared/concurrency';
import { defineJob, type ExecutionStatus, type ShardingContext } from '../../src/shared/config/job-definition';
import { createRedisConnection } from '../../src/shared/redis/redis-connection';
import type { ExecutionSource } from '../../src/shared/registry/execution-request';
import { deleteItemRecords, ItemRecords, itemRecordKey, leaseAskChannel, parseLeaseAsk, parseRecordFires, readItemRuns } from '../../src/shared/registry/item-records';
import { registryPaths as paths } from '../../src/shared/registry/registry-paths';
import type { ZkClient } from '../../src/shared/zk';
import { ItemExecutor, type ExecutionEvent } from '../../src/worker/item-executor';
import { closeServices, startRedis, startZooKeeper, waitFor } from '../helpers/services';
import { closeZkClients, connectZk, uniqueNamespace } from '../helpers/zk';
import type Redis from 'ioredis';
import { deferred } from '../helpers/deferred';

const JOB = 'billing';
const RUNNING = paths.shardingRunning(JOB, 0);

let zkServer: ZooKeeperServer;
let redisServer: RedisServer;
let namespace: string;
let admin: ZkClient;
let redis: Redis;
const connections: Redis[] = [];

beforeAll(async () => {
  [zkServer, redisServer] = await Promise.all([startZooKeeper(), startRedis()]);
  redis = createRedisConnection(redisServer.url);
});
afterAll(async () => {
  redis.disconnect();
  await closeServices();
});

beforeEach(async () => {
  namespace = uniqueNamespace('item-lease');
  admin = await connectZk(zkServer.connectionString, { namespace });
  await admin.ensurePath(paths.shardingItem(JOB, 0));
});
afterEach(async () => {
  for (const c of connections.splice(0)) c.disconnect();
  await closeZkClients();
});

interface Instance {
  zk: ZkClient;
  records: ExecutionEvent[];
  executor: ItemExecutor;
  run(fireTime: number, source?: ExecutionSource, mustRun?: boolean): Promise<ExecutionStatus | 'deferred'>;
  finishes(): Array<[number, ExecutionSource, ExecutionStatus | undefined, string | undefined]>;
}

/** A worker instance with item leases: its own session, records connection and ask subscriber. */
async function instance(instanceId: string, execute: (ctx: ShardingContext) => unknown, options: { owns?: () => boolean } = {}): Promise<Instance> {
  const definition = defineJob({ name: JOB, cron: '0 0 * * * ?', shardingTotalCount: 1, misfire: true, monitorExecution: true, execute });
  const zk = await connectZk(zkServer.connectionString, { namespace, sessionTimeoutMs: 10_000 });
  const commands = createRedisConnection(redisServer.url);
  const asks = createRedisConnection(redisServer.url);
  connections.push(commands, asks);
  const itemRecords = new ItemRecords(commands, namespace);
  const records: ExecutionEvent[] = [];
  const executor = new ItemExecutor({
    zk,
    instanceId,
    log: pino({ level: 'silent' }),
    config: () => definition.config,
    owns: (sessionId) => (options.owns ? options.owns() : zk.sessionId === sessionId),
    abortSignal: () => new AbortController().signal,
    handlers: new Semaphore(10),
    record: (r) => records.push(r),
    itemRecords: () => itemRecords,
  });
  asks.on('message', (_channel: string, message: string) => {
    const ask = parseLeaseAsk(message);
    if (ask) executor.leaseAsked(ask.job, ask.item);
  });
  await asks.subscribe(leaseAskChannel(namespace, instanceId));
  return {
    zk,
    records,
    executor,
    run: (fireTime, source = 'NORMAL', mustRun = false) => executor.run(definition, { job: JOB, item: 0, fireTime, source, epoch: 1 }, { mustRun }),
    finishes: () => records.filter((r) => r.event === 'finish').map((r) => [r.fireTime, r.source, r.status, r.reason]),
  };
}

const record = () => redis.hgetall(itemRecordKey(namespace, JOB, 0));

/** An instance whose handler's call number `blockOn` (default the first) waits until `release()`; `started` resolves when it began. */
async function blocking(instanceId: string, options: { blockOn?: number; owns?: () => boolean } = {}): Promise<{ instance: Instance; started: Promise<void>; release: () => void }> {
  const release = deferred();
  const started = deferred();
  let calls = 0;
  const created = await instance(
    instanceId,
    async () => {
      calls += 1;
      if (calls !== (options.blockOn ?? 1)) return;
      started.resolve();
      await release.promise;
    },
    options.owns ? { owns: options.owns } : {},
  );
  return { instance: created, started: started.promise, release: release.resolve };
}

describe('item leases', () => {
  it('keep the running node across fires and record each run in Redis, with no ZooKeeper write per run', async () => {
    const a = await instance('a', () => undefined);
    expect(await a.run(1_000)).toBe('completed');
    const first = await admin.exists(RUNNING);
    expect(first?.ephemeralOwner).toBe(a.zk.sessionId);
    const item = await admin.exists(paths.shardingItem(JOB, 0));
    for (const fire of [2_000, 3_000, 4_000]) expect(await a.run(fire)).toBe('completed');
    // The same node, never re-created, and the item node untouched: the runs wrote only Redis.
    const after = await admin.exists(RUNNING);
    expect(after?.czxid).toBe(first?.czxid);
    expect((await admin.exists(paths.shardingItem(JOB, 0)))?.cversion).toBe(item?.cversion);
    expect((await admin.exists(paths.shardingItem(JOB, 0)))?.version).toBe(item?.version);
    const stored = await record();
    expect(parseRecordFires(stored.d)).toEqual([1_000, 2_000, 3_000, 4_000]);
    expect(stored.h).toBe('a');
    expect(stored.r).toBeUndefined();
    // A lease held between runs is not a run: the readers (reshard, console) are told so.
    expect((await readItemRuns(redis, namespace, JOB, [0])).get(0)).toEqual({ holder: 'a', running: undefined });
  });

  it('are let go of when their node is deleted by someone else (an operator), each lease afresh', async () => {
    const a = await instance('a', () => undefined);
    expect(await a.run(1_000)).toBe('completed');
    expect(a.executor.idleLeases()).toEqual([{ job: JOB, item: 0 }]);
    for (const fire of [2_000, 3_000]) {
      const before = await admin.exists(RUNNING);
      await admin.delete(RUNNING);
      await waitFor(() => a.executor.idleLeases().length === 0, { timeoutMs: 5_000 });
      // The next run claims the item again: a node of its own, watched like the first.
      expect(await a.run(fire)).toBe('completed');
      const after = await admin.exists(RUNNING);
      expect(after?.ephemeralOwner).toBe(a.zk.sessionId);
      expect(after?.czxid).not.toBe(before?.czxid);
      expect(a.executor.idleLeases()).toEqual([{ job: JOB, item: 0 }]);
    }
    expect(parseRecordFires((await record()).d)).toEqual([1_000, 2_000, 3_000]);
  });

  it('hand the item to another instance that asks, with the completed fires: a replay of a fire the old holder ran is skipped', async () => {
    const a = await instance('a', () => undefined);
    const b = await instance('b', () => undefined);
    expect(await a.run(1_000)).toBe('completed');
    // B finds the lease held and nothing running: it asks, and its request waits (deferred).
    expect(await b.run(2_000)).toBe('deferred');
    await waitFor(async () => (await admin.exists(RUNNING)) === null, { timeoutMs: 5_000 });
    expect(await b.run(2_000)).toBe('completed');
    expect((await admin.exists(RUNNING))?.ephemeralOwner).toBe(b.zk.sessionId);
    // A replayed request for A's fire finds it completed.
    expect(await b.run(1_000, 'FAILOVER', true)).toBe('skipped');
    expect(a.finishes()).toEqual([[1_000, 'NORMAL', 'completed', undefined]]);
    expect(parseRecordFires((await record()).d)).toEqual([1_000, 2_000]);
  });

  it('remember the fires a process ran after it handed the item on: a request Redis lost and the leader enqueued again is skipped when the item comes back', async () => {
    const a = await instance('a', () => undefined);
    const b = await instance('b', () => undefined);
    expect(await a.run(1_000)).toBe('completed');
    expect(await a.run(2_000)).toBe('completed');
    expect(await b.run(3_000)).toBe('deferred');
    await waitFor(async () => (await admin.exists(RUNNING)) === null, { timeoutMs: 5_000 });
    expect(await b.run(3_000)).toBe('completed');
    // A Redis failover loses the record's write of A's last completion (asynchronous replication).
    await redis.hset(itemRecordKey(namespace, JOB, 0), 'd', '1000,3000');
    expect(await a.run(4_000)).toBe('deferred');
    await waitFor(async () => (await admin.exists(RUNNING)) === null, { timeoutMs: 5_000 });
    expect(await a.run(4_000)).toBe('completed');
    // The leader enqueues the lost request again on A's queue: A ran it, and still knows.
    expect(await a.run(2_000, 'NORMAL', true)).toBe('skipped');
    expect(a.finishes().filter((f) => f[0] === 2_000)).toEqual([
      [2_000, 'NORMAL', 'completed', undefined],
      [2_000, 'NORMAL', 'skipped', 'this fire of the item already completed'],
    ]);
  });

  it('keep the newest completed fires when a process takes an item back: what it remembers from long ago does not push out the record\'s', async () => {
    const a = await instance('a', () => undefined);
    const b = await instance('b', () => undefined);
    const fires = (from: number) => Array.from({ length: 32 }, (_, i) => (from + i) * 1_000);
    for (const fire of fires(1)) expect(await a.run(fire)).toBe('completed');
    expect(await b.run(33_000)).toBe('deferred');
    await waitFor(async () => (await admin.exists(RUNNING)) === null, { timeoutMs: 5_000 });
    for (const fire of fires(33)) expect(await b.run(fire)).toBe('completed');
    expect(await a.run(65_000)).toBe('deferred');
    await waitFor(async () => (await admin.exists(RUNNING)) === null, { timeoutMs: 5_000 });
    expect(await a.run(65_000)).toBe('completed');
    // B's last fire, failed over to A (B's completion reached Redis, not BullMQ): A skips it.
    expect(await a.run(64_000, 'FAILOVER', true)).toBe('skipped');
    expect(parseRecordFires((await record()).d)).toEqual(fires(34));
  });

  it('turn a fire that finds a run in progress elsewhere into a misfire the holder runs next, under that fire', async () => {
    const { instance: a, started, release } = await blocking('a');
    const b = await instance('b', () => undefined);
    const running = a.run(1_000);
    await started;
    expect((await readItemRuns(redis, namespace, JOB, [0])).get(0)).toEqual({ holder: 'a', running: 1_000 });
    expect(await b.run(2_000)).toBe('skipped');
    release();
    expect(await running).toBe('completed');
    expect(a.finishes()).toEqual([
      [1_000, 'NORMAL', 'completed', undefined],
      [2_000, 'MISFIRE', 'completed', undefined],
    ]);
    const stored = await record();
    expect(stored.m).toBeUndefined();
    expect(parseRecordFires(stored.d)).toEqual([1_000, 2_000]);
    // B asked for the item (it is assigned there now): A let go once its run and the re-run ended.
    await waitFor(async () => (await admin.exists(RUNNING)) === null, { timeoutMs: 5_000 });
  });

  it('refuse the completion of a holder whose lease ended and was claimed by another: the fire completes once', async () => {
    // A frozen holder: its ownership check passes (its clock did not see the freeze).
    const { instance: a, started, release } = await blocking('a', { owns: () => true });
    const b = await instance('b', () => undefined);
    const running = a.run(1_000);
    await started;
    // A's session ends (its node goes with it); B takes the item and runs the fire as a failover.
    await a.zk.close();
    await waitFor(async () => (await admin.exists(RUNNING)) === null, { timeoutMs: 5_000 });
    expect(await b.run(1_000, 'FAILOVER', true)).toBe('completed');
    release();
    expect(await running).toBe('aborted');
    expect(parseRecordFires((await record()).d)).toEqual([1_000]);
    expect(b.finishes().map((f) => f[2])).toEqual(['completed']);
  });

  it('let the next holder skip a fire whose completion was recorded before its holder died', async () => {
    const a = await instance('a', () => undefined);
    expect(await a.run(1_000)).toBe('completed');
    // The holder dies before BullMQ heard of the completion: the leader fails the request over.
    await a.zk.close();
    const b = await instance('b', () => undefined);
    await waitFor(async () => (await admin.exists(RUNNING)) === null, { timeoutMs: 5_000 });
    expect(await b.run(1_000, 'FAILOVER', true)).toBe('skipped');
    expect(b.finishes()).toEqual([[1_000, 'FAILOVER', 'skipped', 'this fire of the item already completed']]);
  });

  it('show a run under a held lease in the record once it has run a while, so a fire elsewhere finds it running', async () => {
    const { instance: a, started, release } = await blocking('a', { blockOn: 2 });
    const b = await instance('b', () => undefined);
    expect(await a.run(1_000)).toBe('completed');
    const second = a.run(2_000);
    await started;
    // A short run writes nothing at its start; this one shows after RUN_SHOWN_AFTER_MS.
    await waitFor(async () => (await readItemRuns(redis, namespace, JOB, [0])).get(0)?.running === 2_000, { timeoutMs: 2_000 });
    expect(await b.run(3_000)).toBe('skipped');
    release();
    expect(await second).toBe('completed');
    expect(a.finishes().map((f) => f.slice(0, 3))).toEqual([
      [1_000, 'NORMAL', 'completed'],
      [2_000, 'NORMAL', 'completed'],
      [3_000, 'MISFIRE', 'completed'],
    ]);
    expect((await readItemRuns(redis, namespace, JOB, [0])).get(0)).toEqual({ holder: 'a', running: undefined });
  });

  it('mark a fire that finds a run of the same process, and run it as a misfire right after that run', async () => {
    const { instance: a, started, release } = await blocking('a');
    const first = a.run(1_000);
    await started;
    expect(await a.run(2_000)).toBe('skipped');
    expect((await record()).m).toBe('2000');
    release();
    expect(await first).toBe('completed');
    expect(a.finishes()).toEqual([
      [2_000, 'NORMAL', 'skipped', 'item running elsewhere; misfire recorded'],
      [1_000, 'NORMAL', 'completed', undefined],
      [2_000, 'MISFIRE', 'completed', undefined],
    ]);
    expect((await record()).m).toBeUndefined();
  });

  it('refuse a claim older than the one recorded, and a run end under an epoch that is not the record\'s', async () => {
    const records = new ItemRecords(redis, namespace);
    expect(await records.claim(JOB, 0, '0000000000000020', 'b', 2_000, false)).toEqual({ done: [], mark: null });
    // A late claim (its node was created before B's): refused, nothing written.
    expect(await records.claim(JOB, 0, '000000000000001f', 'a', 1_000, false)).toBeNull();
    expect(await records.end(JOB, 0, '000000000000001f', 1_000, true, undefined)).toEqual({ ok: false });
    expect(await records.end(JOB, 0, '0000000000000020', 2_000, true, undefined)).toEqual({ ok: true, mark: null, asked: false });
    expect(await record()).toEqual({ e: '0000000000000020', h: 'b', d: '2000' });
  });

  it('do not take a run left in the record by an earlier lease for a run of the holder: the request asks and waits, nothing is marked', async () => {
    const a = await instance('a', () => undefined);
    const b = await instance('b', () => undefined);
    expect(await a.run(1_000)).toBe('completed');
    // An end lost in a Redis failover under an earlier epoch left `r` behind.
    await redis.hset(itemRecordKey(namespace, JOB, 0), 'r', '900', 'e', '0000000000000001');
    expect(await b.run(2_000)).toBe('deferred');
    expect((await record()).m).toBeUndefined();
    await waitFor(async () => (await admin.exists(RUNNING)) === null, { timeoutMs: 5_000 });
    expect(await b.run(2_000)).toBe('completed');
  });

  it('are deleted with their job', async () => {
    const a = await instance('a', () => undefined);
    expect(await a.run(1_000)).toBe('completed');
    await redis.hset(itemRecordKey(namespace, `${JOB}-other`, 0), 'd', '1');
    expect(await deleteItemRecords(redis, namespace, JOB)).toBe(1);
    expect(await redis.exists(itemRecordKey(namespace, JOB, 0))).toBe(0);
    expect(await redis.exists(itemRecordKey(namespace, `${JOB}-other`, 0))).toBe(1);
  });

  it('forget, with their job, the fires they ran: a job added again under the name runs its own', async () => {
    const a = await instance('a', () => undefined);
    expect(await a.run(1_000)).toBe('completed');
    a.executor.forgetJob(JOB);
    await waitFor(async () => (await admin.exists(RUNNING)) === null, { timeoutMs: 5_000 });
    await deleteItemRecords(redis, namespace, JOB);
    expect(await a.run(1_000)).toBe('completed');
    expect(a.finishes().map((f) => f[2])).toEqual(['completed', 'completed']);
  });

  it('let go of a lease asked for while a run holds it once that run ends', async () => {
    const { instance: a, started, release } = await blocking('a');
    const b = await instance('b', () => undefined);
    const running = a.run(1_000);
    await started;
    // A failover request must run: it waits (deferred) rather than marks, and asks for the item.
    expect(await b.run(500, 'FAILOVER', true)).toBe('deferred');
    expect((await admin.exists(RUNNING))?.ephemeralOwner).toBe(a.zk.sessionId);
    release();
    expect(await running).toBe('completed');
    // A lets go once its run ended; the request, taken again, runs.
    await waitFor(async () => (await admin.exists(RUNNING)) === null, { timeoutMs: 5_000 });
    expect(await b.run(500, 'FAILOVER', true)).toBe('completed');
    expect(parseRecordFires((await record()).d)).toEqual([1_000, 500]);
  });
});
