/**
 * `shardcron start` and `shardcron ping` as a user runs them: `node bin/shardcron.js ...` as a child
 * process, configured only by SHARDCRON_* variables, against a real ZooKeeper and Redis.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { getFreePort } from '../../src/dev/free-port';
import { closeServices, isProcessAlive, startRedis, startZooKeeper, waitFor } from '../helpers/services';
import { uniqueNamespace } from '../helpers/zk';
import { cliExitCode, cliPids, killCliRuns, runCli } from '../helpers/cli-process';

const ROOT = path.resolve(__dirname, '../..');

let zk: ZooKeeperServer;
let redis: RedisServer;
let dir: string;

const run = (args: string[], env: Record<string, string>) => runCli(args, env);
const exitCode = cliExitCode;

function nodeEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    SHARDCRON_ZK: zk.connectionString,
    SHARDCRON_REDIS_URL: redis.url,
    SHARDCRON_NAMESPACE: uniqueNamespace('cli'),
    SHARDCRON_ROLES: 'scheduler,worker',
    SHARDCRON_JOBS: path.join(dir, 'jobs.ts'),
    SHARDCRON_INSTANCE_ID: 'cli-1',
    SHARDCRON_ZK_SESSION_TIMEOUT_MS: '2000',
    ...extra,
  };
}

beforeAll(async () => {
  [zk, redis] = await Promise.all([startZooKeeper(), startRedis()]);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shardcron-cli-start-'));
  const src = JSON.stringify(path.join(ROOT, 'src'));
  fs.writeFileSync(
    path.join(dir, 'jobs.ts'),
    `import { setTimeout as sleep } from 'node:timers/promises';
import { defineJob } from ${src};
export default [
  defineJob({ name: 'tick', cron: '* * * * * ?', shardingTotalCount: 2, shardingItemParameters: '0=x,1=y', execute: () => sleep(5) }),
];
`,
  );
  fs.writeFileSync(
    path.join(dir, 'slow.ts'),
    `import { defineJob } from ${src};
export default [defineJob({ name: 'slow', cron: '* * * * * ?', execute: () => new Promise((resolve) => setTimeout(resolve, 60_000)) })];
`,
  );
  fs.writeFileSync(path.join(dir, 'not-jobs.js'), 'module.exports = [{ name: "raw" }];\n');
});

afterEach(killCliRuns);

afterAll(async () => {
  fs.rmSync(dir, { recursive: true, force: true });
  await closeServices();
});

describe('shardcron start', () => {
  it('runs the jobs module, logs each execution as a JSON line, and exits 0 on SIGTERM', async () => {
    const r = run(['start'], nodeEnv());
    const finished = await waitFor(() => r.json().find((l) => l.msg === 'item finished' && l.status === 'completed'), {
      timeoutMs: 30_000,
      message: `an "item finished" line; stdout so far:\n${r.stdout.slice(-20).join('\n')}\nstderr:\n${r.stderr.join('\n')}`,
    });
    expect(finished).toMatchObject({ level: 30, job: 'tick', instanceId: 'cli-1', source: 'NORMAL', status: 'completed', shardingTotalCount: 2 });
    expect([0, 1]).toContain(finished.item);
    expect(finished.shardingParameter).toBe(finished.item === 0 ? 'x' : 'y');
    expect(typeof finished.fireTime).toBe('number');
    expect((finished.fireTime as number) % 1000).toBe(0);
    expect(finished.durationMs).toEqual(expect.any(Number));
    expect(finished.durationMs as number).toBeGreaterThanOrEqual(4);
    expect(r.json().some((l) => l.msg === 'leadership acquired' && l.instanceId === 'cli-1')).toBe(true);
    // Starts are logged at debug only.
    expect(r.json().some((l) => l.msg === 'item started')).toBe(false);

    r.child.kill('SIGTERM');
    expect(await exitCode(r, 10_000)).toBe(0);
    const messages = r.json().map((l) => l.msg);
    expect(messages).toContain('shutting down');
    expect(messages).toContain('node closed');
    expect(r.stderr.join('\n').trim()).toBe('');
  });

  it('logs starts at debug level, and a second signal forces exit 1 while an execution still runs', async () => {
    const r = run(['start'], nodeEnv({ SHARDCRON_JOBS: path.join(dir, 'slow.ts'), SHARDCRON_LOG_LEVEL: 'debug' }));
    const started = await waitFor(() => r.json().find((l) => l.msg === 'item started'), { timeoutMs: 30_000, message: 'an "item started" line' });
    expect(started).toMatchObject({ level: 20, job: 'slow', item: 0, instanceId: 'cli-1', source: 'NORMAL' });
    r.child.kill('SIGTERM');
    await waitFor(() => r.json().some((l) => l.msg === 'shutting down'), { message: 'shutting down' });
    r.child.kill('SIGTERM');
    expect(await exitCode(r, 5_000)).toBe(1);
    expect(r.json().some((l) => l.msg === 'second signal: exiting at once, without a clean shutdown')).toBe(true);
  });

  it('exits 2 and names every bad variable when the environment is invalid', async () => {
    const r = run(['start'], { SHARDCRON_ZK: 'zk-without-port', SHARDCRON_ROLES: 'scheduler,wroker', SHARDCRON_CONCURENCY: '4' });
    expect(await exitCode(r, 15_000)).toBe(2);
    const stderr = r.stderr.join('\n');
    expect(stderr).toContain('Invalid shardcron environment');
    for (const name of ['SHARDCRON_ZK', 'SHARDCRON_ROLES', 'SHARDCRON_CONCURENCY']) expect(stderr).toContain(`- ${name}:`);
    expect(stderr).toContain('did you mean worker?');
    expect(r.stdout.join('')).toBe('');
  });

  it('exits 2 naming SHARDCRON_JOBS and the bad element when the jobs module is invalid', async () => {
    const r = run(['start'], nodeEnv({ SHARDCRON_JOBS: path.join(dir, 'not-jobs.js') }));
    expect(await exitCode(r, 15_000)).toBe(2);
    const stderr = r.stderr.join('\n');
    expect(stderr).toContain(`SHARDCRON_JOBS=${path.join(dir, 'not-jobs.js')}`);
    expect(stderr).toMatch(/SHARDCRON_JOBS\[0\]: expected the result of defineJob/);
  });

  it('exits 1 when ZooKeeper cannot be reached', async () => {
    const port = await getFreePort();
    const r = run(['start'], nodeEnv({ SHARDCRON_ZK: `127.0.0.1:${port}`, SHARDCRON_ZK_CONNECT_TIMEOUT_MS: '300', SHARDCRON_ZK_MAX_RETRIES: '0' }));
    expect(await exitCode(r, 15_000)).toBe(1);
    expect(r.json().find((l) => l.msg === 'could not start the node')).toMatchObject({ level: 60 });
  });
});

describe('shardcron ping', () => {
  it('exits 0 when ZooKeeper and Redis answer', async () => {
    const r = run(['ping'], nodeEnv());
    expect(await exitCode(r, 15_000)).toBe(0);
    expect(r.stdout.join('\n')).toMatch(new RegExp(`zookeeper ${zk.connectionString}: ok \\(\\d+ ms\\)\\nredis ${redis.url}/?: ok`));
  });

  it('exits 1 and says which server failed', async () => {
    const port = await getFreePort();
    const r = run(['ping'], nodeEnv({ SHARDCRON_ZK: `127.0.0.1:${port}`, SHARDCRON_ZK_CONNECT_TIMEOUT_MS: '1000' }));
    expect(await exitCode(r, 15_000)).toBe(1);
    expect(r.stderr.join('\n')).toContain(`zookeeper 127.0.0.1:${port}: FAILED: no answer within 1000 ms (nothing listens there: is ZooKeeper running?)`);
    expect(r.stdout.join('\n')).toMatch(/redis .*: ok/);

    const noRedis = run(['ping'], nodeEnv({ SHARDCRON_REDIS_URL: `redis://127.0.0.1:${port}` }));
    expect(await exitCode(noRedis, 15_000)).toBe(1);
    expect(noRedis.stderr.join('\n')).toContain(`redis redis://127.0.0.1:${port}: FAILED: connect ECONNREFUSED`);
  });

  it('exits 2 on an invalid environment', async () => {
    const r = run(['ping'], { SHARDCRON_ZK_CONNECT_TIMEOUT_MS: 'soon' });
    expect(await exitCode(r, 15_000)).toBe(2);
    expect(r.stderr.join('\n')).toContain('- SHARDCRON_ZK_CONNECT_TIMEOUT_MS:');
  });
});

it('leaves no child process behind', () => {
  expect(cliPids.length).toBeGreaterThan(5);
  expect(cliPids.filter(isProcessAlive)).toEqual([]);
});
