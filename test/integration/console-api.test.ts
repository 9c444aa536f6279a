/**
 * The console's HTTP API (DESIGN.md "Console contract") on a running cluster of real nodes against
 * real ZooKeeper and Redis: every route's valid call, bad input (400 naming every bad field),
 * unknown names (404), no or wrong token (401), the read-only token on a write (403), conflicts
 * (409), the browser's cookie login with its cross-site write guard, and Bull Board over the live
 * queues.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import type { ShardcronNode } from '../../src/node';
import { defineJob } from '../../src/shared/config/job-definition';
import { createRedisConnection } from '../../src/shared/redis/redis-connection';
import { recentExecutionsKey } from '../../src/shared/registry/redis-keys';
import { TestCluster } from '../helpers/cluster';
import { badFields, ConsoleClient } from '../helpers/console-client';
import { closeServices, eventually, startRedis, startZooKeeper, waitFor } from '../helpers/services';

const ADMIN = 'admin-token-0123456789abcdef';
const READ = 'read-token-0123456789abcdef';

let zk: ZooKeeperServer;
let redis: RedisServer;
let cluster: TestCluster;
let consoleNode: ShardcronNode;
let api: ConsoleClient;

const reports = defineJob({ name: 'reports', cron: '* * * * * ?', shardingTotalCount: 3, shardingItemParameters: '0=a,1=b,2=c', failover: true, execute: () => sleep(10) });
const onDemand = defineJob({ name: 'on-demand', shardingTotalCount: 2, execute: () => sleep(10) });
const scriptJob = (name: string) => ({ name, type: 'SCRIPT', shardingTotalCount: 1, script: { command: [process.execPath, '-e', 'process.exit(0)'] } });

beforeAll(async () => {
  [zk, redis] = await Promise.all([startZooKeeper(), startRedis()]);
  cluster = new TestCluster(zk, redis);
  for (const id of ['w1', 'w2']) await cluster.start({ roles: ['worker'], jobs: [reports, onDemand], instanceId: id });
  consoleNode = await cluster.start({ roles: ['scheduler', 'console'], instanceId: 'c1', ops: { host: '127.0.0.1', port: 0, token: ADMIN, readToken: READ } });
  api = new ConsoleClient(consoleNode.console!.url);
  await waitFor(() => consoleNode.leader!.isLeader, { message: 'the console node leads' });
});
afterAll(async () => {
  await cluster?.close();
  await closeServices();
});

describe('health and auth', () => {
  it('refuses to start on a non-loopback address without a token, naming SHARDCRON_OPS_TOKEN', async () => {
    const start = cluster.start({ roles: ['console'], instanceId: 'open-console', ops: { host: '0.0.0.0', port: 0 } });
    await expect(start).rejects.toMatchObject({ code: 'SHARDCRON_INVALID_CONFIG', issues: [expect.objectContaining({ field: 'SHARDCRON_OPS_TOKEN' })] });
  });

  it('/healthz and /readyz need no token; /readyz names ZooKeeper, Redis and the leader', async () => {
    expect(await api.get('/healthz')).toMatchObject({ status: 200, body: { status: 'ok' } });
    const ready = await eventually(async () => {
      const answer = await api.get('/readyz');
      expect(answer.body).toEqual({ zookeeper: 'ok', redis: 'ok', leader: 'c1' });
      return answer;
    });
    expect(ready.status).toBe(200);
  });

  it('no token and a wrong token are 401; both tokens read; the read-only token cannot write (403)', async () => {
    for (const path of ['/api/jobs', '/api/instances', '/metrics', '/api/jobs/reports']) {
      const none = await api.get(path);
      expect(none.status).toBe(401);
      expect(none.body.error.code).toBe('SHARDCRON_UNAUTHORIZED');
      expect((await api.get(path, { token: 'wrong-token-0123456789' })).status).toBe(401);
      expect((await api.get(path, { authorization: 'Basic abc' })).status).toBe(401);
      expect((await api.get(path, { token: READ })).status).toBe(200);
      expect((await api.get(path, { token: ADMIN })).status).toBe(200);
    }
    const writes: Array<[string, string, unknown?]> = [
      ['POST', '/api/jobs/on-demand/trigger'],
      ['POST', '/api/jobs/on-demand/disable'],
      ['POST', '/api/jobs/on-demand/enable'],
      ['POST', '/api/jobs/on-demand/sharding/0/disable'],
      ['POST', '/api/jobs/on-demand/sharding/0/enable'],
      ['POST', '/api/servers/127.0.0.1/disable'],
      ['POST', '/api/servers/127.0.0.1/enable'],
      ['PUT', '/api/jobs/on-demand/config', { description: 'x' }],
      ['POST', '/api/jobs', scriptJob('never-made')],
      ['DELETE', '/api/jobs/on-demand'],
    ];
    for (const [method, path, body] of writes) {
      const read = await api.call(method, path, { token: READ, ...(body !== undefined && { body }) });
      expect({ method, path, status: read.status, code: read.body.error?.code }).toEqual({ method, path, status: 403, code: 'SHARDCRON_FORBIDDEN' });
      expect((await api.call(method, path, { ...(body !== undefined && { body }) })).status).toBe(401);
      expect((await api.call(method, path, { token: 'wrong-token-0123456789', ...(body !== undefined && { body }) })).status).toBe(401);
    }
    expect((await api.get('/api/jobs/on-demand', { token: ADMIN })).body.config.disabled).toBe(false);
  });

  it('the browser logs in once: an HttpOnly SameSite=Strict cookie, writes only from the console\'s own pages', async () => {
    expect((await api.post('/login', { body: { token: 'nope-nope-nope-nope' } })).status).toBe(401);
    const login = await api.post('/login', { body: { token: ADMIN } });
    expect(login.status).toBe(200);
    const setCookie = login.headers.get('set-cookie')!;
    expect(setCookie).toMatch(/HttpOnly/i);
    expect(setCookie).toMatch(/SameSite=Strict/i);
    expect(setCookie).not.toContain(ADMIN);
    const cookie = setCookie.split(';')[0];
    expect((await api.get('/api/jobs', { cookie })).status).toBe(200);
    expect((await api.get('/api/session', { cookie })).body.role).toBe('admin');
    // A cross-site form post carries the cookie but neither our Origin nor the CSRF header.
    expect((await api.post('/api/jobs/on-demand/disable', { cookie })).status).toBe(403);
    expect((await api.post('/api/jobs/on-demand/disable', { cookie, headers: { origin: 'https://evil.example' } })).status).toBe(403);
    const own = await api.post('/api/jobs/on-demand/disable', { cookie, headers: { origin: api.baseUrl } });
    expect(own.status).toBe(200);
    expect((await api.post('/api/jobs/on-demand/enable', { cookie, headers: { 'x-shardcron-csrf': '1' } })).status).toBe(200);
    const readCookie = await api.login(READ);
    expect((await api.post('/api/jobs/on-demand/disable', { cookie: readCookie, headers: { 'x-shardcron-csrf': '1' } })).status).toBe(403);
    expect((await api.post('/logout', { cookie })).status).toBe(204);
    expect((await api.get('/api/jobs', { cookie })).status).toBe(401);
  });
});

describe('jobs', () => {
  it('GET /api/jobs lists every job with the contract fields', async () => {
    const { status, body } = await eventually(async () => {
      const answer = await api.get('/api/jobs', { token: READ });
      expect(answer.body.jobs.find((j: { name: string }) => j.name === 'reports').nextFireTime).toEqual(expect.any(Number));
      return answer;
    });
    expect(status).toBe(200);
    const names = body.jobs.map((j: { name: string }) => j.name);
    expect(names).toEqual(expect.arrayContaining(['on-demand', 'reports']));
    const job = body.jobs.find((j: { name: string }) => j.name === 'reports');
    expect(job).toMatchObject({ name: 'reports', type: 'SIMPLE', cron: '* * * * * ?', timeZone: 'UTC', shardingTotalCount: 3, status: 'OK', instances: 2 });
    expect(job).toHaveProperty('lastFireTime');
  });

  it('GET /api/jobs/:name: config and items; 404 for an unknown job, 400 for a name that cannot be one', async () => {
    const detail = await eventually(async () => {
      const answer = await api.get('/api/jobs/reports', { token: READ });
      expect(answer.body.items.every((i: { instanceId: string | null }) => i.instanceId !== null)).toBe(true);
      return answer;
    });
    expect(detail.status).toBe(200);
    expect(detail.body).toMatchObject({ name: 'reports', status: 'OK', config: { name: 'reports', shardingTotalCount: 3 } });
    expect(detail.body.items.map((i: { item: number; parameter: string }) => [i.item, i.parameter])).toEqual([[0, 'a'], [1, 'b'], [2, 'c']]);
    for (const item of detail.body.items) {
      expect(['RUNNING', 'PENDING']).toContain(item.status);
      expect(['w1', 'w2']).toContain(item.instanceId);
      expect(item.failover).toBe(false);
    }
    const unknown = await api.get('/api/jobs/nope', { token: READ });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('SHARDCRON_JOB_NOT_FOUND');
    const bad = await api.get('/api/jobs/.cluster', { token: READ });
    expect(bad.status).toBe(400);
    expect(badFields(bad)).toEqual(['name']);
  });

  it('GET /api/jobs/:name/executions: newest first, limit, item filter; bad query 400 naming each field; 404', async () => {
    const all = await eventually(async () => {
      const answer = await api.get('/api/jobs/reports/executions?limit=100', { token: READ });
      expect(answer.body.executions.length).toBeGreaterThanOrEqual(9);
      return answer;
    }, { timeoutMs: 15_000 });
    const finished = all.body.executions.map((x: { finishedAt: number }) => x.finishedAt);
    expect(finished).toEqual([...finished].sort((a, b) => b - a));
    expect(all.body.executions[0]).toMatchObject({ job: 'reports', source: 'NORMAL', status: 'completed', attempts: 1 });
    expect(Object.keys(all.body.executions[0])).toEqual(expect.arrayContaining(['job', 'item', 'fireTime', 'source', 'instanceId', 'status', 'attempts', 'startedAt', 'finishedAt', 'durationMs']));
    const limited = await api.get('/api/jobs/reports/executions?limit=2', { token: READ });
    expect(limited.body.executions).toHaveLength(2);
    const item1 = await api.get('/api/jobs/reports/executions?item=1&limit=5', { token: READ });
    expect(item1.body.executions.length).toBeGreaterThan(0);
    expect(item1.body.executions.every((x: { item: number }) => x.item === 1)).toBe(true);
    const bad = await api.get('/api/jobs/reports/executions?limit=0&item=x&color=red', { token: READ });
    expect(bad.status).toBe(400);
    expect(badFields(bad)).toEqual(expect.arrayContaining(['item', 'limit']));
    expect(bad.body.error.message).toMatch(/color/);
    expect((await api.get('/api/jobs/nope/executions', { token: READ })).status).toBe(404);
  });

  it('POST /api/jobs creates a SCRIPT job (201), 409 when the name exists, 400 naming every bad field', async () => {
    const created = await api.post('/api/jobs', { token: ADMIN, body: scriptJob('made-by-api') });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'made-by-api', config: { name: 'made-by-api', type: 'SCRIPT' } });
    await eventually(async () => expect((await api.get('/api/jobs/made-by-api', { token: READ })).status).toBe(200));
    const again = await api.post('/api/jobs', { token: ADMIN, body: scriptJob('made-by-api') });
    expect(again.status).toBe(409);
    const bad = await api.post('/api/jobs', { token: ADMIN, body: { name: 'bad job', type: 'SCRIPT', shardingTotalCount: 0, cron: 'every minute', colour: 1 } });
    expect(bad.status).toBe(400);
    expect(badFields(bad)).toEqual(expect.arrayContaining(['name', 'shardingTotalCount', 'cron', 'colour', 'script']));
    const notJson = await api.post('/api/jobs', { token: ADMIN, body: '{"name":' });
    expect(notJson.status).toBe(400);
    expect(notJson.body.error.code).toBe('SHARDCRON_BAD_REQUEST');
    const array = await api.post('/api/jobs', { token: ADMIN, body: [1, 2] });
    expect(array.status).toBe(400);
  });

  it('PUT /api/jobs/:name/config: 200 with the config; 400 naming every bad field; 404', async () => {
    const ok = await api.put('/api/jobs/on-demand/config', { token: ADMIN, body: { description: 'runs on demand', misfire: false } });
    expect(ok.status).toBe(200);
    expect(ok.body.config).toMatchObject({ name: 'on-demand', description: 'runs on demand', misfire: false });
    // And so reads the job right after (the read model caught up with the write before the answer).
    expect((await api.get('/api/jobs/on-demand', { token: READ })).body.config).toMatchObject({ description: 'runs on demand', misfire: false });
    // null takes a field away: a timeout set through the API can be removed through it.
    expect((await api.put('/api/jobs/on-demand/config', { token: ADMIN, body: { timeoutMs: 60_000 } })).body.config.timeoutMs).toBe(60_000);
    const cleared = await api.put('/api/jobs/on-demand/config', { token: ADMIN, body: { timeoutMs: null } });
    expect(cleared.status).toBe(200);
    expect(cleared.body.config).not.toHaveProperty('timeoutMs');
    const bad = await api.put('/api/jobs/on-demand/config', { token: ADMIN, body: { cron: 'not a cron', shardingTotalCount: -1, name: 'renamed', colour: 'red' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('SHARDCRON_INVALID_CONFIG');
    expect(badFields(bad)).toEqual(expect.arrayContaining(['cron', 'shardingTotalCount', 'name', 'colour']));
    const notObject = await api.put('/api/jobs/on-demand/config', { token: ADMIN, body: '"cron"' });
    expect(notObject.status).toBe(400);
    expect((await api.put('/api/jobs/nope/config', { token: ADMIN, body: { description: 'x' } })).status).toBe(404);
  });

  it('POST trigger: 202 and every enabled item runs once with source TRIGGER; a disabled job 409; 404', async () => {
    const answer = await api.post('/api/jobs/on-demand/trigger', { token: ADMIN });
    expect(answer.status).toBe(202);
    expect(answer.body.requestId).toEqual(expect.any(String));
    await waitFor(() => cluster.starts('on-demand').filter((s) => s.source === 'TRIGGER').length === 2, { message: 'two TRIGGER runs' });
    await eventually(async () => {
      const { body } = await api.get('/api/jobs/on-demand/executions', { token: READ });
      expect(body.executions.map((x: { item: number; source: string }) => `${x.item}:${x.source}`).sort()).toEqual(['0:TRIGGER', '1:TRIGGER']);
    });
    expect((await api.post('/api/jobs/on-demand/disable', { token: ADMIN })).status).toBe(200);
    const refused = await api.post('/api/jobs/on-demand/trigger', { token: ADMIN });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('SHARDCRON_JOB_DISABLED');
    expect((await api.post('/api/jobs/on-demand/enable', { token: ADMIN })).status).toBe(200);
    expect((await api.post('/api/jobs/nope/trigger', { token: ADMIN })).status).toBe(404);
  });

  it('POST disable/enable of a job: 200 with the job as written, and so reads the next GET; 404', async () => {
    // Read once first: the console's read model then watches the job, and answers from it.
    expect((await api.get('/api/jobs/on-demand', { token: READ })).body.status).not.toBe('DISABLED');
    for (let round = 0; round < 3; round++) {
      const disabled = await api.post('/api/jobs/on-demand/disable', { token: ADMIN });
      expect(disabled.status).toBe(200);
      // The answer and the next read show the write, not the model before the watch caught up.
      expect(disabled.body).toMatchObject({ status: 'DISABLED', config: { disabled: true } });
      expect((await api.get('/api/jobs/on-demand', { token: READ })).body.status).toBe('DISABLED');
      const enabled = await api.post('/api/jobs/on-demand/enable', { token: ADMIN });
      expect(enabled.status).toBe(200);
      expect(enabled.body.status).not.toBe('DISABLED');
      expect(enabled.body.config.disabled).toBe(false);
      expect((await api.get('/api/jobs/on-demand', { token: READ })).body.status).not.toBe('DISABLED');
    }
    for (const action of ['disable', 'enable']) expect((await api.post(`/api/jobs/nope/${action}`, { token: ADMIN })).status).toBe(404);
  });

  it('POST sharding/:item/disable|enable: 200, the item shows DISABLED; unknown item 404; bad item 400', async () => {
    // The items are watched once the job's detail was read; a read right after a switch shows it.
    // A job that never fires by itself: an item of `reports` may show RUNNING, which goes before DISABLED.
    expect((await api.get('/api/jobs/on-demand', { token: READ })).body.items[1].status).not.toBe('DISABLED');
    for (let round = 0; round < 3; round++) {
      const disabled = await api.post('/api/jobs/on-demand/sharding/1/disable', { token: ADMIN });
      expect([disabled.status, disabled.body]).toEqual([200, { changed: true }]);
      expect((await api.get('/api/jobs/on-demand', { token: READ })).body.items[1].status).toBe('DISABLED');
      const enabled = await api.post('/api/jobs/on-demand/sharding/1/enable', { token: ADMIN });
      expect([enabled.status, enabled.body]).toEqual([200, { changed: true }]);
      expect((await api.get('/api/jobs/on-demand', { token: READ })).body.items[1].status).not.toBe('DISABLED');
    }
    // Enabling an enabled item changes nothing, and says so.
    expect((await api.post('/api/jobs/on-demand/sharding/1/enable', { token: ADMIN })).body).toEqual({ changed: false });
    const unknown = await api.post('/api/jobs/reports/sharding/7/disable', { token: ADMIN });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('SHARDCRON_NOT_FOUND');
    // However large: an item the job does not have is unknown, not a bad request.
    expect((await api.post('/api/jobs/reports/sharding/123456/disable', { token: ADMIN })).status).toBe(404);
    expect((await api.post('/api/jobs/nope/sharding/0/disable', { token: ADMIN })).status).toBe(404);
    const bad = await api.post('/api/jobs/reports/sharding/x/disable', { token: ADMIN });
    expect(bad.status).toBe(400);
    expect(badFields(bad)).toEqual(['item']);
  });

  it('POST /api/servers/:ip/disable|enable: 200 for an IP the jobs have, 404 for one they do not', async () => {
    const disabled = await api.post('/api/servers/127.0.0.1/disable', { token: ADMIN });
    expect(disabled.status).toBe(200);
    const enabled = await api.post('/api/servers/127.0.0.1/enable', { token: ADMIN });
    expect(enabled.status).toBe(200);
    const unknown = await api.post('/api/servers/10.9.9.9/disable', { token: ADMIN });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('SHARDCRON_NOT_FOUND');
    expect((await api.post('/api/servers/a%20b/disable', { token: ADMIN })).status).toBe(400);
  });

  it('GET /api/instances lists the live workers with their queues and jobs', async () => {
    const { status, body } = await api.get('/api/instances', { token: READ });
    expect(status).toBe(200);
    expect(body.instances.map((i: { instanceId: string }) => i.instanceId)).toEqual(['w1', 'w2']);
    for (const instance of body.instances) {
      expect(instance).toMatchObject({ ip: '127.0.0.1', pid: process.pid, state: 'ready', jobs: expect.arrayContaining(['on-demand', 'reports']) });
      expect(instance.queue).toEqual(expect.any(String));
    }
  });

  it('DELETE /api/jobs/:name: 204, then the job is gone (404), its recent executions too; 404 for an unknown job', async () => {
    const redisClient = createRedisConnection(redis.url);
    const executions = recentExecutionsKey(cluster.namespace, 'made-by-api');
    try {
      await redisClient.lpush(executions, JSON.stringify({ job: 'made-by-api' }));
      expect((await api.delete('/api/jobs/made-by-api', { token: ADMIN })).status).toBe(204);
      // A job added again under the name does not show the removed one's executions.
      expect(await redisClient.exists(executions)).toBe(0);
    } finally {
      redisClient.disconnect();
    }
    await eventually(async () => expect((await api.get('/api/jobs/made-by-api', { token: READ })).status).toBe(404));
    expect((await api.delete('/api/jobs/made-by-api', { token: ADMIN })).status).toBe(404);
  });

  it('a job whose stored config cannot be read answers 500 SHARDCRON_CORRUPT_DATA naming what is wrong, not 400', async () => {
    // Found in review: the request was blamed (400 with the stored config's fields), or the message hidden (500 "internal error").
    const { zk: client } = consoleNode;
    await client.ensurePath('/broken');
    await client.create('/broken/config', '{"name": "broken", not json');
    try {
      await eventually(async () => {
        const read = await api.get('/api/jobs/broken', { token: READ });
        expect(read.status).toBe(500);
        expect(read.body.error.code).toBe('SHARDCRON_CORRUPT_DATA');
        expect(read.body.error.message).toContain('/broken/config');
      });
      const write = await api.post('/api/jobs/broken/disable', { token: ADMIN });
      expect(write.status).toBe(500);
      expect(write.body.error.code).toBe('SHARDCRON_CORRUPT_DATA');
    } finally {
      await client.delete('/broken/config');
      await client.delete('/broken');
    }
  });

  it('an unknown route is 404 in the contract\'s error shape', async () => {
    const answer = await api.get('/api/nothing', { token: READ });
    expect(answer.status).toBe(404);
    expect(answer.body.error.code).toBe('SHARDCRON_NOT_FOUND');
  });
});

describe('Bull Board and the dashboard', () => {
  it('/queues shows every live instance queue; the read-only token cannot act there', async () => {
    const { body: instances } = await api.get('/api/instances', { token: READ });
    const queues = instances.instances.map((i: { queue: string }) => i.queue).sort();
    const board = await eventually(async () => {
      const answer = await api.get('/queues/api/queues', { token: READ });
      expect(answer.status).toBe(200);
      expect(answer.body.queues.map((q: { name: string }) => q.name).sort()).toEqual(queues);
      return answer;
    });
    expect(board.body.queues).toHaveLength(2);
    expect((await api.get('/queues', { token: READ })).status).toBe(200);
    // A browser without a session is sent to the login; any other client gets the contract's 401.
    const page = await api.get('/queues', { headers: { accept: 'text/html,application/xhtml+xml' } });
    expect(page.status).toBe(302);
    expect(page.headers.get('location')).toMatch(/^\/\?login=1&next=/);
    const unauthorized = await api.get('/queues', { headers: { accept: '*/*' } });
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.body.error.code).toBe('SHARDCRON_UNAUTHORIZED');
    const act = await api.put(`/queues/api/queues/${encodeURIComponent(queues[0])}/pause`, { token: READ });
    expect(act.status).toBe(403);
  });

  it('/ serves the dashboard page to a browser without a token, framed by nobody; other clients need one', async () => {
    const page = await api.get('/', { headers: { accept: 'text/html,application/xhtml+xml' } });
    expect(page.status).toBe(200);
    expect(page.text).toContain('<title>shardcron</title>');
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect((await api.get('/dashboard/app.js')).status).toBe(200);
    expect((await api.get('/dashboard/nope.js')).status).toBe(404);
    expect((await api.get('/', { headers: { accept: '*/*' } })).status).toBe(401);
    expect((await api.get('/', { token: READ, headers: { accept: '*/*' } })).status).toBe(200);
  });
});
