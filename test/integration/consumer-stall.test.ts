/**
 * A worker whose queue consumers stop taking requests for good while its ZooKeeper session lives
 * (a BullMQ blocking connection left never ready again, as a Redis failover can leave it; BullMQ
 * issues #4378 and #4585) replaces them, and its items run again; against a real ZooKeeper and
 * Redis. The stall is made the way #4585 describes it: the blocking connection drops, and a
 * disconnect while ioredis waits to reconnect clears its retry timer, so it stays `reconnecting`.
 */
import type { Worker } from 'bullmq';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { startNode, type ShardcronNode, type StartNodeOptions } from '../../src/node';
import { defineJob } from '../../src/shared/config/job-definition';
import { silentLogger } from '../../src/shared/logger';
import { closeServices, startRedis, startZooKeeper, waitFor } from '../helpers/services';
import { uniqueNamespace } from '../helpers/zk';

jest.setTimeout(60_000);

let zkServer: ZooKeeperServer;
let redisServer: RedisServer;
let node: ShardcronNode | undefined;

beforeAll(async () => {
  [zkServer, redisServer] = await Promise.all([startZooKeeper(), startRedis()]);
});
afterEach(async () => {
  await node?.close();
  node = undefined;
});
afterAll(closeServices);

/** What the test reaches of a BullMQ consumer's blocking connection (not public API). */
interface BlockingClient {
  status: string;
  stream?: { destroy(): void };
  disconnect(): void;
  once(event: 'reconnecting', listener: () => void): unknown;
}

function blockingClient(consumer: Worker): BlockingClient {
  const client = (consumer as unknown as { backend: { blockingConnection?: { _client?: BlockingClient } } }).backend.blockingConnection?._client;
  if (!client) throw new Error('BullMQ no longer keeps its blocking connection where this test looks for it');
  return client;
}

/** Leaves `client` `reconnecting` with no retry pending: it never comes back by itself. */
async function park(client: BlockingClient): Promise<void> {
  const parked = new Promise<void>((resolve) =>
    client.once('reconnecting', () => {
      client.disconnect();
      resolve();
    }),
  );
  client.stream!.destroy();
  await parked;
  expect(client.status).toBe('reconnecting');
}

function startWorker(jobs: StartNodeOptions['jobs'], extra: Partial<StartNodeOptions> = {}): Promise<ShardcronNode> {
  return startNode({
    zk: zkServer.connectionString,
    redisUrl: redisServer.url,
    namespace: uniqueNamespace('consumer-stall'),
    roles: ['worker', 'scheduler'],
    jobs,
    ip: '127.0.0.1',
    env: {},
    logger: silentLogger,
    ...extra,
  });
}

const consumersOf = (node: ShardcronNode) => (node.worker as unknown as { consumers: Worker[] }).consumers;

it('consumers stuck on a blocking connection that never comes back are replaced, and the items run again', async () => {
  const runs: number[] = [];
  const job = defineJob({ name: 'tick', cron: '* * * * * ?', shardingTotalCount: 2, execute: (ctx) => void runs.push(ctx.fireTime) });
  node = await startWorker([job]);
  const worker = node.worker!;
  const replaced: Array<{ queue: string; ready: number; stalledMs: number; at: number; runs: number }> = [];
  worker.on('worker:consumers-replaced', (e) => replaced.push({ ...e, at: Date.now(), runs: runs.length }));
  await waitFor(() => new Set(runs).size >= 2, { timeoutMs: 20_000, message: 'two fires run before the stall' });

  const consumers = consumersOf(node).slice();
  expect(consumers.length).toBeGreaterThan(0);
  await Promise.all(consumers.map((c) => park(blockingClient(c))));
  const parkedAt = Date.now();
  // Requests already taken end; after them nothing more is taken from the queue.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  const runsBefore = runs.length;

  await waitFor(() => replaced.length > 0, { timeoutMs: 10_000, message: 'the worker to replace its stalled consumers' });
  process.stdout.write(`Consumer stall: ${JSON.stringify({ replacedAfterParkMs: replaced[0].at - parkedAt, stalledMs: replaced[0].stalledMs, ready: replaced[0].ready })}\n`);
  expect(replaced[0].ready).toBeGreaterThan(0);
  expect(replaced[0].stalledMs).toBeGreaterThanOrEqual(2_000);
  expect(replaced[0].at - parkedAt).toBeLessThan(8_000);
  // Until then nothing ran: the parked consumers took nothing.
  expect(replaced[0].runs).toBe(runsBefore);
  // The parked consumers are gone, new ones took their place on the same queue, and both items of
  // the fires since then run again.
  const now = consumersOf(node);
  expect(now.some((c) => consumers.includes(c))).toBe(false);
  expect(now.every((c) => c.name === consumers[0].name)).toBe(true);
  const after = replaced[0].at;
  await waitFor(() => runs.length > runsBefore && countItems(runs, after) >= 2, { timeoutMs: 5_000, message: 'a fire after the replacement run whole' });
  // The stuck consumers closed (they held no request), and once it took requests again the worker
  // saw no further stall.
  await waitFor(() => consumers.every((c) => !c.isRunning()), { timeoutMs: 5_000, message: 'the replaced consumers to close' });
  await expect(Promise.all(consumers.map((c) => c.closing))).resolves.toBeDefined();
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  expect(replaced).toHaveLength(1);
});

it('a worker whose places are all taken leaves its ready requests waiting and replaces nothing', async () => {
  // One place, no prefetch: while an item runs for 4 s the others of its fire wait on the queue.
  const job = defineJob({ name: 'slow', cron: '*/5 * * * * ?', shardingTotalCount: 3, execute: () => new Promise((resolve) => setTimeout(resolve, 4_000)) });
  node = await startWorker([job], { concurrency: 1, prefetch: 0 });
  const replaced: unknown[] = [];
  const started: number[] = [];
  node.worker!.on('worker:consumers-replaced', (e) => replaced.push(e));
  node.worker!.on('item:started', (e) => started.push(e.at));
  await waitFor(() => started.length >= 3, { timeoutMs: 30_000, message: 'three items started, one at a time' });
  expect(replaced).toEqual([]);
});

it('a worker whose consumers are stuck that way closes at once, not after its grace period or never', async () => {
  // A Redis restart just before a close left a consumer's blocking connection so in CI
  // (console-history.test.ts): BullMQ's close without force waited for it for good, and the close
  // with force after the grace period was that same close.
  const runs: number[] = [];
  const job = defineJob({ name: 'tick', cron: '* * * * * ?', shardingTotalCount: 2, execute: (ctx) => void runs.push(ctx.fireTime) });
  node = await startWorker([job], { shutdownGraceMs: 20_000 });
  await waitFor(() => new Set(runs).size >= 2, { timeoutMs: 20_000, message: 'two fires run' });
  const consumers = [...consumersOf(node)];
  await Promise.all(consumers.map((c) => park(blockingClient(c))));
  const closing = node;
  node = undefined;
  const started = Date.now();
  await closing.close();
  const closedMs = Date.now() - started;
  process.stdout.write(`Close with parked consumers: ${JSON.stringify({ closedMs, consumers: consumers.length })}\n`);
  expect(closedMs).toBeLessThan(5_000);
  await expect(Promise.all(consumers.map((c) => c.closing))).resolves.toBeDefined();
});

/** Items run of the first whole fire after `since`. */
function countItems(runs: readonly number[], since: number): number {
  const fires = runs.filter((f) => f > since);
  if (fires.length === 0) return 0;
  const first = Math.min(...fires);
  return fires.filter((f) => f === first).length;
}
