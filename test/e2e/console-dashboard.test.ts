/**
 * The dashboard in a real browser (playwright-core driving Debian's chromium) on a running cluster
 * of real processes: log in with the token, see the jobs and the live shard map, trigger a job and
 * see its executions appear, disable and enable it, edit its config and see the API's validation
 * messages, kill a worker and see it leave and its items move, and Bull Board at /queues showing the
 * live queues. Screenshots go to test-artifacts/ (not committed).
 */
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import type { ShardcronNode } from '../../src/node';
import { TestCluster } from '../helpers/cluster';
import { ProcessCluster, type JobSpec } from '../helpers/process-cluster';
import { closeServices, eventually, startRedis, startZooKeeper } from '../helpers/services';

const CHROMIUM = process.env.SHARDCRON_CHROMIUM ?? '/usr/bin/chromium';
const ARTIFACTS = path.resolve(__dirname, '..', '..', 'test-artifacts');
const TOKEN = 'e2e-admin-token-0123456789';
const SPEC: JobSpec = { name: 'live', cron: '* * * * * ?', shardingTotalCount: 4, failover: true, sleepMs: 200 };

let zk: ZooKeeperServer;
let redis: RedisServer;
let processes: ProcessCluster;
let cluster: TestCluster;
let node: ShardcronNode;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: apt-get install -y chromium (or set SHARDCRON_CHROMIUM)`);
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  [zk, redis] = await Promise.all([startZooKeeper(), startRedis()]);
  processes = new ProcessCluster({ zk: zk.connectionString, redisUrl: redis.url, sessionTimeoutMs: 2_000 });
  cluster = new TestCluster(zk, redis, processes.namespace);
  await Promise.all(['p1', 'p2'].map((name) => processes.start(name, 'worker', [SPEC])));
  node = await cluster.start({ roles: ['scheduler', 'console'], instanceId: 'c1', ops: { host: '127.0.0.1', port: 0, token: TOKEN } });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-background-networking', '--disable-dev-shm-usage', '--disable-gpu'] });
  page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.setDefaultTimeout(15_000);
});
afterAll(async () => {
  await browser?.close();
  await processes?.close();
  await cluster?.close();
  await closeServices();
});

const shards = () => page.locator('#shards .shard');
const shardInstances = async () => (await shards().evaluateAll((els) => els.map((e) => e.getAttribute('data-instance')))).sort();

describe('the dashboard', () => {
  it('logs in with the token (a wrong one is refused) and lists the jobs and instances', async () => {
    await page.goto(node.console!.url);
    await page.locator('#login-form').waitFor();
    expect(await page.locator('#app').isVisible()).toBe(false);
    await page.fill('#login-token', 'not-the-token-0123456789');
    await page.click('#login-form button[type=submit]');
    await page.locator('#login-error', { hasText: 'unknown token' }).waitFor();
    await page.fill('#login-token', TOKEN);
    await page.click('#login-form button[type=submit]');
    await page.locator('#app').waitFor();
    expect(await page.locator('#login').isVisible()).toBe(false);
    await page.locator('#role', { hasText: 'admin' }).waitFor();
    await page.locator('#jobs tr[data-job="live"]').waitFor();
    await page.locator('#instances tr[data-instance="p1"]').waitFor();
    await page.locator('#instances tr[data-instance="p2"]').waitFor();
    // The token is not kept where page scripts can read it: the session is an HttpOnly cookie.
    expect(await page.evaluate('document.cookie')).toBe('');
    const cookies = await page.context().cookies();
    expect(cookies.find((c) => c.name === 'shardcron_session')).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
  });

  it('shows the live shard map of a job', async () => {
    await page.click('#jobs tr[data-job="live"] a');
    await page.locator('#job-name', { hasText: 'live' }).waitFor();
    await eventually(async () => expect(new Set(await shardInstances())).toEqual(new Set(['p1', 'p2'])), { timeoutMs: 15_000 });
    expect(await shards().count()).toBe(4);
    await page.locator('#executions tbody tr').first().waitFor();
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-shard-map.png'), fullPage: true });
  });

  it('triggers the job and shows its TRIGGER executions', async () => {
    await page.click('#job-trigger');
    await page.locator('#notice', { hasText: /triggered \(request / }).waitFor();
    await page.locator('#executions tbody tr', { hasText: 'TRIGGER' }).first().waitFor();
  });

  it('disables and enables the job', async () => {
    await page.locator('#job-toggle', { hasText: 'Disable job' }).click();
    await page.locator('#job-status', { hasText: 'DISABLED' }).waitFor();
    await page.locator('#jobs tr[data-job="live"] .badge', { hasText: 'DISABLED' }).waitFor();
    await page.locator('#job-toggle', { hasText: 'Enable job' }).click();
    await page.locator('#job-status', { hasText: /^(OK|SHARDING_FLAG)$/ }).waitFor();
  });

  it('edits the config: the API\'s validation messages are shown by field, a valid change is saved', async () => {
    await page.click('#job-edit');
    await page.fill('#config-text', JSON.stringify({ cron: 'every second', shardingTotalCount: 0 }));
    await page.click('#config-form button[type=submit]');
    await page.locator('#config-errors li[data-field="cron"]').waitFor();
    await page.locator('#config-errors li[data-field="shardingTotalCount"]').waitFor();
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-config-errors.png'), fullPage: true });
    await page.fill('#config-text', JSON.stringify({ description: 'edited in the browser' }));
    await page.click('#config-form button[type=submit]');
    await page.locator('#notice', { hasText: 'config saved' }).waitFor();
    await eventually(async () => expect(await page.inputValue('#config-text')).toContain('edited in the browser'));
  });

  it('saves only the fields changed in the editor: another operator\'s disable meanwhile stays', async () => {
    const call = (method: string, route: string) => fetch(`${node.console!.url}${route}`, { method, headers: { authorization: `Bearer ${TOKEN}` } });
    await page.click('#job-edit');
    const shown = JSON.parse(await page.inputValue('#config-text')) as { disabled: boolean; description?: string };
    expect(shown.disabled).toBe(false);
    // Another operator disables the job while the editor holds the config from before.
    expect((await call('POST', '/api/jobs/live/disable')).status).toBe(200);
    await page.fill('#config-text', JSON.stringify({ ...shown, description: 'edited beside a disable' }, null, 2));
    await page.click('#config-form button[type=submit]');
    await page.locator('#notice', { hasText: 'config saved' }).waitFor();
    await eventually(async () => {
      const { config } = (await (await call('GET', '/api/jobs/live')).json()) as { config: { disabled: boolean; description: string } };
      expect(config).toMatchObject({ disabled: true, description: 'edited beside a disable' });
    });
    expect((await call('POST', '/api/jobs/live/enable')).status).toBe(200);
    await page.locator('#job-status', { hasText: /^(OK|SHARDING_FLAG)$/ }).waitFor();
  });

  it('a killed worker leaves the instances and its items move to the survivor', async () => {
    processes.signal('p2', 'SIGKILL');
    await page.locator('#instances tr[data-instance="p2"]').waitFor({ state: 'detached', timeout: 15_000 });
    await eventually(async () => expect(new Set(await shardInstances())).toEqual(new Set(['p1'])), { timeoutMs: 15_000 });
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-after-kill.png'), fullPage: true });
  });

  it('Bull Board at /queues shows the live instance queues with the same session', async () => {
    const queue = (await (await fetch(`${node.console!.url}/api/instances`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as { instances: Array<{ queue: string }> };
    expect(queue.instances).toHaveLength(1);
    await page.goto(`${node.console!.url}/queues`);
    await page.getByText(queue.instances[0].queue).first().click();
    // The queue's own page: its name in the header and its job states, once Bull Board has loaded them.
    await page.getByText('Loading...').waitFor({ state: 'detached' });
    await page.getByText(/completed/i).first().waitFor();
    await page.screenshot({ path: path.join(ARTIFACTS, 'bull-board.png'), fullPage: true });
  });
});
