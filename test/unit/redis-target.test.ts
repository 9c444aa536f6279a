import { Cluster } from 'ioredis';
import { RecentEnqueues, RECONCILE_WINDOW_MS } from '../../src/leader/redis-reconcile';
import { loadEnvConfig } from '../../src/shared/config/env-config';
import { ConfigError } from '../../src/shared/errors';
import { createRedisClient } from '../../src/shared/redis/redis-connection';
import { describeRedisTarget, redisTarget, redisTopology, redisUrlParts } from '../../src/shared/redis/redis-target';
import type { ExecutionRequest } from '../../src/shared/registry/execution-request';
import { namespaceKeyPrefix, queueMetaKeys, queuePrefix, QUEUE_PREFIX } from '../../src/shared/registry/queue-names';

const SENTINEL_ENV = {
  SHARDCRON_REDIS_URL: 'rediss://app:s%40cret@ignored:6379/2',
  SHARDCRON_REDIS_SENTINELS: 's1:26379,s2:26379,[::1]:26380',
  SHARDCRON_REDIS_SENTINEL_NAME: 'mymaster',
};
const CLUSTER_ENV = { SHARDCRON_REDIS_URL: 'redis://:pw@ignored', SHARDCRON_REDIS_CLUSTER_NODES: 'r1:7000,r2:7001' };

describe('redisTarget', () => {
  it('builds the target of each topology from the environment', () => {
    expect(redisTarget(loadEnvConfig({}))).toEqual({ url: 'redis://127.0.0.1:6379' });
    const sentinel = redisTarget(loadEnvConfig(SENTINEL_ENV));
    expect(redisTopology(sentinel)).toBe('sentinel');
    expect(sentinel.sentinel).toEqual({ name: 'mymaster', sentinels: [{ host: 's1', port: 26379 }, { host: 's2', port: 26379 }, { host: '::1', port: 26380 }] });
    const cluster = redisTarget(loadEnvConfig(CLUSTER_ENV));
    expect(redisTopology(cluster)).toBe('cluster');
    expect(describeRedisTarget(cluster)).toBe('Redis Cluster r1:7000,r2:7001');
    expect(describeRedisTarget(sentinel)).toBe('Sentinel primary mymaster via s1:26379,s2:26379,[::1]:26380');
    expect(describeRedisTarget({ url: 'redis://u:secret@h:1/3' })).toBe('redis://u:***@h:1/3');
  });

  it("takes user, password, TLS and database from the URL, and refuses a database with a Cluster, naming the field", () => {
    expect(redisUrlParts(redisTarget(loadEnvConfig(SENTINEL_ENV)))).toEqual({ username: 'app', password: 's@cret', tls: true, db: 2 });
    expect(redisUrlParts({ url: 'redis://h' })).toEqual({ tls: false, db: 0 });
    const bad = () => redisUrlParts({ url: 'redis://h/4', clusterNodes: [{ host: 'r1', port: 7000 }] });
    expect(bad).toThrow(ConfigError);
    expect(bad).toThrow(expect.objectContaining({ issues: [expect.objectContaining({ field: 'SHARDCRON_REDIS_URL', message: expect.stringContaining('database 0 only') })] }));
  });
});

describe('createRedisClient', () => {
  it('Sentinel: the Sentinels, the name and the URL\'s credentials, with what BullMQ needs', () => {
    const client = createRedisClient(redisTarget(loadEnvConfig(SENTINEL_ENV)), { lazyConnect: true });
    client.disconnect();
    expect(client.isCluster).toBe(false);
    expect(client.options).toMatchObject({
      name: 'mymaster', sentinels: [{ host: 's1', port: 26379 }, { host: 's2', port: 26379 }, { host: '::1', port: 26380 }],
      username: 'app', password: 's@cret', db: 2, tls: {}, enableTLSForSentinelMode: true, failoverDetector: true, maxRetriesPerRequest: null,
    });
  });

  it('Cluster: the seeds, and the credentials and BullMQ options for every node', () => {
    const client = createRedisClient(redisTarget(loadEnvConfig(CLUSTER_ENV)), { lazyConnect: true });
    client.disconnect();
    expect(client).toBeInstanceOf(Cluster);
    expect((client as Cluster).options.redisOptions).toMatchObject({ password: 'pw', maxRetriesPerRequest: null });
  });

  it('a READONLY reply (a demoted primary) reconnects and resends; other errors do not', () => {
    const client = createRedisClient({ url: 'redis://127.0.0.1:1' }, { lazyConnect: true }) as import('ioredis').Redis;
    client.disconnect();
    const decide = client.options.reconnectOnError as (err: Error) => boolean | 1 | 2;
    expect(decide(new Error("READONLY You can't write against a read only replica."))).toBe(2);
    expect(decide(new Error('ERR unknown command'))).toBe(false);
  });
});

describe('key names of a namespace', () => {
  it('tags the queues with {namespace} on a Cluster only, and every other key always', () => {
    expect(queuePrefix('billing', { url: 'redis://h' })).toBe(QUEUE_PREFIX);
    expect(queuePrefix('billing', { url: 'redis://h', sentinel: { sentinels: [{ host: 's', port: 1 }], name: 'm' } })).toBe('shardcron');
    expect(queuePrefix('billing', { url: 'redis://h', clusterNodes: [{ host: 'r', port: 1 }] })).toBe('shardcron:{billing}');
    expect(namespaceKeyPrefix('billing')).toBe('shardcron:{billing}');
  });

  it("matches a namespace's queue meta keys and gives back their queue names", () => {
    const keys = queueMetaKeys('shardcron:{ns}', 'ns');
    expect(keys.pattern).toBe('shardcron:{ns}:ns.*:meta');
    expect(keys.queueOf('shardcron:{ns}:ns.10.0.0.1@-@7.abc:meta')).toBe('ns.10.0.0.1@-@7.abc');
  });
});

describe('RecentEnqueues', () => {
  const request = (fireTime: number, item = 0): ExecutionRequest => ({ job: 'j', item, fireTime, source: 'NORMAL', epoch: 1 });

  it('remembers the requests of the window, by queue, in enqueue order, and forgets older ones', () => {
    let now = 1_000_000;
    const recent = new RecentEnqueues(() => now);
    recent.record('q1', [request(1), request(1, 1)]);
    now += RECONCILE_WINDOW_MS / 2;
    recent.record('q2', [request(2)]);
    recent.record('q1', [request(3)]);
    expect(recent.byQueue()).toEqual(new Map([['q1', [request(1), request(1, 1), request(3)]], ['q2', [request(2)]]]));
    now += RECONCILE_WINDOW_MS / 2 + 1;
    expect(recent.byQueue()).toEqual(new Map([['q2', [request(2)]], ['q1', [request(3)]]]));
    expect(recent.size).toBe(2);
  });
});
