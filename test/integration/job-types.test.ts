/**
 * Job types and policies end to end, on real ZooKeeper, Redis and nodes: retries under one lock and
 * their attempts in the recent list, a timeout and its webhook, a streaming DATAFLOW run that ends
 * when the job is resharded, and SCRIPT and HTTP jobs defined by data (the admin layer, as
 * `POST /api/jobs` and `shardcron jobs create`) run by a generic worker with no code of its own,
 * changed and removed while it runs.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { openAdmin, type Admin } from '../../src/admin';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { RecentExecutionsReader } from '../../src/history/recent-executions-reader';
import { defineJob } from '../../src/shared/config/job-definition';
import { createRedisConnection } from '../../src/shared/redis/redis-connection';
import type { ExecutionRecord } from '../../src/shared/registry/execution-record';
import { TestCluster } from '../helpers/cluster';
import { closeServices, startRedis, startZooKeeper, waitFor } from '../helpers/services';

let zk: ZooKeeperServer;
let redisServer: RedisServer;
let redis: Redis;
let cluster: TestCluster;
let admin: Admin;
let reader: RecentExecutionsReader;

beforeAll(async () => {
  [zk, redisServer] = await Promise.all([startZooKeeper(), startRedis()]);
  redis = createRedisConnection(redisServer.url);
});
afterAll(async () => {
  redis.disconnect();
  await closeServices();
});
beforeEach(async () => {
  cluster = new TestCluster(zk, redisServer);
  admin = await openAdmin({ env: { SHARDCRON_ZK: zk.connectionString, SHARDCRON_REDIS_URL: redisServer.url, SHARDCRON_NAMESPACE: cluster.namespace } });
  reader = new RecentExecutionsReader({ redis, namespace: cluster.namespace });
});
afterEach(async () => {
  await admin.close();
  await cluster.close();
});

/** The job's recent records once `done` holds for them (newest first). */
async function recordsWhen(job: string, done: (records: ExecutionRecord[]) => boolean, message: string, timeoutMs = 15_000): Promise<ExecutionRecord[]> {
  let records: ExecutionRecord[] = [];
  await waitFor(
    async () => {
      records = await reader.recent(job, { limit: 1_000 });
      return done(records);
    },
    { timeoutMs, intervalMs: 100, message },
  );
  return records;
}

/** A node that leads and works, and waits until it leads. */
async function leaderWorker(instanceId: string, jobs: Parameters<TestCluster['start']>[0]['jobs'], env: Record<string, string> = {}) {
  const node = await cluster.start({ roles: ['scheduler', 'worker'], jobs, instanceId, env });
  await waitFor(() => node.leader!.isLeader, { message: 'leader elected' });
  return node;
}

/** A local HTTP server answering `answer(path)`; it keeps every request it got. */
async function httpServer(answer: (path: string) => { status: number; body: string }) {
  const requests: Array<{ method: string; path: string; headers: Record<string, unknown>; body: string; at: number }> = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      requests.push({ method: req.method!, path: req.url!, headers: req.headers, body, at: Date.now() });
      const { status, body: text } = answer(req.url!);
      res.writeHead(status, { 'content-type': 'text/plain' }).end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, requests, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

describe('execution policies', () => {
  it('retries a failing execution under one lock: fails twice, succeeds on the third attempt, one record with attempts 3', async () => {
    const calls: number[] = [];
    const job = defineJob({
      name: 'flaky',
      shardingTotalCount: 1,
      retry: { attempts: 3, backoffMs: 50, backoffFactor: 2 },
      execute: () => {
        calls.push(Date.now());
        if (calls.length < 3) throw new Error(`attempt ${calls.length} failed`);
      },
    });
    await leaderWorker('w1', [job]);
    await admin.trigger('flaky');
    const [record] = await recordsWhen('flaky', (r) => r.length >= 1, 'the execution recorded');
    expect(record).toMatchObject({ job: 'flaky', item: 0, source: 'TRIGGER', status: 'completed', attempts: 3, instanceId: 'w1' });
    expect(record.error).toBeUndefined();
    expect(calls).toHaveLength(3);
    // The back-off: 50 ms before the second attempt, 100 ms before the third.
    expect(calls[1] - calls[0]).toBeGreaterThanOrEqual(45);
    expect(calls[2] - calls[1]).toBeGreaterThanOrEqual(95);
    // One execution of the item: one start and one finish, the lock held across the attempts.
    expect(cluster.starts('flaky')).toHaveLength(1);
    expect(cluster.finishes('flaky')).toHaveLength(1);
  });

  it('a run past timeoutMs is aborted and recorded as timeout; its webhook gets the record, the item runs again at the next fire', async () => {
    const hook = await httpServer(() => ({ status: 204, body: '' }));
    try {
      let aborted = 0;
      const job = defineJob({
        name: 'stuck',
        cron: '* * * * * ?',
        shardingTotalCount: 1,
        timeoutMs: 300,
        misfire: false,
        errorHandler: { webhook: `${hook.url}/hooks/shardcron` },
        execute: (ctx) =>
          new Promise<void>((resolve) => {
            ctx.signal.addEventListener('abort', () => {
              aborted += 1;
              resolve();
            });
          }),
      });
      await leaderWorker('w1', [job]);
      const records = await recordsWhen('stuck', (r) => r.filter((x) => x.status === 'timeout').length >= 2, 'two timed-out runs');
      const timedOut = records.filter((r) => r.status === 'timeout');
      for (const r of timedOut) {
        expect(r.durationMs).toBeGreaterThanOrEqual(290);
        expect(r.error?.message).toMatch(/300 ms/);
      }
      expect(aborted).toBeGreaterThanOrEqual(2);
      await waitFor(() => hook.requests.length >= 2, { message: 'webhook posts' });
      const post = hook.requests[0];
      expect(post).toMatchObject({ method: 'POST', path: '/hooks/shardcron' });
      expect(post.headers['content-type']).toMatch(/application\/json/);
      const report = JSON.parse(post.body) as { event: string; record: ExecutionRecord };
      expect(report.event).toBe('execution:failed');
      expect(report.record).toMatchObject({ job: 'stuck', item: 0, status: 'timeout', instanceId: 'w1' });
      expect(cluster.overlaps('stuck')).toEqual([]);
    } finally {
      await hook.close();
    }
  });
});

describe('DATAFLOW', () => {
  it('a streaming run fetches until the job is flagged for resharding: a new instance joining ends it, completed with its counts', async () => {
    let fetched = 0;
    let processed = 0;
    const job = defineJob({
      name: 'stream',
      type: 'DATAFLOW',
      streaming: true,
      shardingTotalCount: 2,
      fetchData: async () => {
        await sleep(50);
        fetched += 1;
        return [1, 2, 3];
      },
      processData: (_ctx, items: unknown[]) => {
        processed += items.length;
      },
    });
    await leaderWorker('w1', [job]);
    await admin.trigger('stream');
    await waitFor(() => processed >= 30, { message: 'the stream under way' });
    // Nothing ends a stream that always has data, but a reshard: a second instance brings one.
    expect(await reader.recent('stream')).toEqual([]);
    const joinedAt = Date.now();
    await cluster.start({ roles: ['worker'], jobs: [job], instanceId: 'w2' });
    const records = await recordsWhen('stream', (r) => r.length === 2, 'both items ended', 10_000);
    for (const r of records) {
      expect(r).toMatchObject({ status: 'completed', instanceId: 'w1', failed: 0 });
      expect(r.finishedAt).toBeGreaterThanOrEqual(joinedAt);
      expect(r.processed).toBeGreaterThan(0);
    }
    expect(records.reduce((sum, r) => sum + r.processed!, 0)).toBe(processed);
    expect(fetched).toBeGreaterThan(10);
    // The reshard deleted the flag: the next run streams on (it would stop after one fetch if not).
    const before = processed;
    await admin.trigger('stream');
    await waitFor(() => processed >= before + 60, { message: 'the next run streams' });
    expect(await reader.recent('stream')).toHaveLength(2);
  });
});

describe('jobs defined by data on a generic worker', () => {
  it('an HTTP job: a 500 is a failure with its status and body; an update takes effect at the next fire; removal stops it', async () => {
    const site = await httpServer((p) => (p.startsWith('/broken') ? { status: 500, body: 'database is down' } : { status: 200, body: 'ok' }));
    try {
      await leaderWorker('leader', []);
      const worker = await cluster.start({ roles: ['worker'], instanceId: 'generic', env: { SHARDCRON_WORKER_GENERIC: 'script,http' } });
      const config = await admin.createJob({ name: 'pinger', type: 'HTTP', cron: '* * * * * ?', shardingTotalCount: 2, http: { url: `${site.url}/broken` } });
      expect(config).toMatchObject({ name: 'pinger', type: 'HTTP' });
      await expect(admin.createJob({ name: 'pinger', type: 'HTTP', http: { url: site.url } })).rejects.toMatchObject({ code: 'SHARDCRON_CONFLICT' });

      const failed = await recordsWhen('pinger', (r) => r.filter((x) => x.status === 'failed').length >= 2, 'failed runs recorded');
      expect(worker.worker!.genericJobs).toEqual(['pinger']);
      const failure = failed.find((r) => r.status === 'failed')!;
      expect(failure).toMatchObject({ instanceId: 'generic', httpStatus: 500 });
      expect(failure.error?.message).toMatch(/500/);
      expect(failure.error?.message).toContain('database is down');
      const context = JSON.parse(site.requests[0].headers.shardingcontext as string) as { jobName: string; shardingTotalCount: number };
      expect(context).toMatchObject({ jobName: 'pinger', shardingTotalCount: 2 });

      await admin.updateConfig('pinger', { http: { url: `${site.url}/healthy`, method: 'POST', body: 'ping' } });
      const updatedAt = Date.now();
      await waitFor(() => site.requests.some((r) => r.path === '/healthy'), { message: 'the updated URL called' });
      // The next fire after the update (at most a second and the watch's delay later) uses it.
      expect(site.requests.find((r) => r.path === '/healthy')!.at - updatedAt).toBeLessThan(3_000);
      expect(site.requests.find((r) => r.path === '/healthy')).toMatchObject({ method: 'POST', body: 'ping' });
      await recordsWhen('pinger', (r) => r.some((x) => x.status === 'completed' && x.httpStatus === 200), 'a completed run');

      await admin.removeJob('pinger');
      await waitFor(() => worker.worker!.genericJobs.length === 0, { message: 'the generic worker lets the job go' });
      await sleep(300); // a request in flight at the removal ends
      const calls = site.requests.length;
      await sleep(2_500);
      expect(site.requests.length).toBe(calls);
    } finally {
      await site.close();
    }
  });

  it('a SCRIPT job can run the shardcron CLI, whose configuration check accepts the context variable shardcron sets', async () => {
    // Every SHARDCRON_* name must be known to the check, and the script's process gets SHARDCRON_SHARDING_CONTEXT.
    await leaderWorker('leader', []);
    const worker = await cluster.start({ roles: ['worker'], instanceId: 'generic', env: { SHARDCRON_WORKER_GENERIC: 'script' } });
    const bin = path.resolve(__dirname, '..', '..', 'bin', 'shardcron.js');
    await admin.createJob({
      name: 'calls-cli',
      type: 'SCRIPT',
      shardingTotalCount: 1,
      // The test harness's own SHARDCRON_TEST_* variables (this process's, which the script inherits)
      // are no configuration of shardcron's: emptied here, as a worker's environment would not have them.
      script: {
        command: [process.execPath, bin, 'ping'],
        env: { SHARDCRON_ZK: zk.connectionString, SHARDCRON_REDIS_URL: redisServer.url, ...Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith('SHARDCRON_TEST_')).map((k) => [k, ''])) },
        timeoutMs: 30_000,
      },
    });
    await waitFor(() => worker.worker!.genericJobs.includes('calls-cli'), { message: 'the generic worker follows the job' });
    await admin.trigger('calls-cli');
    const [record] = await recordsWhen('calls-cli', (r) => r.length === 1, 'the script ran', 40_000);
    expect(record).toMatchObject({ status: 'completed', exitCode: 0 });
  });

  it('a SCRIPT job stopped by its script.timeoutMs is recorded as timeout, like one stopped by the job\'s timeoutMs', async () => {
    await leaderWorker('leader', []);
    const worker = await cluster.start({ roles: ['worker'], instanceId: 'generic', env: { SHARDCRON_WORKER_GENERIC: 'script' } });
    await admin.createJob({ name: 'slow-script', type: 'SCRIPT', shardingTotalCount: 1, script: { command: [process.execPath, '-e', 'setTimeout(() => {}, 60_000)'], timeoutMs: 300 } });
    await waitFor(() => worker.worker!.genericJobs.includes('slow-script'), { message: 'the generic worker follows the job' });
    await admin.trigger('slow-script');
    const [record] = await recordsWhen('slow-script', (r) => r.length === 1, 'the script was stopped');
    expect(record).toMatchObject({ status: 'timeout', error: { message: expect.stringContaining('timed out after 300 ms') } });
  });

  it('a SCRIPT job: shell syntax in its item parameters reaches the program verbatim and does nothing', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'shardcron-script-'));
    try {
      mkdirSync(path.join(dir, 'x'));
      writeFileSync(path.join(dir, 'x', 'keep'), 'still here');
      const program = `require('node:fs').writeFileSync(require('node:path').join(${JSON.stringify(dir)}, 'out-' + JSON.parse(process.argv.at(-1)).shardingItem + '.json'), JSON.stringify({ argv: process.argv.slice(1), env: process.env.SHARDCRON_SHARDING_CONTEXT }))`;
      await leaderWorker('leader', []);
      const worker = await cluster.start({ roles: ['worker'], instanceId: 'generic', env: { SHARDCRON_WORKER_GENERIC: 'script' } });
      const parameters = [`; rm -rf ${dir}/x`, `$(touch ${dir}/y)`];
      await admin.createJob({
        name: 'inert',
        type: 'SCRIPT',
        shardingTotalCount: 2,
        shardingItemParameters: `0=${parameters[0]},1=${parameters[1]}`,
        script: { command: [process.execPath, '-e', program, 'first-arg'] },
      });
      await waitFor(() => worker.worker!.genericJobs.includes('inert'), { message: 'the generic worker follows the job' });
      await admin.trigger('inert');
      const records = await recordsWhen('inert', (r) => r.length === 2, 'both items ran');
      expect(records.map((r) => [r.status, r.exitCode])).toEqual([['completed', 0], ['completed', 0]]);
      for (const item of [0, 1]) {
        const out = JSON.parse(readFileSync(path.join(dir, `out-${item}.json`), 'utf8')) as { argv: string[]; env: string };
        expect(out.argv.slice(0, 1)).toEqual(['first-arg']);
        const context = JSON.parse(out.argv[1]) as { shardingItem: number; shardingParameter: string };
        expect(context).toMatchObject({ shardingItem: item, shardingParameter: parameters[item] });
        expect(out.env).toBe(out.argv[1]);
      }
      expect(readFileSync(path.join(dir, 'x', 'keep'), 'utf8')).toBe('still here');
      expect(existsSync(path.join(dir, 'y'))).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
