import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, ErrorCodes } from '../../src/shared/errors';
import {
  describeEnv,
  ENV_VARIABLES,
  envSchema,
  isLoopbackHost,
  loadEnvConfig,
  type EnvVariableName,
  type ShardcronEnvConfig,
} from '../../src/shared/config/env-config';

/** Runs loadEnvConfig and returns the ConfigError it must throw. */
function configError(env: Record<string, string | undefined>): ConfigError {
  try {
    loadEnvConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).code).toBe(ErrorCodes.INVALID_CONFIG);
    return err as ConfigError;
  }
  throw new Error(`expected loadEnvConfig(${JSON.stringify(env)}) to throw`);
}

const fieldsOf = (err: ConfigError) => err.issues.map((i) => i.field);
const messageFor = (err: ConfigError, field: string) => err.issues.find((i) => i.field === field)?.message ?? '';

interface VariableCase {
  name: EnvVariableName;
  read: (config: ShardcronEnvConfig) => unknown;
  defaultValue: unknown;
  valid: Array<[raw: string, expected: unknown]>;
  invalid: Array<[raw: string, messagePart: string]>;
  /** Variables the value needs beside it (a Sentinel name for the Sentinels). */
  with?: Record<string, string>;
}

const TOKEN = 'a-very-secret-token-0123456789';

const cases: VariableCase[] = [
  {
    name: 'SHARDCRON_ZK',
    read: (c) => ({ connectionString: c.zk.connectionString, servers: c.zk.servers }),
    defaultValue: { connectionString: '127.0.0.1:2181', servers: [{ host: '127.0.0.1', port: 2181 }] },
    valid: [
      ['zk1:2181', { connectionString: 'zk1:2181', servers: [{ host: 'zk1', port: 2181 }] }],
      [
        ' zk-1.example.com:2181 , 10.0.0.2:2182,[::1]:2183,zoo_keeper:1',
        {
          connectionString: 'zk-1.example.com:2181,10.0.0.2:2182,[::1]:2183,zoo_keeper:1',
          servers: [
            { host: 'zk-1.example.com', port: 2181 },
            { host: '10.0.0.2', port: 2182 },
            { host: '::1', port: 2183 },
            { host: 'zoo_keeper', port: 1 },
          ],
        },
      ],
    ],
    invalid: [
      ['zk1:2181/shardcron', 'chroot suffix "/shardcron"'],
      ['zk1', '"zk1" has no port'],
      ['zk1:0', 'ports are 1-65535'],
      ['zk1:65536', 'ports are 1-65535'],
      ['zk1:21x', 'ports are 1-65535'],
      ['zk1:2181,,zk2:2181', 'entry 2 is empty'],
      ['::1:2181', 'IPv6 address in brackets'],
      ['[zk1]:2181', 'bracketed IPv6'],
      ['[::1]', 'has no port'],
      ['10.0.0.256:2181', 'not an IPv4 address or a hostname'],
      ['bad host!:2181', 'not an IPv4 address or a hostname'],
      ['-zk:2181', 'not an IPv4 address or a hostname'],
    ],
  },
  {
    name: 'SHARDCRON_ZK_SESSION_TIMEOUT_MS',
    read: (c) => c.zk.sessionTimeoutMs,
    defaultValue: 10000,
    valid: [['1000', 1000], ['600000', 600000], ['30000', 30000]],
    invalid: [['999', 'out of range'], ['600001', 'out of range'], ['10abc', 'not a decimal integer']],
  },
  {
    name: 'SHARDCRON_ZK_CONNECT_TIMEOUT_MS',
    read: (c) => c.zk.connectTimeoutMs,
    defaultValue: 15000,
    valid: [['100', 100], ['5000', 5000]],
    invalid: [['99', 'out of range'], ['1e4', 'exponent notation']],
  },
  {
    name: 'SHARDCRON_ZK_BASE_SLEEP_MS',
    read: (c) => c.zk.baseSleepMs,
    defaultValue: 1000,
    valid: [['1', 1], ['2000', 2000]],
    invalid: [['0', 'out of range'], ['-1', 'is negative'], ['60001', 'out of range']],
  },
  {
    name: 'SHARDCRON_ZK_MAX_SLEEP_MS',
    read: (c) => c.zk.maxSleepMs,
    defaultValue: 3000,
    valid: [['1000', 1000], ['60000', 60000]],
    invalid: [['1.5', 'not a whole number'], ['600001', 'out of range'], ['999', 'below SHARDCRON_ZK_BASE_SLEEP_MS (1000)']],
  },
  {
    name: 'SHARDCRON_ZK_MAX_RETRIES',
    read: (c) => c.zk.maxRetries,
    defaultValue: 3,
    valid: [['0', 0], ['29', 29]],
    invalid: [['30', 'out of range'], ['three', 'not a decimal integer']],
  },
  {
    name: 'SHARDCRON_ZK_DIGEST',
    read: (c) => c.zk.digest,
    defaultValue: undefined,
    valid: [['user:pass', { user: 'user', password: 'pass' }], ['user:pa:ss', { user: 'user', password: 'pa:ss' }]],
    invalid: [['userpass', 'user:password'], [':pass', 'user:password'], ['user:', 'user:password']],
  },
  {
    name: 'SHARDCRON_NAMESPACE',
    read: (c) => c.namespace,
    defaultValue: 'shardcron',
    valid: [['billing-prod', 'billing-prod'], ['a', 'a'], ['Team_1.jobs', 'Team_1.jobs'], ['x'.repeat(128), 'x'.repeat(128)]],
    invalid: [
      ['zookeeper', 'reserved'],
      ['.', 'single ZooKeeper node name'],
      ['..', 'single ZooKeeper node name'],
      ['.cluster', 'single ZooKeeper node name'],
      ['a/b', 'single ZooKeeper node name'],
      ['a:b', 'single ZooKeeper node name'],
      ['x'.repeat(129), 'single ZooKeeper node name'],
    ],
  },
  {
    name: 'SHARDCRON_REDIS_URL',
    read: (c) => c.redisUrl,
    defaultValue: 'redis://127.0.0.1:6379',
    valid: [
      ['redis://redis:6379', 'redis://redis:6379'],
      ['rediss://user:secret@cache.example.com:6380/2', 'rediss://user:secret@cache.example.com:6380/2'],
      ['redis://[::1]:6379/', 'redis://[::1]:6379/'],
    ],
    invalid: [
      ['127.0.0.1:6379', 'has no scheme'],
      ['http://127.0.0.1:6379', 'scheme "http" is not supported'],
      ['redis://', 'has no host'],
      ['redis://127.0.0.1:6379/cache', 'database "cache" is not a number'],
      ['redis://h:99999', 'not a valid URL'],
    ],
  },
  {
    name: 'SHARDCRON_REDIS_CLUSTER_NODES',
    read: (c) => c.redisClusterNodes,
    defaultValue: undefined,
    valid: [['r1:7000, r2:7001,10.0.0.3:7002', [{ host: 'r1', port: 7000 }, { host: 'r2', port: 7001 }, { host: '10.0.0.3', port: 7002 }]]],
    invalid: [['r1', '"r1" has no port'], ['r1:7000,,r2:7000', 'entry 2 is empty']],
  },
  {
    name: 'SHARDCRON_REDIS_SENTINELS',
    read: (c) => c.redisSentinel,
    defaultValue: undefined,
    with: { SHARDCRON_REDIS_SENTINEL_NAME: 'mymaster' },
    valid: [['s1:26379,s2:26379', { sentinels: [{ host: 's1', port: 26379 }, { host: 's2', port: 26379 }], name: 'mymaster' }]],
    invalid: [['s1', '"s1" has no port']],
  },
  {
    name: 'SHARDCRON_REDIS_SENTINEL_NAME',
    read: (c) => c.redisSentinel?.name,
    defaultValue: undefined,
    with: { SHARDCRON_REDIS_SENTINELS: 's1:26379' },
    valid: [['mymaster', 'mymaster'], ['cache.primary-1', 'cache.primary-1']],
    invalid: [['my master', 'is not a master name']],
  },
  {
    name: 'SHARDCRON_ROLES',
    read: (c) => c.roles,
    defaultValue: ['scheduler', 'worker', 'console'],
    valid: [
      ['worker', ['worker']],
      [' worker , scheduler ', ['scheduler', 'worker']],
      ['worker,worker,console,', ['worker', 'console']],
    ],
    invalid: [['workers', 'unknown role "workers" (did you mean worker?)'], [' , ', 'lists no role'], ['Worker', 'accepted: scheduler, worker, console']],
  },
  {
    name: 'SHARDCRON_JOBS',
    read: (c) => c.jobsModule,
    defaultValue: undefined,
    valid: [['./dist/jobs.js', './dist/jobs.js'], ['/srv/app/jobs.mjs', '/srv/app/jobs.mjs']],
    invalid: [['   ', 'path of a jobs module'], ['jobs\0.js', 'path of a jobs module']],
  },
  {
    name: 'SHARDCRON_CONCURRENCY',
    read: (c) => c.concurrency,
    defaultValue: 10,
    valid: [['1', 1], ['1000', 1000]],
    invalid: [['0', 'out of range'], ['1001', 'out of range'], ['10abc', 'not a decimal integer'], ['2.5', 'not a whole number']],
  },
  {
    name: 'SHARDCRON_PREFETCH',
    read: (c) => c.prefetch,
    defaultValue: undefined,
    valid: [['0', 0], ['10000', 10_000]],
    invalid: [['-1', 'is negative'], ['10001', 'out of range'], ['lots', 'not a decimal integer']],
  },
  {
    name: 'SHARDCRON_CONSUMERS',
    read: (c) => c.consumers,
    defaultValue: undefined,
    valid: [['1', 1], ['64', 64]],
    invalid: [['0', 'out of range'], ['65', 'out of range'], ['four', 'not a decimal integer']],
  },
  {
    name: 'SHARDCRON_YIELD_BEFORE_FIRE_MS',
    read: (c) => c.yieldBeforeFireMs,
    defaultValue: 50,
    valid: [['0', 0], ['1000', 1000]],
    invalid: [['-1', 'is negative'], ['1001', 'out of range'], ['50ms', 'not a decimal integer']],
  },
  {
    name: 'SHARDCRON_ITEM_LEASE',
    read: (c) => c.itemLease,
    defaultValue: undefined,
    valid: [['on', true], ['off', false]],
    invalid: [['yes', 'is not a value'], ['ON', 'accepted: on, off']],
  },
  {
    name: 'SHARDCRON_WARM_STANDBY',
    read: (c) => c.warmStandby,
    defaultValue: true,
    valid: [['on', true], ['off', false]],
    invalid: [['true', 'is not a value'], ['Off', 'accepted: on, off']],
  },
  {
    name: 'SHARDCRON_SERVER_RETENTION_MS',
    read: (c) => c.serverRetentionMs,
    defaultValue: 600_000,
    valid: [['1000', 1000], ['604800000', 604_800_000]],
    invalid: [['999', 'out of range'], ['604800001', 'out of range'], ['10m', 'not a decimal integer']],
  },
  {
    name: 'SHARDCRON_INSTANCE_ID',
    read: (c) => c.instanceId,
    defaultValue: undefined,
    valid: [['10.0.0.5@-@4242', '10.0.0.5@-@4242'], ['pod-abc_1', 'pod-abc_1'], ['i'.repeat(128), 'i'.repeat(128)]],
    invalid: [
      ['a/b', 'contains "/"'],
      ['my worker', 'printable ASCII'],
      ['ünïcode', 'printable ASCII'],
      ['..', 'not a valid ZooKeeper node name'],
      ['i'.repeat(129), 'expected 1-128'],
    ],
  },
  {
    name: 'SHARDCRON_OPS_HOST',
    read: (c) => c.ops.host,
    defaultValue: '127.0.0.1',
    valid: [['localhost', 'localhost'], ['::1', '::1'], ['[::1]', '::1'], ['127.0.0.2', '127.0.0.2']],
    invalid: [['bad host', 'not an IPv4 address, an IPv6 address or a hostname'], ['300.1.1.1', 'not an IPv4 address'], ['[zk]', 'not an IPv4']],
  },
  {
    name: 'SHARDCRON_OPS_PORT',
    read: (c) => c.ops.port,
    defaultValue: 8080,
    valid: [['0', 0], ['65535', 65535], ['9000', 9000]],
    invalid: [['65536', 'out of range'], ['-80', 'is negative'], ['80 ', 'not a decimal integer']],
  },
  {
    name: 'SHARDCRON_OPS_TOKEN',
    read: (c) => c.ops.token,
    defaultValue: undefined,
    // A short token is accepted (the console warns when it starts): the contract names no length.
    valid: [[TOKEN, TOKEN], ['x'.repeat(16), 'x'.repeat(16)], ['short', 'short']],
    invalid: [['has a space in the middle', 'printable ASCII']],
  },
  {
    name: 'SHARDCRON_OPS_READ_TOKEN',
    read: (c) => c.ops.readToken,
    defaultValue: undefined,
    valid: [['r'.repeat(16), 'r'.repeat(16)], ['reader', 'reader']],
    invalid: [['read only', 'printable ASCII']],
  },
  {
    name: 'SHARDCRON_TRACING_PG_URL',
    read: (c) => c.tracingPgUrl,
    defaultValue: undefined,
    valid: [['postgres://u:p@db:5432/history', 'postgres://u:p@db:5432/history'], ['postgresql://localhost/test', 'postgresql://localhost/test']],
    invalid: [['mysql://db/x', 'scheme "mysql" is not supported'], ['not a url', 'is not a valid URL']],
  },
  {
    name: 'SHARDCRON_HISTORY_RECENT',
    read: (c) => c.historyRecent,
    defaultValue: 1000,
    valid: [['0', 0], ['50', 50], ['1000000', 1_000_000]],
    invalid: [['-1', 'is negative'], ['1000001', 'out of range'], ['many', 'not a decimal integer']],
  },
  {
    name: 'SHARDCRON_COMPLETED_KEPT',
    read: (c) => c.completedKept,
    defaultValue: 0,
    valid: [['0', 0], ['100', 100], ['100000', 100_000]],
    invalid: [['-1', 'is negative'], ['100001', 'out of range'], ['all', 'not a decimal integer']],
  },
  {
    name: 'SHARDCRON_WORKER_GENERIC',
    read: (c) => c.workerGeneric,
    defaultValue: [],
    valid: [['script', ['script']], ['http,script', ['script', 'http']]],
    invalid: [['shell', 'accepted']],
  },
  {
    name: 'SHARDCRON_LOG_LEVEL',
    read: (c) => c.logLevel,
    defaultValue: 'info',
    valid: [['debug', 'debug'], ['silent', 'silent'], ['fatal', 'fatal']],
    invalid: [['verbose', 'accepted: fatal, error, warn, info, debug, trace, silent'], ['wran', 'did you mean warn?']],
  },
  {
    name: 'SHARDCRON_SHUTDOWN_GRACE_MS',
    read: (c) => c.shutdownGraceMs,
    defaultValue: 30000,
    valid: [['0', 0], ['3600000', 3600000]],
    invalid: [['3600001', 'out of range'], ['30s', 'not a decimal integer']],
  },
  {
    name: 'SHARDCRON_HEAP_GROWTH_PERCENT',
    read: (c) => c.heapGrowthPercent,
    defaultValue: undefined,
    valid: [['0', 0], ['25', 25], ['400', 400]],
    invalid: [['401', 'out of range'], ['50%', 'not a decimal integer'], ['-1', 'is negative']],
  },
  {
    name: 'SHARDCRON_JAVA',
    read: (c) => c.localServices.java,
    defaultValue: undefined,
    valid: [['/usr/bin/java', '/usr/bin/java']],
    invalid: [['   ', 'expected a file path']],
  },
  {
    name: 'SHARDCRON_ZK_CLASSPATH',
    read: (c) => c.localServices.zkClasspath,
    defaultValue: undefined,
    valid: [['/opt/zookeeper/lib/*', '/opt/zookeeper/lib/*']],
    invalid: [['  ', 'expected a file path']],
  },
  {
    name: 'SHARDCRON_REDIS_SERVER',
    read: (c) => c.localServices.redisServer,
    defaultValue: undefined,
    valid: [['/usr/bin/redis-server', '/usr/bin/redis-server']],
    invalid: [[' ', 'expected a file path']],
  },
  {
    name: 'SHARDCRON_PG_BIN_DIR',
    read: (c) => c.localServices.pgBinDir,
    defaultValue: undefined,
    valid: [['/usr/lib/postgresql/15/bin', '/usr/lib/postgresql/15/bin']],
    invalid: [[' ', 'expected a file path']],
  },
  {
    name: 'SHARDCRON_CHROMIUM',
    read: (c) => c.localServices.chromium,
    defaultValue: undefined,
    valid: [['/usr/bin/chromium', '/usr/bin/chromium']],
    invalid: [[' ', 'expected a file path']],
  },
  {
    // Set by shardcron in a SCRIPT job's process: accepted, never read as configuration.
    name: 'SHARDCRON_SHARDING_CONTEXT',
    read: (c) => (c as unknown as Record<string, unknown>).shardingContext,
    defaultValue: undefined,
    valid: [['{"jobName":"billing","shardingItem":0}', undefined]],
    invalid: [],
  },
];

describe('loadEnvConfig', () => {
  it('has a test case for every documented variable', () => {
    expect(cases.map((c) => c.name)).toEqual(ENV_VARIABLES.map((v) => v.name));
  });

  describe.each(cases)('$name', ({ name, read, defaultValue, valid, invalid, with: companions = {} }) => {
    it('uses the default when unset', () => {
      expect(read(loadEnvConfig({}))).toEqual(defaultValue);
    });

    it('treats an empty string as unset', () => {
      expect(read(loadEnvConfig({ [name]: '' }))).toEqual(defaultValue);
    });

    it.each(valid)('accepts %j', (raw, expected) => {
      expect(read(loadEnvConfig({ [name]: raw, ...companions }))).toEqual(expected);
    });

    // Every variable rejects something, but for the context a SCRIPT job's process inherits.
    if (invalid.length > 0) it.each(invalid)('rejects %j, naming the variable', (raw, messagePart) => {
      const err = configError({ [name]: raw, ...companions });
      expect(fieldsOf(err)).toEqual([name]);
      expect(messageFor(err, name)).toContain(messagePart);
      expect(err.message).toContain(`${name}: `);
    });

    it('documents its default in ENV_VARIABLES', () => {
      const documented = ENV_VARIABLES.find((v) => v.name === name);
      expect(documented?.description.length).toBeGreaterThan(20);
      if (defaultValue === undefined) expect(documented?.default).toBeUndefined();
      else expect(read(loadEnvConfig({ [name]: documented?.default }))).toEqual(defaultValue);
    });
  });

  it('returns the documented defaults for an empty environment', () => {
    expect(loadEnvConfig({})).toEqual({
      zk: {
        connectionString: '127.0.0.1:2181',
        servers: [{ host: '127.0.0.1', port: 2181 }],
        sessionTimeoutMs: 10000,
        connectTimeoutMs: 15000,
        baseSleepMs: 1000,
        maxSleepMs: 3000,
        maxRetries: 3,
      },
      namespace: 'shardcron',
      redisUrl: 'redis://127.0.0.1:6379',
      roles: ['scheduler', 'worker', 'console'],
      concurrency: 10,
      yieldBeforeFireMs: 50,
      warmStandby: true,
      serverRetentionMs: 600_000,
      ops: { host: '127.0.0.1', port: 8080 },
      historyRecent: 1000,
      completedKept: 0,
      workerGeneric: [],
      logLevel: 'info',
      shutdownGraceMs: 30000,
      localServices: {},
    });
  });

  it('pairs the Sentinels with their primary name, refuses them with a cluster, and a read token equal to the admin one', () => {
    expect(fieldsOf(configError({ SHARDCRON_REDIS_SENTINELS: 's1:26379' }))).toEqual(['SHARDCRON_REDIS_SENTINEL_NAME']);
    expect(fieldsOf(configError({ SHARDCRON_REDIS_SENTINEL_NAME: 'mymaster' }))).toEqual(['SHARDCRON_REDIS_SENTINELS']);
    const both = configError({ SHARDCRON_REDIS_SENTINELS: 's1:26379', SHARDCRON_REDIS_SENTINEL_NAME: 'm', SHARDCRON_REDIS_CLUSTER_NODES: 'r1:7000' });
    expect(messageFor(both, 'SHARDCRON_REDIS_CLUSTER_NODES')).toContain('exclude each other');
    const same = configError({ SHARDCRON_OPS_TOKEN: TOKEN, SHARDCRON_OPS_READ_TOKEN: TOKEN });
    expect(messageFor(same, 'SHARDCRON_OPS_READ_TOKEN')).toContain('must differ from the admin token');
  });

  it('leaves optional fields absent, not undefined', () => {
    const config = loadEnvConfig({});
    expect(Object.keys(config)).not.toEqual(expect.arrayContaining(['jobsModule']));
    expect('instanceId' in config).toBe(false);
    expect('digest' in config.zk).toBe(false);
    expect('token' in config.ops).toBe(false);
  });

  it('ignores variables without the SHARDCRON_ prefix', () => {
    expect(loadEnvConfig({ PATH: '/usr/bin', HOME: '/root', SHARDCRONX: '1' })).toEqual(loadEnvConfig({}));
  });

  it('reads process.env by default', () => {
    const saved = process.env.SHARDCRON_CONCURRENCY;
    process.env.SHARDCRON_CONCURRENCY = '7';
    try {
      expect(loadEnvConfig().concurrency).toBe(7);
    } finally {
      if (saved === undefined) delete process.env.SHARDCRON_CONCURRENCY;
      else process.env.SHARDCRON_CONCURRENCY = saved;
    }
  });

  it('reports every invalid variable in one error, in documentation order', () => {
    const err = configError({
      SHARDCRON_LOG_LEVEL: 'loud',
      SHARDCRON_ZK: 'zk1',
      SHARDCRON_CONCURRENCY: '1e3',
      SHARDCRON_OPS_PORT: '-1',
      SHARDCRON_NAMESPACE: 'zookeeper',
      SHARDCRON_CONCURENCY: '5',
    });
    expect(fieldsOf(err)).toEqual([
      'SHARDCRON_ZK',
      'SHARDCRON_NAMESPACE',
      'SHARDCRON_CONCURRENCY',
      'SHARDCRON_OPS_PORT',
      'SHARDCRON_LOG_LEVEL',
      'SHARDCRON_CONCURENCY',
    ]);
    for (const field of fieldsOf(err)) expect(err.message).toContain(`  - ${field}: `);
  });

  describe('unknown variables', () => {
    it.each([
      ['SHARDCRON_CONCURENCY', 'did you mean SHARDCRON_CONCURRENCY?'],
      ['SHARDCRON_ZK_SESSION_TIMEOUT', 'did you mean SHARDCRON_ZK_SESSION_TIMEOUT_MS?'],
      ['SHARDCRON_NAMESAPCE', 'did you mean SHARDCRON_NAMESPACE?'],
      ['SHARDCRON_REDIS', 'did you mean SHARDCRON_REDIS_URL, SHARDCRON_REDIS_CLUSTER_NODES, SHARDCRON_REDIS_SENTINELS, SHARDCRON_REDIS_SENTINEL_NAME or SHARDCRON_REDIS_SERVER?'],
      ['shardcron_zk', 'names are case-sensitive: did you mean SHARDCRON_ZK?'],
    ])('rejects %s with a suggestion', (name, suggestion) => {
      const err = configError({ [name]: 'x' });
      expect(fieldsOf(err)).toEqual([name]);
      expect(messageFor(err, name)).toContain('unknown variable');
      expect(messageFor(err, name)).toContain(suggestion);
    });

    it('gives no suggestion when nothing is close', () => {
      const err = configError({ SHARDCRON_SOMETHING_ELSE_ENTIRELY: 'x' });
      expect(messageFor(err, 'SHARDCRON_SOMETHING_ELSE_ENTIRELY')).not.toContain('did you mean');
    });

    it('knows the variables shardcron sets itself or its local services and tests read', () => {
      // A SCRIPT job's process gets SHARDCRON_SHARDING_CONTEXT: a shardcron CLI or node started by the script must start.
      const config = loadEnvConfig({ SHARDCRON_SHARDING_CONTEXT: '{"jobName":"billing","shardingItem":0}', SHARDCRON_PG_BIN_DIR: '/usr/lib/postgresql/15/bin', SHARDCRON_CHROMIUM: '/usr/bin/chromium' });
      expect(config.namespace).toBe('shardcron');
    });

    it('ignores an unknown variable set to the empty string, like any empty variable', () => {
      expect(() => loadEnvConfig({ SHARDCRON_CONCURENCY: '' })).not.toThrow();
    });

    it('is reported together with invalid known variables', () => {
      const err = configError({ SHARDCRON_CONCURENCY: '5', SHARDCRON_CONCURRENCY: 'many' });
      expect(fieldsOf(err)).toEqual(['SHARDCRON_CONCURRENCY', 'SHARDCRON_CONCURENCY']);
    });
  });

  describe('cross-field rules', () => {
    it('accepts max sleep equal to base sleep', () => {
      const config = loadEnvConfig({ SHARDCRON_ZK_BASE_SLEEP_MS: '2000', SHARDCRON_ZK_MAX_SLEEP_MS: '2000' });
      expect(config.zk).toMatchObject({ baseSleepMs: 2000, maxSleepMs: 2000 });
    });

    it('rejects a default max sleep below a raised base sleep, naming the max', () => {
      const err = configError({ SHARDCRON_ZK_BASE_SLEEP_MS: '5000' });
      expect(fieldsOf(err)).toEqual(['SHARDCRON_ZK_MAX_SLEEP_MS']);
      expect(messageFor(err, 'SHARDCRON_ZK_MAX_SLEEP_MS')).toContain('3000 is below SHARDCRON_ZK_BASE_SLEEP_MS (5000)');
    });

    it('skips the sleep rule when one of its fields is already invalid', () => {
      const err = configError({ SHARDCRON_ZK_BASE_SLEEP_MS: 'x', SHARDCRON_ZK_MAX_SLEEP_MS: '2' });
      expect(fieldsOf(err)).toEqual(['SHARDCRON_ZK_BASE_SLEEP_MS']);
    });

    it.each(['0.0.0.0', '::', '10.1.2.3', 'ops.example.com'])(
      'requires SHARDCRON_OPS_TOKEN when the console binds %s',
      (host) => {
        const err = configError({ SHARDCRON_OPS_HOST: host });
        expect(fieldsOf(err)).toEqual(['SHARDCRON_OPS_TOKEN']);
        expect(messageFor(err, 'SHARDCRON_OPS_TOKEN')).toContain(`non-loopback address "${host}"`);
      },
    );

    it('accepts a non-loopback console bind with a token', () => {
      expect(loadEnvConfig({ SHARDCRON_OPS_HOST: '0.0.0.0', SHARDCRON_OPS_TOKEN: TOKEN }).ops).toEqual({
        host: '0.0.0.0',
        port: 8080,
        token: TOKEN,
      });
    });

    it('does not require a token when the process has no console role', () => {
      expect(loadEnvConfig({ SHARDCRON_OPS_HOST: '0.0.0.0', SHARDCRON_ROLES: 'worker,scheduler' }).ops.host).toBe('0.0.0.0');
    });

    it('does not require a token on loopback binds', () => {
      for (const host of ['127.0.0.1', '127.8.9.10', '::1', '[::1]', 'localhost', 'LOCALHOST', '::ffff:127.0.0.1']) {
        expect(loadEnvConfig({ SHARDCRON_OPS_HOST: host }).ops.token).toBeUndefined();
      }
    });

    it('accepts a short token on a loopback address, and refuses one on any other', () => {
      expect(loadEnvConfig({ SHARDCRON_OPS_TOKEN: 'secret', SHARDCRON_OPS_READ_TOKEN: 'reader' }).ops.token).toBe('secret');
      const err = configError({ SHARDCRON_OPS_HOST: '0.0.0.0', SHARDCRON_OPS_TOKEN: 'secret', SHARDCRON_OPS_READ_TOKEN: 'reader' });
      expect(fieldsOf(err)).toEqual(['SHARDCRON_OPS_TOKEN', 'SHARDCRON_OPS_READ_TOKEN']);
      expect(messageFor(err, 'SHARDCRON_OPS_TOKEN')).toContain('is 6 characters long; a console on the non-loopback address "0.0.0.0" needs at least 16');
      // Without the console role the tokens guard nothing.
      expect(() => loadEnvConfig({ SHARDCRON_ROLES: 'worker', SHARDCRON_OPS_HOST: '0.0.0.0', SHARDCRON_OPS_TOKEN: 'secret' })).not.toThrow();
    });

    it('reports only the invalid token, not also a missing one', () => {
      const err = configError({ SHARDCRON_OPS_HOST: '0.0.0.0', SHARDCRON_OPS_TOKEN: 'not ascii é' });
      expect(fieldsOf(err)).toEqual(['SHARDCRON_OPS_TOKEN']);
      expect(messageFor(err, 'SHARDCRON_OPS_TOKEN')).toContain('printable ASCII');
    });
  });

  it('never echoes secrets in error messages', () => {
    const err = configError({
      SHARDCRON_ZK_DIGEST: 'onlyuser-hunter2',
      SHARDCRON_OPS_TOKEN: 'hunter2 hunter2 hunter2',
      SHARDCRON_REDIS_URL: 'redis://:hunter2@h:99999',
    });
    expect(fieldsOf(err)).toEqual(['SHARDCRON_ZK_DIGEST', 'SHARDCRON_REDIS_URL', 'SHARDCRON_OPS_TOKEN']);
    expect(err.message).not.toContain('hunter2');
    expect(JSON.stringify(err.details)).not.toContain('hunter2');
  });

  it('returns a deeply frozen config', () => {
    // Test modules compile to strict mode, where writing a frozen property throws.
    const config = loadEnvConfig({ SHARDCRON_ZK_DIGEST: 'u:p', SHARDCRON_OPS_TOKEN: TOKEN });
    expect(Object.isFrozen(config)).toBe(true);
    expect(() => {
      (config as { namespace: string }).namespace = 'other';
    }).toThrow(TypeError);
    expect(() => {
      (config.zk as { sessionTimeoutMs: number }).sessionTimeoutMs = 1;
    }).toThrow(TypeError);
    expect(() => {
      (config.zk.digest as { password: string }).password = 'x';
    }).toThrow(TypeError);
    expect(() => {
      (config.zk.servers[0] as { port: number }).port = 1;
    }).toThrow(TypeError);
    expect(() => (config.roles as string[]).push('worker')).toThrow(TypeError);
    expect(() => {
      (config.ops as { token?: string }).token = 'x';
    }).toThrow(TypeError);
  });

  it('returns a fresh config on every call (freezing one does not affect the next)', () => {
    expect(loadEnvConfig({ SHARDCRON_CONCURRENCY: '3' }).concurrency).toBe(3);
    expect(loadEnvConfig({}).concurrency).toBe(10);
  });
});

describe('envSchema', () => {
  it('can be used directly with safeParse', () => {
    const result = envSchema.safeParse({ SHARDCRON_ROLES: 'nope' });
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((i) => i.path)).toEqual([['SHARDCRON_ROLES']]);
  });
});

describe('isLoopbackHost', () => {
  it.each([
    ['127.0.0.1', true],
    ['127.255.0.9', true],
    ['::1', true],
    ['0:0:0:0:0:0:0:1', true],
    ['[::1]', true],
    ['::ffff:127.0.0.1', true],
    ['localhost', true],
    ['0.0.0.0', false],
    ['::', false],
    ['128.0.0.1', false],
    ['::ffff:10.0.0.1', false],
    ['localhost.example.com', false],
    ['example.com', false],
  ])('%s -> %s', (host, expected) => {
    expect(isLoopbackHost(host)).toBe(expected);
  });
});

describe('ENV_VARIABLES and describeEnv', () => {
  it('lists unique SHARDCRON_ names, each with a description', () => {
    const names = ENV_VARIABLES.map((v) => v.name);
    expect(new Set(names).size).toBe(names.length);
    for (const v of ENV_VARIABLES) {
      expect(v.name).toMatch(/^SHARDCRON_[A-Z0-9_]+$/);
      expect(v.description).not.toBe('');
    }
  });

  it('is frozen', () => {
    expect(Object.isFrozen(ENV_VARIABLES)).toBe(true);
    expect(ENV_VARIABLES.every((v) => Object.isFrozen(v))).toBe(true);
  });

  it('renders a markdown table with one row per variable', () => {
    const lines = describeEnv().split('\n');
    expect(lines[0]).toBe('| Variable | Default | Description |');
    expect(lines).toHaveLength(ENV_VARIABLES.length + 2);
    expect(lines).toContain(
      '| `SHARDCRON_NAMESPACE` | `shardcron` | ' + ENV_VARIABLES.find((v) => v.name === 'SHARDCRON_NAMESPACE')!.description + ' |',
    );
    expect(lines.find((l) => l.startsWith('| `SHARDCRON_OPS_TOKEN`'))).toContain('| (unset) |');
  });

  describe('docs/configuration.md', () => {
    const docs = readFileSync(join(__dirname, '../../docs/configuration.md'), 'utf8');

    it.each(ENV_VARIABLES.map((v) => v.name))('mentions %s', (name) => {
      expect(docs).toContain(`\`${name}\``);
    });

    it('contains the table describeEnv() generates (regenerate it if this fails)', () => {
      // To regenerate: npx tsx -e "console.log(require('./src/shared/config/env-config').describeEnv())"
      expect(docs).toContain(describeEnv());
    });
  });
});
