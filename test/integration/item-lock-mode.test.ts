/**
 * The namespace's item lock (`/.cluster/item-lock`): recorded by the first worker, followed by the
 * others, refused when a worker asks for the other one, and switched only while no worker runs;
 * and the jobs `startNode` takes from SHARDCRON_JOBS; against a real ZooKeeper and Redis.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { startNode } from '../../src/node';
import { defineJob } from '../../src/shared/config/job-definition';
import { ConfigError, ErrorCodes } from '../../src/shared/errors';
import { silentLogger } from '../../src/shared/logger';
import { readItemLockMode, setItemLockMode, settleItemLockMode } from '../../src/shared/registry/item-lock-mode';
import { registryPaths as paths } from '../../src/shared/registry/registry-paths';
import type { ZkClient } from '../../src/shared/zk';
import { closeServices, startRedis, startZooKeeper } from '../helpers/services';
import { closeZkClients, connectZk, uniqueNamespace } from '../helpers/zk';

let zkServer: ZooKeeperServer;
let redisServer: RedisServer;
let namespace: string;
let zk: ZkClient;

beforeAll(async () => {
  [zkServer, redisServer] = await Promise.all([startZooKeeper(), startRedis()]);
});
afterAll(async () => {
  await closeServices();
});
beforeEach(async () => {
  namespace = uniqueNamespace('item-lock');
  zk = await connectZk(zkServer.connectionString, { namespace });
});
afterEach(async () => {
  await closeZkClients();
});

/** A live instance of job `job`, as a worker of an earlier version (which records no lock) leaves it. */
async function olderWorker(job: string): Promise<ZkClient> {
  const other = await connectZk(zkServer.connectionString, { namespace });
  await other.ensurePath(paths.jobInstances(job));
  await other.create(paths.jobInstance(job, '10.0.0.9@-@1'), '{}', 'ephemeral');
  return other;
}

describe('settleItemLockMode', () => {
  it('records a lease in a new namespace, and every later worker follows it', async () => {
    expect(await settleItemLockMode(zk, undefined, silentLogger)).toBe('lease');
    expect(await zk.getText(paths.itemLock())).toBe('lease');
    expect(await settleItemLockMode(zk, undefined, silentLogger)).toBe('lease');
    expect(await settleItemLockMode(zk, 'lease', silentLogger)).toBe('lease');
  });

  it('refuses a worker that asks for the other lock, naming SHARDCRON_ITEM_LEASE', async () => {
    await settleItemLockMode(zk, undefined, silentLogger);
    const err = await settleItemLockMode(zk, 'per-run', silentLogger).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues[0].field).toBe('SHARDCRON_ITEM_LEASE');
    expect((err as ConfigError).message).toContain(`namespace ${namespace} uses the lease lock`);
    expect(await zk.getText(paths.itemLock())).toBe('lease');
  });

  it('records the lock a worker asks for in a new namespace', async () => {
    expect(await settleItemLockMode(zk, 'per-run', silentLogger)).toBe('per-run');
    expect(await settleItemLockMode(zk, undefined, silentLogger)).toBe('per-run');
  });

  it('records the per-run lock while a worker of an earlier version runs in the namespace', async () => {
    await zk.ensurePath(paths.jobConfig('quiet'));
    await olderWorker('billing');
    expect(await settleItemLockMode(zk, undefined, silentLogger)).toBe('per-run');
    expect(await zk.getText(paths.itemLock())).toBe('per-run');
  });

  it('two workers starting at once record one lock', async () => {
    const other = await connectZk(zkServer.connectionString, { namespace });
    const modes = await Promise.all([settleItemLockMode(zk, undefined, silentLogger), settleItemLockMode(other, 'lease', silentLogger)]);
    expect(modes).toEqual(['lease', 'lease']);
  });

  it('reports a corrupt record with its path instead of guessing', async () => {
    await zk.ensurePath(paths.clusterRoot());
    await zk.create(paths.itemLock(), 'sometimes');
    await expect(readItemLockMode(zk)).rejects.toMatchObject({ code: ErrorCodes.CORRUPT_DATA, message: expect.stringContaining('/.cluster/item-lock holds "sometimes"') });
    await expect(settleItemLockMode(zk, undefined, silentLogger)).rejects.toMatchObject({ code: ErrorCodes.CORRUPT_DATA });
  });
});

describe('setItemLockMode', () => {
  it('switches a namespace without live workers, and repairs a corrupt record', async () => {
    await settleItemLockMode(zk, undefined, silentLogger);
    expect(await setItemLockMode(zk, 'per-run')).toEqual({ previous: 'lease', mode: 'per-run' });
    expect(await readItemLockMode(zk)).toBe('per-run');
    await zk.set(paths.itemLock(), 'garbage');
    expect(await setItemLockMode(zk, 'lease')).toEqual({ previous: undefined, mode: 'lease' });
    expect(await readItemLockMode(zk)).toBe('lease');
  });

  it('refuses while a worker is live unless forced', async () => {
    await settleItemLockMode(zk, undefined, silentLogger);
    await olderWorker('billing');
    await expect(setItemLockMode(zk, 'per-run')).rejects.toMatchObject({ code: ErrorCodes.CONFLICT, message: expect.stringContaining('job billing has an instance') });
    expect(await readItemLockMode(zk)).toBe('lease');
    expect(await setItemLockMode(zk, 'per-run', true)).toEqual({ previous: 'lease', mode: 'per-run' });
  });
});

describe('startNode', () => {
  const jobs = [defineJob({ name: 'billing', cron: '0 0 0 1 1 ? 2099', execute: () => undefined })];
  const base = () => ({ zk: zkServer.connectionString, redisUrl: redisServer.url, namespace, roles: ['worker' as const], jobs, ip: '127.0.0.1', env: {}, logger: silentLogger });

  it('a worker follows the namespace, and one given the other lock does not start', async () => {
    const first = await startNode({ ...base(), instanceId: 'w1' });
    try {
      expect(await readItemLockMode(zk)).toBe('lease');
      const err = await startNode({ ...base(), instanceId: 'w2', env: { SHARDCRON_ITEM_LEASE: 'off' } }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).issues[0].field).toBe('SHARDCRON_ITEM_LEASE');
      // The refused worker registered nothing.
      expect(await zk.children(paths.instances())).toEqual([expect.stringMatching(/^w1/)]);
    } finally {
      await first.close();
    }
  });

  it('runs the jobs module SHARDCRON_JOBS names when given no jobs in code, as `shardcron start` does', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shardcron-node-jobs-'));
    const definitions = path.resolve(__dirname, '../../src/shared/config/job-definition');
    fs.writeFileSync(
      path.join(dir, 'jobs.cjs'),
      `const { defineJob } = require(${JSON.stringify(definitions)});\nmodule.exports = [defineJob({ name: 'from-module', cron: '0 0 0 1 1 ? 2099', execute: () => undefined })];\n`,
    );
    const { jobs: _given, ...options } = base();
    const node = await startNode({ ...options, instanceId: 'w3', env: { SHARDCRON_JOBS: path.join(dir, 'jobs.cjs') } });
    try {
      // Registered for it: its config was written at registration.
      expect(await zk.exists(paths.jobConfig('from-module'))).not.toBeNull();
      expect(await zk.exists(paths.jobConfig('billing'))).toBeNull();
    } finally {
      await node.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
