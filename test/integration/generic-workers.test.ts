/**
 * Jobs defined by data as an operator runs them: `shardcron start` processes only, configured by
 * SHARDCRON_* variables, with no jobs module anywhere. A console and scheduler node takes
 * `POST /api/jobs`; two generic workers (SHARDCRON_WORKER_GENERIC=script,http) run the job, an update
 * through the API takes effect at the next fire, and a removal stops it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { getFreePort } from '../../src/dev/free-port';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { killCliRuns, runCli } from '../helpers/cli-process';
import { badFields, ConsoleClient } from '../helpers/console-client';
import { closeServices, startRedis, startZooKeeper, waitFor } from '../helpers/services';
import { uniqueNamespace } from '../helpers/zk';

const TOKEN = 'generic-workers-test-token-0123456789';
let zk: ZooKeeperServer;
let redis: RedisServer;
let server: Server;
let site: string;
/** Every request the site got: path, and the item and instance of its shardingContext. */
const hits: Array<{ path: string; item: number; instanceId: string; at: number }> = [];

beforeAll(async () => {
  [zk, redis] = await Promise.all([startZooKeeper(), startRedis()]);
  server = createServer((req, res) => {
    const context = JSON.parse(String(req.headers.shardingcontext)) as { shardingItem: number; instanceId: string };
    hits.push({ path: req.url!, item: context.shardingItem, instanceId: context.instanceId, at: Date.now() });
    res.writeHead(200).end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  site = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterEach(killCliRuns);
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await closeServices();
});

describe('generic workers with no jobs module', () => {
  it('run a job created by POST /api/jobs; an update takes effect at the next fire; DELETE stops it', async () => {
    const namespace = uniqueNamespace('generic');
    const base = { SHARDCRON_ZK: zk.connectionString, SHARDCRON_REDIS_URL: redis.url, SHARDCRON_NAMESPACE: namespace, SHARDCRON_ZK_SESSION_TIMEOUT_MS: '2000' };
    const port = await getFreePort();
    const ops = runCli(['start'], { ...base, SHARDCRON_ROLES: 'scheduler,console', SHARDCRON_INSTANCE_ID: 'ops', SHARDCRON_OPS_PORT: String(port), SHARDCRON_OPS_TOKEN: TOKEN });
    for (const id of ['g1', 'g2']) runCli(['start'], { ...base, SHARDCRON_ROLES: 'worker', SHARDCRON_INSTANCE_ID: id, SHARDCRON_WORKER_GENERIC: 'script,http' });
    const api = new ConsoleClient(`http://127.0.0.1:${port}`);
    let readiness = '';
    await waitFor(
      async () => {
        const answer = await api.get('/readyz').catch((err: Error) => ({ status: 0, text: err.message }));
        readiness = `${answer.status} ${answer.text}`;
        if (answer.status !== 200) throw new Error(`last /readyz: ${readiness}; stdout: ${ops.stdout.slice(-15).join('\n')}; stderr: ${ops.stderr.join('\n')}`);
        return true;
      },
      { timeoutMs: 30_000, message: 'the console ready' },
    );

    // What no generic worker can run is refused, naming the field; then the job is created once.
    const simple = await api.post('/api/jobs', { token: TOKEN, body: { name: 'pinger', type: 'SIMPLE', cron: '* * * * * ?' } });
    expect(simple.status).toBe(400);
    expect(badFields(simple)).toEqual(['type']);
    const body = { name: 'pinger', type: 'HTTP', cron: '* * * * * ?', shardingTotalCount: 4, http: { url: `${site}/first` } };
    const created = await api.post('/api/jobs', { token: TOKEN, body });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'pinger', config: { type: 'HTTP', shardingTotalCount: 4 } });
    expect((await api.post('/api/jobs', { token: TOKEN, body })).status).toBe(409);

    // Both workers register for it and share its four items.
    // Both conditions are waited for: the first call of the second worker can come before one of
    // the fire's four calls has (failed once in a clean-clone CI run with items 0-2 seen).
    await waitFor(() => new Set(hits.filter((h) => h.path === '/first').map((h) => h.instanceId)).size === 2 && new Set(hits.map((h) => h.item)).size === 4, {
      timeoutMs: 15_000,
      message: 'both generic workers call the site, for all four items',
    });
    expect(new Set(hits.map((h) => h.item))).toEqual(new Set([0, 1, 2, 3]));
    const instances = await api.get('/api/instances', { token: TOKEN });
    const byId = Object.fromEntries((instances.body.instances as Array<{ instanceId: string; jobs: string[] }>).map((i) => [i.instanceId, i.jobs]));
    expect(byId).toMatchObject({ g1: ['pinger'], g2: ['pinger'] });
    const executions = await waitFor(async () => {
      const answer = await api.get('/api/jobs/pinger/executions?limit=20', { token: TOKEN });
      return answer.body.executions?.length >= 4 ? answer.body.executions : undefined;
    }, { message: 'executions recorded' });
    for (const record of executions) expect(record).toMatchObject({ job: 'pinger', status: 'completed', httpStatus: 200 });

    // An update reaches the next fire.
    const updated = await api.put('/api/jobs/pinger/config', { token: TOKEN, body: { http: { url: `${site}/second` } } });
    expect(updated.status).toBe(200);
    const updatedAt = Date.now();
    await waitFor(() => hits.some((h) => h.path === '/second'), { message: 'the new URL called' });
    expect(hits.find((h) => h.path === '/second')!.at - updatedAt).toBeLessThan(3_000);

    // A removal stops it on both workers.
    expect((await api.delete('/api/jobs/pinger', { token: TOKEN })).status).toBe(204);
    await waitFor(async () => {
      const answer = await api.get('/api/instances', { token: TOKEN });
      return (answer.body.instances as Array<{ jobs: string[] }>).every((i) => !i.jobs.includes('pinger'));
    }, { message: 'the workers let the job go' });
    await sleep(500);
    const calls = hits.length;
    await sleep(2_500);
    expect(hits.length).toBe(calls);
    expect((await api.get('/api/jobs/pinger', { token: TOKEN })).status).toBe(404);
  });
});
