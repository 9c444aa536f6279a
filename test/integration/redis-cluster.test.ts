/**
 * shardcron on a 3-primary Redis Cluster: the queues of a namespace carry the hash tag
 * `{namespace}` (one slot, so BullMQ's multi-key scripts run), the core scheduling and worker
 * failover behave as on one Redis, and the leader's sweep finds queues on the node owning the slot.
 */
import { Queue } from 'bullmq';
import type { Cluster } from 'ioredis';
import type { RedisClusterGroup } from '../../src/dev/redis-cluster';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { findOrphanedQueues } from '../../src/leader/failover';
import { createRedisClient } from '../../src/shared/redis/redis-connection';
import type { RedisTarget } from '../../src/shared/redis/redis-target';
import { itemRecordKey } from '../../src/shared/registry/item-records';
import { namespaceKeyPrefix, queuePrefix } from '../../src/shared/registry/queue-names';
import { cliExitCode, killCliRuns, runCli } from '../helpers/cli-process';
import { ProcessCluster, redisTargetEnv, type ExecLine } from '../helpers/process-cluster';
import { closeServices, startRedisCluster, startZooKeeper, waitFor } from '../helpers/services';
import { uniqueNamespace } from '../helpers/zk';

jest.setTimeout(90_000);

const WORKERS = ['w1', 'w2', 'w3'];

let zk: ZooKeeperServer;
let redis: RedisClusterGroup;
let target: RedisTarget;
let cluster: ProcessCluster | undefined;

beforeAll(async () => {
  [zk, redis] = await Promise.all([startZooKeeper(), startRedisCluster()]);
  target = { url: 'redis://127.0.0.1', clusterNodes: redis.seeds };
});
afterAll(closeServices);
afterEach(async () => {
  await cluster?.close();
  await killCliRuns();
});

it('a job every second on 3 workers runs every item; kill -9 a worker: its items fail over; nothing doubled', async () => {
  const job = { name: 'beat', cron: '* * * * * ?', shardingTotalCount: 6, failover: true, sleepMs: 700 };
  const c = (cluster = new ProcessCluster({ zk: zk.connectionString, redisUrl: target.url, redis: target }));
  // Item leases on: their records must live in the namespace's slot too (asserted below).
  await Promise.all([...WORKERS.map((w) => c.start(w, 'worker', [job], { SHARDCRON_ITEM_LEASE: 'on' })), c.start('leader', 'scheduler', [])]);

  // Every item of a fire running, two on each worker (AVG_ALLOCATION), then kill one mid-run.
  const fire = await waitFor(
    () => {
      const byFire = new Map<number, ExecLine[]>();
      for (const s of c.starts('beat')) byFire.set(s.fireTime, [...(byFire.get(s.fireTime) ?? []), s]);
      // A full fire after every worker has joined (on a slow machine the first fires can find one
      // worker registered and give it every item).
      const full = [...byFire].filter(([, list]) => list.length === 6 && WORKERS.every((w) => list.some((s) => s.instanceId === w))).map(([f]) => f);
      return full.length >= 1 ? full[0] : undefined;
    },
    { timeoutMs: 30_000, message: 'a fire with all 6 items started on the 3 workers' },
  ).catch((err: unknown) => {
    // What the fires did instead (each one's items by instance), and the nodes' other lines.
    const byFire = new Map<number, string[]>();
    for (const s of c.starts('beat')) byFire.set(s.fireTime, [...(byFire.get(s.fireTime) ?? []), `${s.item}@${s.instanceId}/${s.source}`]);
    const fires = [...byFire].slice(-8).map(([f, list]) => `${f}: ${list.sort().join(' ')}`);
    throw new Error(`${(err as Error).message}\nlast fires:\n${fires.join('\n')}\nlines: ${JSON.stringify(c.lines.filter((l) => l.kind !== 'exec' && l.kind !== 'fire'))}`);
  });
  const victims = c.starts('beat').filter((s) => s.fireTime === fire && s.instanceId === 'w2');
  expect(new Set(c.starts('beat').filter((s) => s.fireTime === fire).map((s) => s.instanceId))).toEqual(new Set(WORKERS));
  c.signal('w2', 'SIGKILL');
  const killedAt = Date.now();

  const moved = await waitFor(
    () => {
      const restarts = c.starts('beat').filter((s) => s.fireTime === fire && s.source === 'FAILOVER');
      return restarts.length >= victims.length ? restarts : undefined;
    },
    { timeoutMs: 10_000, message: 'failover starts of the killed worker\'s items' },
  );
  expect(moved.map((m) => m.item).sort()).toEqual(victims.map((v) => v.item).sort());
  for (const m of moved) expect(m.instanceId).not.toBe('w2');
  // Fires after the failover run every item on the two survivors.
  await waitFor(() => c.incompleteFires('beat', 6, killedAt + 4_000, Date.now() - 1_500).length === 0 && Date.now() > killedAt + 7_000, {
    timeoutMs: 15_000,
    message: 'every fire after the failover complete on the survivors',
  });
  expect(c.incompleteFires('beat', 6, killedAt + 4_000, Date.now() - 1_500)).toEqual([]);
  expect(c.overlaps('beat')).toEqual([]);
  expect(c.doubleCompletions('beat')).toEqual([]);
  const completed = c.execs('beat').filter((l) => l.event === 'finish' && l.status === 'completed' && l.fireTime === fire);
  expect(completed.map((l) => l.item).sort()).toEqual([0, 1, 2, 3, 4, 5]);

  // Every key of the namespace sits in the slot of its hash tag, on one node.
  const owner = (await redis.nodeOf(namespaceKeyPrefix(c.namespace)))!;
  const client = createRedisClient(target) as Cluster;
  try {
    await client.ping(); // the node list is known once the client is ready
    const perNode = await Promise.all(
      client.nodes('master').map(async (node) => ({ port: node.options.port, keys: await node.keys(`shardcron:*${c.namespace}*`) })),
    );
    const holding = perNode.filter((n) => n.keys.length > 0);
    expect(holding.map((n) => n.port)).toEqual([owner.port]);
    // The instance queues, and the namespace's own keys (each job's recent executions list, each
    // item's record of item leases).
    const prefix = namespaceKeyPrefix(c.namespace);
    const own = [`${prefix}:${c.namespace}.`, `${prefix}:executions:`, `${prefix}:item:`];
    const strays = holding[0].keys.filter((k) => !own.some((start) => k.startsWith(start)));
    expect(strays).toEqual([]);
    expect(holding[0].keys).toContain(`${prefix}:executions:beat`);
    expect(holding[0].keys).toContain(itemRecordKey(c.namespace, 'beat', 0));
  } finally {
    client.disconnect();
  }
});

it("finds the queues of dead instances on the node owning the namespace's slot", async () => {
  const namespace = uniqueNamespace('sweep');
  const client = createRedisClient(target);
  const prefix = queuePrefix(namespace, target);
  const queues = ['dead@-@1.s1', 'live@-@2.s2'].map((id) => new Queue(`${namespace}.${id}`, { connection: client, prefix }));
  try {
    await Promise.all(queues.map((q) => q.add('j', {}, { jobId: 'x' })));
    expect(prefix).toBe(`shardcron:{${namespace}}`);
    const orphans = await findOrphanedQueues(client, prefix, namespace, new Set([queues[1].name]));
    expect(orphans).toEqual([{ from: 'dead@-@1', queue: `${namespace}.dead@-@1.s1` }]);
  } finally {
    await Promise.all(queues.map((q) => q.obliterate({ force: true }).then(() => q.close())));
    client.disconnect();
  }
});

it('shardcron ping reaches the Cluster through its seed nodes', async () => {
  const r = runCli(['ping'], { SHARDCRON_ZK: zk.connectionString, ...redisTargetEnv(target) });
  expect(await cliExitCode(r, 20_000)).toBe(0);
  expect(r.stdout.join('\n')).toMatch(new RegExp(`^redis Redis Cluster ${redis.seedList}: ok \\(\\d+ ms\\)$`, 'm'));
});
