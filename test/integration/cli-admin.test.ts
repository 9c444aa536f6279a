/**
 * `shardcron jobs|servers|instances` as an operator runs them: the real binary, configured only by
 * SHARDCRON_* variables, against a live cluster (a leader and two workers in this process, real
 * ZooKeeper and Redis). Each test checks what the command prints and what the cluster then does.
 */
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { namespaceQueues } from '../../src/shared/redis/namespace-queues';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { getFreePort } from '../../src/dev/free-port';
import { defineJob, type ResolvedJobDefinition } from '../../src/shared/config/job-definition';
import { QUEUE_PREFIX } from '../../src/shared/registry/queue-names';
import { registryPaths as paths } from '../../src/shared/registry/registry-paths';
import { triggerRequestCodec } from '../../src/shared/registry/trigger-request';
import { createRedisConnection } from '../../src/shared/redis/redis-connection';
import type { ZkClient } from '../../src/shared/zk';
import { sleep } from '../../src/shared/zk/backoff';
import { cliExitCode, killCliRuns, runCli } from '../helpers/cli-process';
import { TestCluster } from '../helpers/cluster';
import { closeServices, startRedis, startZooKeeper, waitFor } from '../helpers/services';
import { closeZkClients, connectZk } from '../helpers/zk';

let zkServer: ZooKeeperServer;
let redisServer: RedisServer;
let cluster: TestCluster;
/** A client on the cluster's namespace, to look at what the commands wrote. */
let zk: ZkClient;
let redis: Redis;

const job = (name: string, total: number, parameters = ''): ResolvedJobDefinition =>
  defineJob({ name, cron: '* * * * * ?', shardingTotalCount: total, shardingItemParameters: parameters, execute: () => sleep(50) });
const JOBS = [job('billing', 4, '0=A,1=B,2=C,3=D'), job('reports', 2)];

/** Runs the binary on `namespace` (the cluster's by default) and waits for it to exit. */
async function cli(args: string[], extraEnv: Record<string, string> = {}, namespace = cluster.namespace) {
  const run = runCli(args, { SHARDCRON_ZK: zkServer.connectionString, SHARDCRON_REDIS_URL: redisServer.url, SHARDCRON_NAMESPACE: namespace, ...extraEnv });
  const code = await cliExitCode(run, 30_000);
  return { code, stdout: run.stdout.join('\n').trimEnd(), stderr: run.stderr.join('\n').trimEnd() };
}

/** Parsed JSON output of a successful command. */
async function cliJson<T>(args: string[]): Promise<T> {
  const { code, stdout, stderr } = await cli([...args, '--json']);
  expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
  return JSON.parse(stdout) as T;
}

/**
 * Fire times of `name` after `after` in which `complete` items all started, once there are `count`
 * of them: what the cluster did once a change had taken effect.
 */
async function firesAfter(name: string, after: number, complete: number, count = 3): Promise<number[]> {
  return waitFor(
    () => {
      const byFire = new Map<number, Set<number>>();
      for (const r of cluster.starts(name)) if (r.fireTime > after) byFire.set(r.fireTime, (byFire.get(r.fireTime) ?? new Set()).add(r.item));
      const fires = [...byFire].filter(([, items]) => items.size >= complete).map(([fire]) => fire).sort((a, b) => a - b);
      return fires.length >= count && fires;
    },
    { timeoutMs: 15_000, message: `${count} fires of ${name} after ${after} with ${complete} items started` },
  );
}

/** Every node at `path` and below it (with its data), for assertions that should find none. */
async function subtree(path: string): Promise<string[]> {
  const kids = await zk.children(path).catch(() => undefined);
  if (kids === undefined) return [];
  const data = await zk.getText(path).catch(() => undefined);
  const below = await Promise.all(kids.map((kid) => subtree(`${path}/${kid}`)));
  return [`${path} ${JSON.stringify(data)}`, ...below.flat()];
}

beforeAll(async () => {
  [zkServer, redisServer] = await Promise.all([startZooKeeper(), startRedis()]);
  cluster = new TestCluster(zkServer, redisServer);
  // Completed requests kept (SHARDCRON_COMPLETED_KEPT): the removal test finds the other job's in every queue.
  await cluster.start({ instanceId: 'leader', roles: ['scheduler'], env: { SHARDCRON_COMPLETED_KEPT: '100' } });
  await cluster.start({ instanceId: 'w1', ip: '10.0.0.1', roles: ['worker'], jobs: JOBS });
  await cluster.start({ instanceId: 'w2', ip: '10.0.0.2', roles: ['worker'], jobs: JOBS });
  zk = await connectZk(zkServer.connectionString, { namespace: cluster.namespace });
  redis = createRedisConnection(redisServer.url);
  await firesAfter('billing', 0, 4, 1);
});

afterEach(killCliRuns);

afterAll(async () => {
  redis?.disconnect();
  await cluster?.close();
  await closeZkClients();
  await closeServices();
});

describe('reading', () => {
  it('jobs list prints an aligned table, and --json the console shape', async () => {
    const { code, stdout, stderr } = await cli(['jobs', 'list']);
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    const lines = stdout.split('\n');
    expect(lines[0]).toMatch(/^NAME {5}STATUS +TYPE +CRON +TIME ZONE +ITEMS +INSTANCES +NEXT FIRE +LAST FIRE$/);
    expect(lines[1]).toMatch(/^billing {2}OK +SIMPLE +\* \* \* \* \* \? +UTC +4 +2 +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(lines[2]).toMatch(/^reports {2}OK +SIMPLE .* 2 +2 /);
    // Columns line up: every row starts its STATUS column where the header does.
    const statusAt = lines[0].indexOf('STATUS');
    for (const line of lines.slice(1)) expect(line.slice(statusAt, statusAt + 2)).toBe('OK');

    const { jobs } = await cliJson<{ jobs: Array<Record<string, unknown>> }>(['jobs', 'list']);
    expect(jobs.map((j) => j.name)).toEqual(['billing', 'reports']);
    expect(jobs[0]).toEqual({
      name: 'billing',
      type: 'SIMPLE',
      cron: '* * * * * ?',
      timeZone: 'UTC',
      shardingTotalCount: 4,
      status: 'OK',
      instances: 2,
      nextFireTime: expect.any(Number),
      lastFireTime: expect.any(Number),
    });
    expect(jobs[0].nextFireTime as number).toBeGreaterThan(Date.now() - 1_000);
  });

  it('jobs show prints the status, the stored config and each item, and --json the console shape', async () => {
    const { code, stdout } = await cli(['jobs', 'show', 'billing']);
    expect(code).toBe(0);
    const lines = stdout.split('\n');
    expect(lines.slice(0, 2)).toEqual(['name                      billing', 'status                    OK']);
    expect(lines).toContain('shardingItemParameters    0=A,1=B,2=C,3=D');
    const items = lines.slice(lines.indexOf('') + 1);
    expect(items[0]).toBe('ITEM  PARAMETER  STATUS   INSTANCE  FAILOVER');
    expect(items.slice(1).map((l) => l.split(/ +/).slice(0, 2))).toEqual([['0', 'A'], ['1', 'B'], ['2', 'C'], ['3', 'D']]);
    for (const line of items.slice(1)) expect(line).toMatch(/ (RUNNING|PENDING) +w[12] +-$/);

    const detail = await cliJson<{ name: string; status: string; config: Record<string, unknown>; items: Array<Record<string, unknown>>; lastFireTime: number }>(['jobs', 'show', 'billing']);
    expect(detail).toMatchObject({ name: 'billing', status: 'OK', config: { name: 'billing', shardingTotalCount: 4, monitorExecution: true } });
    expect(detail.items).toHaveLength(4);
    for (const item of detail.items) expect(item).toEqual({ item: item.item, parameter: 'ABCD'[item.item as number], status: expect.stringMatching(/^(RUNNING|PENDING)$/), instanceId: expect.stringMatching(/^w[12]$/), failover: false });
  });

  it('instances lists the live workers and their jobs', async () => {
    const { code, stdout } = await cli(['instances']);
    expect(code).toBe(0);
    const lines = stdout.split('\n');
    expect(lines[0]).toMatch(/^INSTANCE +IP +HOSTNAME +PID +STATE +JOBS +QUEUE$/);
    expect(lines.slice(1).map((l) => l.split(/ +/).filter((_, i) => [0, 1, 4, 5].includes(i)))).toEqual([
      ['w1', '10.0.0.1', 'ready', 'billing,reports'],
      ['w2', '10.0.0.2', 'ready', 'billing,reports'],
    ]);
    const { instances } = await cliJson<{ instances: Array<Record<string, unknown>> }>(['instances']);
    expect(instances[0]).toEqual({ instanceId: 'w1', ip: '10.0.0.1', hostname: expect.any(String), pid: process.pid, state: 'ready', queue: expect.stringContaining(`${cluster.namespace}.w1.`), jobs: ['billing', 'reports'] });
  });

  it('item-lock shows the lock the workers recorded, and refuses to switch it while they run', async () => {
    expect(await cli(['item-lock'])).toEqual({ code: 0, stdout: `Namespace ${cluster.namespace} uses the lease item lock.`, stderr: '' });
    expect(await cliJson(['item-lock'])).toEqual({ itemLock: 'lease' });
    const refused = await cli(['item-lock', 'per-run']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^shardcron item-lock per-run: namespace .* has live workers \(instance \S+ is registered\): stop every worker first/);
    expect(await zk.getText(paths.itemLock())).toBe('lease');
    expect((await cli(['item-lock', 'lease'])).stdout).toBe(`Namespace ${cluster.namespace} already uses the lease item lock.`);
  });
});

describe('operating', () => {
  it('disabling an item stops that item only; enabling it brings it back', async () => {
    const disable = await cli(['jobs', 'disable', 'billing', '--item', '2']);
    expect(disable).toEqual({ code: 0, stdout: 'Item 2 of job billing disabled.', stderr: '' });
    const at = Date.now();
    expect((await cli(['jobs', 'disable', 'billing', '--item', '2'])).stdout).toBe('Item 2 of job billing was already disabled.');
    const detail = await cliJson<{ items: Array<{ item: number; status: string }> }>(['jobs', 'show', 'billing']);
    expect(detail.items[2].status).toBe('DISABLED');

    const fires = await firesAfter('billing', at + 1_000, 3);
    const started = cluster.starts('billing').filter((r) => r.fireTime > at + 1_000);
    for (const fire of fires) expect(started.filter((r) => r.fireTime === fire).map((r) => r.item).sort()).toEqual([0, 1, 3]);
    expect(started.filter((r) => r.item === 2)).toEqual([]);

    expect(await cliJson(['jobs', 'enable', 'billing', '--item', '2'])).toEqual({ job: 'billing', item: 2, disabled: false, changed: true });
    await firesAfter('billing', Date.now() + 1_000, 4, 1);
  });

  it('disabling a job stops its fires and shows DISABLED; enabling it resumes them', async () => {
    expect(await cli(['jobs', 'disable', 'reports'])).toEqual({ code: 0, stdout: 'Job reports disabled.', stderr: '' });
    const at = Date.now();
    expect((await cli(['jobs', 'disable', 'reports'])).stdout).toBe('Job reports was already disabled.');
    expect((await cli(['jobs', 'list'])).stdout).toMatch(/\nreports +DISABLED +SIMPLE .* - +\S+$/);
    // billing goes on; reports fires no more.
    await firesAfter('billing', at + 1_000, 4, 2);
    expect(cluster.starts('reports').filter((r) => r.fireTime > at + 1_000)).toEqual([]);

    expect(await cli(['jobs', 'enable', 'reports'])).toEqual({ code: 0, stdout: 'Job reports enabled.', stderr: '' });
    await firesAfter('reports', Date.now(), 2, 1);
  });

  it('disabling a server moves every item of its jobs to the other server; enabling it shares them again', async () => {
    const disable = await cli(['servers', 'disable', '10.0.0.2']);
    expect(disable).toEqual({ code: 0, stdout: 'Server 10.0.0.2 disabled in 2 job(s): billing, reports.', stderr: '' });
    const at = Date.now();
    for (const fire of await firesAfter('billing', at + 1_000, 4)) expect(cluster.placement('billing', fire)).toEqual({ w1: [0, 1, 2, 3] });
    expect((await cliJson<{ jobs: Array<{ status: string }> }>(['jobs', 'list'])).jobs.map((j) => j.status)).toEqual(['OK', 'OK']);

    expect(await cliJson(['servers', 'enable', '10.0.0.2'])).toEqual({ ip: '10.0.0.2', jobs: ['billing', 'reports'], changed: ['billing', 'reports'], disabled: false });
    const [fire] = await firesAfter('billing', Date.now() + 1_000, 4, 1);
    expect(Object.keys(cluster.placement('billing', fire)).sort()).toEqual(['w1', 'w2']);
  });

  it('removing a job leaves nothing of it in ZooKeeper or Redis, and the other job runs on', async () => {
    const removed = await cli(['jobs', 'remove', 'reports']);
    expect(removed.stderr).toBe('');
    expect(removed.code).toBe(0);
    expect(removed.stdout).toMatch(/^Job reports removed: \d+ ZooKeeper nodes, \d+ queued requests\.$/);
    const at = Date.now();

    await firesAfter('billing', at + 1_000, 4, 2);
    // What is left under /reports, if anything, says who wrote it back.
    expect(await subtree(paths.job('reports'))).toEqual([]);
    expect(await zk.children('/')).not.toContain('reports');
    for (const queue of await namespaceQueues(redis, QUEUE_PREFIX, cluster.namespace)) {
      const q = new Queue(queue, { connection: redis, prefix: QUEUE_PREFIX });
      const left = await q.getJobs(['wait', 'delayed', 'prioritized', 'active', 'completed', 'failed', 'waiting-children']);
      await q.close();
      expect(left.filter((j) => j.name === 'reports').map((j) => j.id)).toEqual([]);
      expect(left.some((j) => j.name === 'billing')).toBe(true);
    }
    expect(cluster.starts('reports').filter((r) => r.fireTime > at)).toEqual([]);
    expect(await cli(['jobs', 'show', 'reports'])).toMatchObject({ code: 3, stderr: 'shardcron jobs show reports: Job "reports" not found' });
    expect((await cliJson<{ jobs: Array<{ name: string }> }>(['jobs', 'list'])).jobs.map((j) => j.name)).toEqual(['billing']);
  });
});

describe('triggering', () => {
  /** A namespace with a worker and no leader: a trigger request stays where the command wrote it. */
  let noLeader: TestCluster;

  beforeAll(async () => {
    noLeader = new TestCluster(zkServer, redisServer);
    await noLeader.start({ instanceId: 'solo', ip: '10.0.0.3', roles: ['worker'], jobs: [defineJob({ name: 'adhoc', shardingTotalCount: 2, execute: () => undefined })] });
  });

  afterAll(async () => {
    await noLeader.close();
  });

  it('writes the request node and prints its id', async () => {
    const { code, stdout, stderr } = await cli(['jobs', 'trigger', 'adhoc'], {}, noLeader.namespace);
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    const requestId = /^Job adhoc triggered: request (\d{13}-[0-9a-f]{12})\.$/.exec(stdout)?.[1];
    expect(requestId).toBeDefined();
    const client = await connectZk(zkServer.connectionString, { namespace: noLeader.namespace });
    const path = paths.trigger('adhoc', requestId!);
    const request = triggerRequestCodec.decode((await client.get(path)).data, path);
    expect(request).toEqual({ requestId, requestedAt: Number(requestId!.slice(0, 13)), requestedBy: expect.stringMatching(/^cli:.+@.+$/) });
    expect(Math.abs(request.requestedAt - Date.now())).toBeLessThan(30_000);

    const json = await cli(['jobs', 'trigger', 'adhoc', '--json'], {}, noLeader.namespace);
    expect(JSON.parse(json.stdout)).toEqual({ requestId: expect.stringMatching(/^\d{13}-[0-9a-f]{12}$/) });
    expect((await client.children(paths.triggers('adhoc'))).sort()).toEqual([requestId, JSON.parse(json.stdout).requestId].sort());
  });

  it('refuses a disabled job with exit 1, naming the job', async () => {
    expect((await cli(['jobs', 'disable', 'adhoc'], {}, noLeader.namespace)).code).toBe(0);
    const { code, stdout, stderr } = await cli(['jobs', 'trigger', 'adhoc'], {}, noLeader.namespace);
    expect({ code, stdout }).toEqual({ code: 1, stdout: '' });
    expect(stderr).toBe('shardcron jobs trigger adhoc: Job "adhoc" is disabled: a disabled job is not triggered; enable it first');
    expect((await cli(['jobs', 'enable', 'adhoc'], {}, noLeader.namespace)).code).toBe(0);
  });
});

describe('failing', () => {
  it('exits 3 for an unknown job, item or server, naming it', async () => {
    expect(await cli(['jobs', 'trigger', 'nope'])).toEqual({ code: 3, stdout: '', stderr: 'shardcron jobs trigger nope: Job "nope" not found' });
    expect(await cli(['jobs', 'disable', 'nope'])).toMatchObject({ code: 3, stderr: 'shardcron jobs disable nope: Job "nope" not found' });
    expect(await cli(['jobs', 'remove', 'nope'])).toMatchObject({ code: 3, stderr: 'shardcron jobs remove nope: Job "nope" not found' });
    expect(await cli(['jobs', 'enable', 'billing', '--item', '4'])).toMatchObject({ code: 3, stderr: 'shardcron jobs enable billing: Job "billing" has no item 4: its items are 0 to 3' });
    expect(await cli(['servers', 'disable', '10.9.9.9'])).toMatchObject({ code: 3, stderr: expect.stringMatching(/^shardcron servers disable 10\.9\.9\.9: No job has the server "10\.9\.9\.9"/) });
  });

  it('exits 2 on bad usage, before connecting', async () => {
    const r = await cli(['jobs', 'disable', 'billing', '--item', 'two']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^shardcron jobs disable billing: Invalid sharding item:\n {2}- --item: "two" is not a sharding item number[\s\S]*\nUsage: shardcron jobs list/);
    expect((await cli(['jobs', 'show'])).code).toBe(2);
  });

  it('exits 1 within seconds when ZooKeeper does not answer', async () => {
    const port = await getFreePort();
    const started = Date.now();
    const r = await cli(['jobs', 'list'], { SHARDCRON_ZK: `127.0.0.1:${port}` });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^shardcron jobs list: Cannot connect to ZooKeeper at 127\\.0\\.0\\.1:${port} .*after 1 attempt\\(s\\) of 3000 ms`));
    // 3 s to connect, plus starting Node.js and the TypeScript sources.
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
