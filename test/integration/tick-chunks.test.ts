/**
 * Rate-monotonic order against real ZooKeeper and Redis. A tick of more job-fires than the leader's
 * tick chunk (TICK_CHUNK, 1,000; here 1 or 2, so that a few jobs exercise it) goes in chunks, jobs
 * of shorter period first, each fire of each job dispatched once and run once on every item, each
 * job's ledgers in fire order. Requests of jobs firing once a minute or less often are prioritized
 * in the queue while jobs firing more often exist.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import { defineJob } from '../../src';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { BUSY_DELIVERY_LEAD_MS, DELIVERY_LEAD_MS } from '../../src/leader/dispatch-lead';
import { LeaderService } from '../../src/leader/leader-service';
import { ShardcronMetrics } from '../../src/ops/metrics';
import { createRedisClient } from '../../src/shared/redis/redis-connection';
import { queuePrefix } from '../../src/shared/registry/queue-names';
import { TestCluster } from '../helpers/cluster';
import { closeServices, expectNoLiveServices, startRedis, startZooKeeper, waitFor } from '../helpers/services';
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

/** The jobs of each commit (chunk) that ledgered `fireTime`, in the order the commits ran. */
const chunksOf = (commits: Commits, fireTime: number): string[][] =>
  commits.map((chunk) => chunk.filter((c) => c.fireTime === fireTime).map((c) => c.job)).filter((jobs) => jobs.length > 0);

/** What a test's leader ledgered, one entry per dispatcher.commit call (a chunk's), in the order they ran on its chain. */
type Commits = Array<Array<{ job: string; fireTime: number }>>;

/**
 * A scheduler-only leader of `cluster`'s namespace with tick chunks of `tickChunk`, not started,
 * whose ledger writes are recorded in `commits` (the enqueues that follow wait for timers, whose
 * order for one time Node does not promise), and a `close` for it. Every job may be split across
 * chunks (`tickSplitFromPeriodMs` 0), so that jobs of a few seconds' period show what a split does;
 * `splitFromPeriodMs` 'default': the leader's own.
 */
async function chunkedLeader(
  cluster: TestCluster,
  tickChunk: number,
  completedKept = 0,
  splitFromPeriodMs: number | 'default' = 0,
  tickChunkRequests?: number,
  dispatchLeadMs?: number,
): Promise<{ leader: LeaderService; commits: Commits; close(): Promise<void> }> {
  const zkClient = await connectZk(zk.connectionString, { namespace: cluster.namespace, sessionTimeoutMs: 2_000 });
  const connection = createRedisClient({ url: redis.url }, { name: 'leader' });
  const leader = new LeaderService({
    zk: zkClient,
    redis: connection,
    namespace: cluster.namespace,
    queuePrefix: queuePrefix(cluster.namespace, { url: redis.url }),
    instanceId: 'leader',
    tickChunk,
    ...(tickChunkRequests !== undefined && { tickChunkRequests }),
    completedKept,
    ...(splitFromPeriodMs !== 'default' && { tickSplitFromPeriodMs: splitFromPeriodMs }),
    ...(dispatchLeadMs !== undefined && { dispatchLeadMs }),
  });
  const commits: Commits = [];
  const commit = leader.dispatcher.commit.bind(leader.dispatcher);
  jest.spyOn(leader.dispatcher, 'commit').mockImplementation((plans, ...rest) => {
    commits.push(plans.map((p) => ({ job: p.job, fireTime: p.ledger.fireTime })));
    return commit(plans, ...rest);
  });
  const close = async () => {
    await leader.close();
    await connection.quit();
    await cluster.close();
    await closeZkClients();
  };
  return { leader, commits, close };
}

test('a tick beyond the chunk size dispatches jobs of shorter period first, each fire once, and every item runs each fire once', async () => {
  const cluster = new TestCluster(zk, redis);
  // Three every-second jobs and three every-2-seconds ones, two items each: six job-fires every
  // even second, three chunks of two. Defined rarest first: only the period orders them.
  const rare = ['r0', 'r1', 'r2'].map((name) => defineJob({ name, cron: '0/2 * * * * ?', shardingTotalCount: 2, execute: () => undefined }));
  const often = ['f0', 'f1', 'f2'].map((name) => defineJob({ name, cron: '* * * * * ?', shardingTotalCount: 2, execute: () => undefined }));
  const { leader, commits, close } = await chunkedLeader(cluster, 2);
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
    for (const fireTime of evens) {
      const chunks = chunksOf(commits, fireTime);
      // Three chunks of two, the every-second jobs first.
      expect(chunks.map((jobs) => jobs.length)).toEqual([2, 2, 2]);
      expect(chunks.flat().slice(0, 3).sort()).toEqual(['f0', 'f1', 'f2']);
      expect(chunks.flat().slice(3).sort()).toEqual(['r0', 'r1', 'r2']);
    }
    const counted = dispatched.filter((d) => d.fireTime >= evens[0] && d.fireTime <= evens[3]);
    // Each job's fires dispatched once each, in fire order.
    for (const job of [...rare, ...often].map((j) => j.name)) {
      const fires = counted.filter((d) => d.job === job).map((d) => d.fireTime);
      expect(fires).toEqual([...new Set(fires)].sort((a, b) => a - b));
      expect(fires.length).toBeGreaterThanOrEqual(4);
    }
    // Every item of every fire dispatched starts, once.
    const key = (job: string, fireTime: number, item: number) => `${job}|${fireTime}|${item}`;
    const wanted = counted.flatMap((d) => [key(d.job, d.fireTime, 0), key(d.job, d.fireTime, 1)]).sort();
    await waitFor(() => cluster.starts().filter((s) => s.fireTime >= evens[0] && s.fireTime <= evens[3]).length >= wanted.length, { message: 'every item of the fires dispatched' });
    const starts = cluster.starts().filter((s) => s.fireTime >= evens[0] && s.fireTime <= evens[3]).map((s) => key(s.job, s.fireTime, s.item));
    expect(starts.sort()).toEqual(wanted);
    expect(skipped.filter((s) => s.fireTime >= evens[0])).toEqual([]);
    // Rarer jobs went in chunks behind frequent ones: every fire now goes 700 ms ahead.
    expect(leader.dispatchLead.deliveryMs).toBe(BUSY_DELIVERY_LEAD_MS);
  } finally {
    await close();
  }
});

test('jobs firing more often than once a minute are never split: their fires of one tick go whole in its first chunk, however small the chunks', async () => {
  const cluster = new TestCluster(zk, redis);
  // The same six jobs as above, with the leader's default split period (60 s): none of them is split.
  const rare = ['r0', 'r1', 'r2'].map((name) => defineJob({ name, cron: '0/2 * * * * ?', shardingTotalCount: 2, execute: () => undefined }));
  const often = ['f0', 'f1', 'f2'].map((name) => defineJob({ name, cron: '* * * * * ?', shardingTotalCount: 2, execute: () => undefined }));
  // Chunks of 2 job-fires and 5 requests: the six jobs' 12 requests still go in one.
  const { leader, commits, close } = await chunkedLeader(cluster, 2, 0, 'default', 5);
  try {
    await cluster.start({ roles: ['worker'], jobs: [...rare, ...often], instanceId: 'w1' });
    await leader.start();
    const from = Date.now() + 1_000;
    const evens = await cluster.waitForCompleteFires('r2', 2, from, 3, 20_000);
    for (const fireTime of evens) {
      const chunks = chunksOf(commits, fireTime);
      // One chunk of all six, the every-second jobs first.
      expect(chunks.map((jobs) => jobs.length)).toEqual([6]);
      expect(chunks[0].slice(0, 3).sort()).toEqual(['f0', 'f1', 'f2']);
    }
    // Nothing went behind the frequent jobs: the usual lead.
    expect(leader.dispatchLead.deliveryMs).toBeLessThanOrEqual(DELIVERY_LEAD_MS);
  } finally {
    await close();
  }
});

test('a chunk is cut by requests too: wide jobs go a few to a chunk, and a job-fire wider than the bound goes whole, alone', async () => {
  const cluster = new TestCluster(zk, redis);
  // Every 2 s: three jobs of 3 items and one of 7, the bound 6 requests a chunk (job-fires: 1,000).
  const three = ['t0', 't1', 't2'].map((name) => defineJob({ name, cron: '0/2 * * * * ?', shardingTotalCount: 3, execute: () => undefined }));
  const wide = defineJob({ name: 'w', cron: '0/2 * * * * ?', shardingTotalCount: 7, execute: () => undefined });
  const { leader, commits, close } = await chunkedLeader(cluster, 1_000, 0, 0, 6);
  const skipped: Array<{ job: string; fireTime: number }> = [];
  leader.on('fire:skipped', (event) => void skipped.push(event));
  try {
    await cluster.start({ roles: ['worker'], jobs: [...three, wide], instanceId: 'w1' });
    await leader.start();
    const from = Date.now() + 1_000;
    const evens = await cluster.waitForCompleteFires('w', 7, from, 2, 20_000);
    for (const fireTime of evens) {
      const chunks = chunksOf(commits, fireTime);
      // The timer hands the jobs over in name order: t0 and t1 fill a chunk (3 + 3 = 6), t2 and
      // w would not (3 + 7), and w, wider than the bound, goes alone.
      expect(chunks).toEqual([['t0', 't1'], ['t2'], ['w']]);
      await waitFor(() => cluster.starts().filter((s) => s.fireTime === fireTime).length >= 16, { message: 'every item of the fire' });
      const starts = cluster.starts().filter((s) => s.fireTime === fireTime).map((s) => `${s.job}|${s.item}`);
      expect(new Set(starts).size).toBe(16);
      expect(starts).toHaveLength(16);
    }
    expect(skipped.filter((s) => s.fireTime >= evens[0])).toEqual([]);
  } finally {
    await close();
  }
});

test('with no job firing more often than once a minute, a chunk is not cut by requests: a big fire goes in one enqueue', async () => {
  const cluster = new TestCluster(zk, redis);
  // Three jobs of 3 items, each once a minute at the same second, the bound 6 requests a chunk.
  const at = (new Date().getUTCSeconds() + 6) % 60;
  const jobs = ['t0', 't1', 't2'].map((name) => defineJob({ name, cron: `${at} * * * * ?`, shardingTotalCount: 3, execute: () => undefined }));
  const { leader, commits, close } = await chunkedLeader(cluster, 1_000, 0, 0, 6);
  try {
    await cluster.start({ roles: ['worker'], jobs, instanceId: 'w1' });
    await leader.start();
    const [fireTime] = await cluster.waitForCompleteFires('t2', 3, 0, 1, 20_000);
    expect(chunksOf(commits, fireTime)).toEqual([['t0', 't1', 't2']]);
    // No frequent job to let pass: the usual lead.
    expect(leader.dispatchLead.deliveryMs).toBeLessThanOrEqual(DELIVERY_LEAD_MS);
  } finally {
    await close();
  }
});

test('a big tick with no job firing more often than once a minute goes in chunks, but keeps the usual lead: no frequent job waits behind it', async () => {
  const cluster = new TestCluster(zk, redis);
  // Three jobs once a minute at the same second, chunks of one job-fire.
  const at = (new Date().getUTCSeconds() + 6) % 60;
  const jobs = ['m0', 'm1', 'm2'].map((name) => defineJob({ name, cron: `${at} * * * * ?`, execute: () => undefined }));
  const { leader, commits, close } = await chunkedLeader(cluster, 1);
  try {
    await cluster.start({ roles: ['worker'], jobs, instanceId: 'w1' });
    await leader.start();
    const [fireTime] = await cluster.waitForCompleteFires('m2', 1, 0, 1, 20_000);
    expect(chunksOf(commits, fireTime)).toEqual([['m0'], ['m1'], ['m2']]);
    expect(leader.dispatchLead.deliveryMs).toBeLessThanOrEqual(DELIVERY_LEAD_MS);
  } finally {
    await close();
  }
});

test("a job whose fire waits in a chunk still to come holds its next fire back until that chunk is dispatched: each job's ledgers stay in fire order", async () => {
  const cluster = new TestCluster(zk, redis);
  const jobs = ['a', 'b', 'c'].map((name) => defineJob({ name, cron: '* * * * * ?', shardingTotalCount: 2, execute: () => undefined }));
  // Chunks of one job-fire: a tick of the three jobs goes in three chunks.
  const chunked = await chunkedLeader(cluster, 1);
  const { leader, close } = chunked;
  const commits = () => chunked.commits.flat();
  // The first chunk of one fire takes 1.3 s to plan: the next second's tick comes due meanwhile,
  // finds b and c in the chunks still to come, and dispatches only a.
  const plan = leader.dispatcher.plan.bind(leader.dispatcher);
  const from = Date.now() + 3_000;
  let slowFire: number | undefined;
  jest.spyOn(leader.dispatcher, 'plan').mockImplementation(async (state, fireTime, ...rest) => {
    if (slowFire === undefined && fireTime >= from && state.view.job === 'a') {
      slowFire = fireTime;
      await new Promise((resolve) => setTimeout(resolve, 1_300));
    }
    return plan(state, fireTime, ...rest);
  });
  try {
    await cluster.start({ roles: ['worker'], jobs, instanceId: 'w1' });
    await leader.start();
    await waitFor(() => slowFire !== undefined && commits().some((c) => c.fireTime >= slowFire! + 3_000), { timeoutMs: 20_000, message: 'three fires past the slow one' });
    const slow = slowFire!;
    const index = (job: string, fireTime: number) => commits().findIndex((c) => c.job === job && c.fireTime === fireTime);
    // The next fire of a passed between the chunks of the slow one ...
    expect(index('a', slow + 1_000)).toBeLessThan(index('b', slow));
    // ... and b's and c's next fires were held back until their own slow-tick chunks.
    for (const job of ['b', 'c']) expect(index(job, slow)).toBeLessThan(index(job, slow + 1_000));
    // Every job's ledgers in fire order, each fire once.
    for (const job of ['a', 'b', 'c']) {
      const fires = commits().filter((c) => c.job === job && c.fireTime >= slow).map((c) => c.fireTime);
      expect(fires).toEqual([...new Set(fires)].sort((x, y) => x - y));
    }
    // Every item of those fires starts, once.
    const window = (fireTime: number) => fireTime >= slow && fireTime <= slow + 2_000;
    const wanted = commits().filter((c) => window(c.fireTime)).flatMap((c) => [`${c.job}|${c.fireTime}|0`, `${c.job}|${c.fireTime}|1`]).sort();
    expect(wanted).toHaveLength(18);
    await waitFor(() => cluster.starts().filter((s) => window(s.fireTime)).length >= wanted.length, { message: 'every item of the three fires' });
    expect(cluster.starts().filter((s) => window(s.fireTime)).map((s) => `${s.job}|${s.fireTime}|${s.item}`).sort()).toEqual(wanted);
  } finally {
    await close();
  }
});

test("a later tick whose first chunk holds a job still waiting in an earlier tick's rest holds that job's fire back: its ledgers stay in fire order", async () => {
  const cluster = new TestCluster(zk, redis);
  // x fires every second for four seconds, ending at second `last` (even); y every 2 s. At `last`
  // both are due, x first (shorter period); with chunks of one, y waits in the rest while x's plan
  // takes 2.3 s. y's next fire (last + 2) comes due meanwhile, alone: its tick's first chunk.
  let second = new Date().getUTCSeconds();
  if (second > 45) {
    await new Promise((resolve) => setTimeout(resolve, (61 - second) * 1_000));
    second = new Date().getUTCSeconds();
  }
  const last = (second + 6) % 2 === 0 ? second + 6 : second + 7;
  const x = defineJob({ name: 'x', cron: `${last - 3}-${last} * * * * ?`, shardingTotalCount: 2, execute: () => undefined });
  const y = defineJob({ name: 'y', cron: '0/2 * * * * ?', shardingTotalCount: 2, execute: () => undefined });
  const chunked = await chunkedLeader(cluster, 1);
  const { leader, close } = chunked;
  const commits = () => chunked.commits.flat();
  const plan = leader.dispatcher.plan.bind(leader.dispatcher);
  let slowFire: number | undefined;
  jest.spyOn(leader.dispatcher, 'plan').mockImplementation(async (state, fireTime, ...rest) => {
    if (slowFire === undefined && state.view.job === 'x' && new Date(fireTime).getUTCSeconds() === last) {
      slowFire = fireTime;
      await new Promise((resolve) => setTimeout(resolve, 2_300));
    }
    return plan(state, fireTime, ...rest);
  });
  try {
    await cluster.start({ roles: ['worker'], jobs: [x, y], instanceId: 'w1' });
    await leader.start();
    await waitFor(() => slowFire !== undefined && commits().some((c) => c.job === 'y' && c.fireTime >= slowFire! + 4_000), { timeoutMs: 30_000, message: "y's second fire after x's slow one" });
    const slow = slowFire!;
    const index = (job: string, fireTime: number) => commits().findIndex((c) => c.job === job && c.fireTime === fireTime);
    expect(index('x', slow)).toBeGreaterThanOrEqual(0);
    expect(index('y', slow)).toBeGreaterThan(index('x', slow));
    expect(index('y', slow)).toBeLessThan(index('y', slow + 2_000));
    const fires = commits().filter((c) => c.job === 'y').map((c) => c.fireTime);
    expect(fires).toEqual([...new Set(fires)].sort((a, b) => a - b));
    const window = (fireTime: number) => fireTime >= slow && fireTime <= slow + 2_000;
    await waitFor(() => cluster.starts('y').filter((s) => window(s.fireTime)).length >= 4, { message: "y's two fires, both items" });
    expect(cluster.starts('y').filter((s) => window(s.fireTime)).map((s) => `${s.fireTime}|${s.item}`).sort()).toEqual([`${slow}|0`, `${slow}|1`, `${slow + 2_000}|0`, `${slow + 2_000}|1`]);
  } finally {
    await close();
  }
});

test('fires folded into one MISFIRE run when the leader falls a whole fire behind are emitted and counted as misfires', async () => {
  const cluster = new TestCluster(zk, redis);
  const job = defineJob({ name: 'slow', cron: '* * * * * ?', shardingTotalCount: 1, execute: () => undefined });
  const { leader, close } = await chunkedLeader(cluster, 1_000);
  const metrics = new ShardcronMetrics();
  metrics.watchLeader(leader);
  const coalesced: Array<{ job: string; fireTimes: number[]; into: number }> = [];
  leader.on('fire:coalesced', (event) => void coalesced.push(event));
  // One fire's plan takes 2.6 s: the next fires come due behind it, join one waiting tick, and
  // run once, as a MISFIRE run under the earliest.
  const plan = leader.dispatcher.plan.bind(leader.dispatcher);
  const from = Date.now() + 3_000;
  let slowFire: number | undefined;
  jest.spyOn(leader.dispatcher, 'plan').mockImplementation(async (state, fireTime, ...rest) => {
    if (slowFire === undefined && fireTime >= from) {
      slowFire = fireTime;
      await new Promise((resolve) => setTimeout(resolve, 2_600));
    }
    return plan(state, fireTime, ...rest);
  });
  try {
    await cluster.start({ roles: ['worker'], jobs: [job], instanceId: 'w1' });
    await leader.start();
    await waitFor(() => coalesced.length > 0, { timeoutMs: 20_000, message: 'a fire:coalesced event' });
    const [event] = coalesced;
    expect(event.job).toBe('slow');
    expect(event.into).toBeGreaterThan(slowFire!);
    expect(event.fireTimes.length).toBeGreaterThanOrEqual(1);
    for (const t of event.fireTimes) expect(t).toBeGreaterThan(event.into);
    // The MISFIRE run starts under `into`; the folded fires have none of their own.
    await waitFor(() => cluster.starts('slow').some((s) => s.fireTime === event.into && s.source === 'MISFIRE'), { message: 'the MISFIRE run' });
    expect(cluster.starts('slow').filter((s) => event.fireTimes.includes(s.fireTime))).toEqual([]);
    const counted = (await metrics.registry.getSingleMetric('shardcron_misfires_total')!.get()).values.find((v) => v.labels.job === 'slow')?.value;
    expect(counted).toBeGreaterThanOrEqual(event.fireTimes.length);
  } finally {
    await close();
  }
});

test("the enqueues of a big tick's later chunks let the ticks of frequent jobs go first", async () => {
  const cluster = new TestCluster(zk, redis);
  // Sixteen jobs every 4 s, split into chunks of one job-fire (the every-second job never is), and
  // a lead of 800 ms: each such tick's sixteen chunks are ledgered well before their delivery time
  // (300 ms before the fire), so their enqueues, slowed to 120 ms each, come due together and
  // hold the chain for about 1.9 s; the every-second job's next tick comes due 200 ms after the fire.
  const rare = Array.from({ length: 16 }, (_, i) => defineJob({ name: `r${i}`, cron: '0/4 * * * * ?', execute: () => undefined }));
  const often = defineJob({ name: 'often', cron: '* * * * * ?', execute: () => undefined });
  const { leader, close } = await chunkedLeader(cluster, 1, 0, 2_000, undefined, 800);
  const enqueue = leader.dispatcher.enqueue.bind(leader.dispatcher);
  jest.spyOn(leader.dispatcher, 'enqueue').mockImplementation(async (plans) => {
    if (plans.some((p) => p.job !== 'often')) await sleep(120);
    return enqueue(plans);
  });
  // When each fire of the every-second job was enqueued, from its fire time; when the rarer jobs'
  // were (by fire time); and fires folded.
  const enqueued: Array<[number, number]> = [];
  const rareEnqueued = new Map<number, number[]>();
  const oftenAt: number[] = [];
  const coalesced: unknown[] = [];
  leader.on('fire:dispatched', ({ job, fireTime }) => {
    if (job === 'often') {
      enqueued.push([fireTime, Date.now() - fireTime]);
      oftenAt.push(Date.now());
    } else rareEnqueued.set(fireTime, [...(rareEnqueued.get(fireTime) ?? []), Date.now()]);
  });
  leader.on('fire:coalesced', (event) => void coalesced.push(event));
  try {
    await cluster.start({ roles: ['worker'], jobs: [...rare, often], instanceId: 'w1' });
    await leader.start();
    const from = Date.now() + 2_000;
    await cluster.waitForCompleteFires('r15', 1, from, 2, 20_000);
    const counted = await waitFor(() => {
      const fires = enqueued.filter(([fireTime]) => fireTime > from);
      return fires.length >= 6 ? fires : undefined;
    }, { message: 'six fires of the every-second job enqueued' });
    // Enqueued ahead of their fire, or a slowed enqueue (120 ms) after it at most; before, the
    // fire after a 4-second one was enqueued about 600 ms late and the next one folded into it.
    expect(counted.filter(([, late]) => late > 250)).toEqual([]);
    expect(coalesced).toEqual([]);
    // Every fire of the rarer jobs still dispatched and run, once.
    const fires = await cluster.waitForCompleteFires('r15', 1, from, 2, 20_000);
    // Their enqueues did pile up: an enqueue of the every-second job went between two of one fire's.
    const passed = fires.some((fire) => {
      const times = rareEnqueued.get(fire) ?? [];
      return times.length === 16 && oftenAt.some((t) => t > Math.min(...times) && t < Math.max(...times));
    });
    expect(passed).toBe(true);
    for (const job of rare.map((j) => j.name)) {
      await waitFor(() => fires.every((f) => cluster.starts(job).some((s) => s.fireTime === f)), { message: `${job} ran` });
      expect(cluster.starts(job).filter((s) => fires.includes(s.fireTime))).toHaveLength(2);
    }
  } finally {
    await close();
  }
});

describe('request priorities (rate-monotonic order in the queue)', () => {
  /** The BullMQ priority of each job's completed requests on w1's queue (0: none), after a fire of `rare` at second `at`. */
  async function priorities(withFrequent: boolean): Promise<Record<string, number[]>> {
    const cluster = new TestCluster(zk, redis);
    const at = (new Date().getUTCSeconds() + 6) % 60;
    const jobs = [defineJob({ name: 'rare', cron: `${at} * * * * ?`, shardingTotalCount: 2, execute: () => undefined })];
    if (withFrequent) jobs.push(defineJob({ name: 'often', cron: '* * * * * ?', shardingTotalCount: 1, execute: () => undefined }));
    const { leader, close } = await chunkedLeader(cluster, 1_000, 100);
    try {
      const node = await cluster.start({ roles: ['worker'], jobs, instanceId: 'w1' });
      await leader.start();
      await cluster.waitForCompleteFires('rare', 2, 0, 1, 20_000);
      const connection = createRedisClient({ url: redis.url });
      const queue = new Queue(node.worker!.queue!, { connection, prefix: queuePrefix(cluster.namespace, { url: redis.url }) });
      try {
        const byJob: Record<string, number[]> = {};
        await waitFor(async () => (await queue.getJobs(['completed'])).filter((j) => j.name === 'rare').length === 2, { message: "rare's two completed requests" });
        for (const job of await queue.getJobs(['completed'])) (byJob[job.name] ??= []).push(job.opts.priority ?? 0);
        return byJob;
      } finally {
        await queue.close();
        connection.disconnect();
      }
    } finally {
      await close();
    }
  }

  it('with every-second jobs in the namespace, an every-minute job\'s requests are prioritized (1) and the every-second ones are not', async () => {
    const byJob = await priorities(true);
    expect(byJob.rare).toEqual([1, 1]);
    expect(new Set(byJob.often)).toEqual(new Set([0]));
  });

  it('with no job firing more than once a minute, nothing is prioritized: there is nothing to let pass', async () => {
    expect(await priorities(false)).toEqual({ rare: [0, 0] });
  });
});
