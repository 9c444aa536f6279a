/** Key naming of the recent list, and the clear errors history objects give for bad options and queries. */
import IORedis from 'ioredis';
import { PgTraceReader } from '../../src/history/trace-reader';
import { PgTracingWriter } from '../../src/history/pg-tracing';
import { RecentExecutionsWriter } from '../../src/history/recent-executions';
import { ConfigError, ErrorCodes } from '../../src/shared/errors';
import { namespaceKeyPrefix } from '../../src/shared/registry/queue-names';
import { recentExecutionsKey } from '../../src/shared/registry/redis-keys';

/** The fields a ConfigError names. */
function fieldsOf(run: () => unknown): string[] {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).code).toBe(ErrorCodes.INVALID_CONFIG);
    return (err as ConfigError).issues.map((issue) => issue.field);
  }
  throw new Error('expected a ConfigError');
}

describe('recent list keys', () => {
  it('share the hash tag of their namespace, so a cluster keeps a namespace in one slot', () => {
    expect(namespaceKeyPrefix('prod')).toBe('shardcron:{prod}');
    expect(recentExecutionsKey('prod', 'billing')).toBe('shardcron:{prod}:executions:billing');
    expect(recentExecutionsKey('prod', 'billing-2')).toMatch(/^shardcron:\{prod\}:/);
  });

  it('refuse a job name that is not one, naming the job field', () => {
    expect(fieldsOf(() => recentExecutionsKey('prod', '../x'))).toEqual(['job']);
  });
});

describe('writer options', () => {
  const redis = new IORedis({ lazyConnect: true });
  afterAll(() => redis.disconnect());

  it('name every bad field of the recent list writer', () => {
    expect(
      fieldsOf(() => new RecentExecutionsWriter({ redis, namespace: 'a{b', keepPerJob: 0, batching: { batchSize: 50, maxBuffered: 10 } })),
    ).toEqual(['namespace', 'keepPerJob', 'batching.batchSize']);
  });

  it('name the connection string of the tracing writer: missing, malformed, or given with a pool', () => {
    const origin = { hostname: 'h', ip: '10.0.0.1' };
    expect(fieldsOf(() => new PgTracingWriter({ ...origin } as never))).toEqual(['connectionString']);
    expect(fieldsOf(() => new PgTracingWriter({ ...origin, connectionString: 'mysql://x' }))).toEqual(['connectionString']);
    expect(fieldsOf(() => new PgTracingWriter({ hostname: '', ip: '10.0.0.1', connectionString: 'postgres://x' }))).toEqual(['hostname']);
  });

  it('name the bad field of a trace query before asking the database', async () => {
    const reader = new PgTraceReader({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
    await expect(reader.executions('billing', { limit: 0 })).rejects.toMatchObject({ issues: [{ field: 'limit' }] });
    await expect(reader.executions('billing', { before: -1 })).rejects.toMatchObject({ issues: [{ field: 'before' }] });
    await expect(reader.executions('no/such')).rejects.toMatchObject({ issues: [{ field: 'job' }] });
    await reader.close();
  });
});
