/**
 * The console on a live cluster whose workers are real processes: a worker killed with SIGKILL
 * disappears from `/api/instances` and its items move to the survivors in the shard map, and
 * `/metrics` scraped twice shows the fires, executions and failovers that happened in between.
 */
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import type { ShardcronNode } from '../../src/node';
import { defineJob } from '../../src/shared/config/job-definition';
import { sleep } from '../../src/shared/zk/backoff';
import { TestCluster } from '../helpers/cluster';
import { ConsoleClient } from '../helpers/console-client';
import { ProcessCluster, type JobSpec } from '../helpers/process-cluster';
import { closeServices, eventually, startRedis, startZooKeeper, waitFor } from '../helpers/services';

const TOKEN = 'live-admin-token-0123456789';
const SPEC: JobSpec = { name: 'live', cron: '* * * * * ?', shardingTotalCount: 4, failover: true, sleepMs: 400 };

let zk: ZooKeeperServer;
let redis: RedisServer;
let cluster: TestCluster;
let processes: ProcessCluster;
let node: ShardcronNode;
let api: ConsoleClient;

/** The value of one sample of a Prometheus text exposition (0 when absent). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const present = (match[2] ?? '').split(',');
    if (wanted.every((l) => present.includes(l))) return Number(match[3]);
  }
  return 0;
}

beforeAll(async () => {
  [zk, redis] = await Promise.all([startZooKeeper(), startRedis()]);
  processes = new ProcessCluster({ zk: zk.connectionString, redisUrl: redis.url, sessionTimeoutMs: 2_000 });
  // The in-process console node joins the processes' namespace.
  cluster = new TestCluster(zk, redis, processes.namespace);
  const live = defineJob({ name: SPEC.name, cron: SPEC.cron, shardingTotalCount: 4, failover: true, execute: (ctx) => sleep(SPEC.sleepMs!, ctx.signal) });
  node = await cluster.start({ roles: ['scheduler', 'worker', 'console'], jobs: [live], instanceId: 'c1', ops: { host: '127.0.0.1', port: 0, token: TOKEN } });
  await Promise.all(['p1', 'p2'].map((name) => processes.start(name, 'worker', [SPEC])));
  api = new ConsoleClient(node.console!.url);
});
afterAll(async () => {
  await processes?.close();
  await cluster?.close();
  await closeServices();
});

const instances = async () => (await api.get('/api/instances', { token: TOKEN })).body.instances.map((i: { instanceId: string }) => i.instanceId);
const shardMap = async () => (await api.get('/api/jobs/live', { token: TOKEN })).body.items as Array<{ item: number; instanceId: string | null; status: string; failover: boolean }>;

describe('the console on a live cluster', () => {
  it('a worker killed with SIGKILL disappears from /api/instances and its items move to the survivors', async () => {
    await eventually(async () => expect(await instances()).toEqual(['c1', 'p1', 'p2']), { timeoutMs: 15_000 });
    // Every instance holds an item once a fire after the last join resharded the job.
    await eventually(async () => expect(new Set((await shardMap()).map((i) => i.instanceId))).toEqual(new Set(['c1', 'p1', 'p2'])), { timeoutMs: 15_000 });
    const before = await api.get('/metrics', { token: TOKEN });
    expect(sample(before.text, 'shardcron_live_instances')).toBe(3);
    processes.signal('p1', 'SIGKILL');
    await eventually(async () => expect(await instances()).toEqual(['c1', 'p2']), { timeoutMs: 15_000, message: 'p1 gone from /api/instances' });
    const moved = await eventually(async () => {
      const items = await shardMap();
      expect(items.map((i) => i.instanceId).filter((id) => id === 'p1')).toEqual([]);
      expect(new Set(items.map((i) => i.instanceId))).toEqual(new Set(['c1', 'p2']));
      return items;
    }, { timeoutMs: 15_000, message: 'p1\'s items moved' });
    expect(moved).toHaveLength(4);
    // SHARDING_FLAG until the next fire reshards over the survivors, then OK.
    await eventually(async () => {
      const jobs = (await api.get('/api/jobs', { token: TOKEN })).body.jobs;
      expect(jobs.find((j: { name: string }) => j.name === 'live')).toMatchObject({ status: 'OK', instances: 2 });
    }, { timeoutMs: 5_000 });
    const after = await eventually(async () => {
      const answer = await api.get('/metrics', { token: TOKEN });
      expect(sample(answer.text, 'shardcron_live_instances')).toBe(2);
      return answer;
    });
    // p1 was killed mid-run or with requests queued at every fire (items take 400 ms, fires are 1 s apart).
    expect(sample(after.text, 'shardcron_failovers_total', { job: 'live' })).toBeGreaterThan(sample(before.text, 'shardcron_failovers_total', { job: 'live' }));
  });

  it('/metrics shows the contract\'s names, and the fires and executions that happen between two scrapes', async () => {
    await waitFor(() => node.leader!.isLeader, { message: 'the console node leads' });
    const first = await api.get('/metrics', { token: TOKEN });
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toMatch(/^text\/plain/);
    for (const name of [
      'shardcron_fires_total',
      'shardcron_executions_total',
      'shardcron_fire_to_start_seconds',
      'shardcron_execution_seconds',
      'shardcron_failovers_total',
      'shardcron_misfires_total',
      'shardcron_is_leader',
      'shardcron_live_instances',
      'shardcron_queue_depth',
      'shardcron_process_cpu_user_seconds_total',
    ]) {
      expect(first.text).toContain(`# TYPE ${name} `);
    }
    expect(sample(first.text, 'shardcron_is_leader')).toBe(1);
    const queues = (await api.get('/api/instances', { token: TOKEN })).body.instances.map((i: { queue: string }) => i.queue);
    for (const queue of queues) expect(first.text).toContain(`shardcron_queue_depth{queue="${queue}"}`);
    const fires = sample(first.text, 'shardcron_fires_total', { job: 'live' });
    const completed = sample(first.text, 'shardcron_executions_total', { job: 'live', status: 'completed' });
    const durations = sample(first.text, 'shardcron_execution_seconds_count');
    expect(fires).toBeGreaterThan(0);
    await sleep(3_000);
    const second = await api.get('/metrics', { token: TOKEN });
    // Every-second fires: about three more; this node runs its share of each (about 2 items of 4).
    expect(sample(second.text, 'shardcron_fires_total', { job: 'live' })).toBeGreaterThanOrEqual(fires + 2);
    expect(sample(second.text, 'shardcron_executions_total', { job: 'live', status: 'completed' })).toBeGreaterThanOrEqual(completed + 2);
    expect(sample(second.text, 'shardcron_execution_seconds_count')).toBeGreaterThan(durations);
    expect(sample(second.text, 'shardcron_fire_to_start_seconds_count')).toBeGreaterThan(0);
    // What the worker ran is what the metric counts: its own executions, one per finished run.
    const finished = cluster.finishes('live').filter((f) => f.instanceId === 'c1' && f.status === 'completed').length;
    const counted = sample((await api.get('/metrics', { token: TOKEN })).text, 'shardcron_executions_total', { job: 'live', status: 'completed' });
    expect(Math.abs(counted - finished)).toBeLessThanOrEqual(1);
  });
});
