import { ConfigError, ErrorCodes, ShardcronError } from '../../src/shared/errors';
import {
  assertJobName,
  isValidJobName,
  JOB_NAME_PATTERN,
  parseRegistryPath,
  registryPaths as p,
  type RegistryPath,
  type RegistryPathKind,
} from '../../src/shared/registry/registry-paths';

/** Calls `fn`, expects an INVALID_CONFIG ConfigError with one issue on `field`, returns that issue's message. */
function rejection(fn: () => unknown, field: string): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ShardcronError);
    expect(err).toBeInstanceOf(ConfigError);
    const error = err as ConfigError;
    expect(error.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(error.issues.map((i) => i.field)).toEqual([field]);
    expect(error.message).toContain(`${field}: `);
    return error.issues[0]!.message;
  }
  throw new Error('expected a throw');
}

describe('job names', () => {
  it.each(['billing', 'a', 'B2', '0-report_daily', 'x'.repeat(128)])('accepts %j', (name) => {
    expect(isValidJobName(name)).toBe(true);
    expect(() => assertJobName(name)).not.toThrow();
  });

  it.each(['', '.cluster', '-lead', '_lead', 'a.b', 'a/b', 'a b', 'é', 'x'.repeat(129), 'zk:1'])('rejects %j', (name) => {
    expect(isValidJobName(name)).toBe(false);
    const message = rejection(() => assertJobName(name), 'name');
    expect(message).toContain(JOB_NAME_PATTERN.source);
  });

  it.each([undefined, null, 7, {}])('rejects the non-string %j', (name) => {
    expect(isValidJobName(name)).toBe(false);
    rejection(() => assertJobName(name), 'name');
  });

  it('names a caller-chosen field', () => {
    rejection(() => assertJobName('a/b', 'jobs[2].name'), 'jobs[2].name');
  });

  it('matches the pattern of DESIGN.md', () => {
    expect(JOB_NAME_PATTERN.source).toBe('^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$');
  });
});

/** Every builder call with its expected path and parse result: the single table for build and parse tests. */
const table: Array<[path: string, build: () => string, parsed: RegistryPath]> = [
  ['/.cluster', () => p.clusterRoot(), { kind: 'clusterRoot' }],
  ['/.cluster/election', () => p.election(), { kind: 'election' }],
  ['/.cluster/election/n_0000000042', () => p.electionCandidate('n_0000000042'), { kind: 'electionCandidate', nodeName: 'n_0000000042', sequence: 42 }],
  ['/.cluster/leader', () => p.leader(), { kind: 'leader' }],
  ['/.cluster/item-lock', () => p.itemLock(), { kind: 'itemLock' }],
  ['/.cluster/instances', () => p.instances(), { kind: 'instances' }],
  ['/.cluster/instances/10.0.0.7@-@4242', () => p.instance('10.0.0.7@-@4242'), { kind: 'instance', instanceId: '10.0.0.7@-@4242' }],
  ['/.cluster/job-lists', () => p.jobLists(), { kind: 'jobLists' }],
  ['/.cluster/job-lists/0123456789abcdef-1f2e3d.2', () => p.jobListPart('0123456789abcdef-1f2e3d', 2), { kind: 'jobListPart', list: '0123456789abcdef-1f2e3d', part: 2 }],
  ['/billing', () => p.job('billing'), { kind: 'job', job: 'billing' }],
  ['/billing/config', () => p.jobConfig('billing'), { kind: 'jobConfig', job: 'billing' }],
  ['/billing/servers', () => p.jobServers('billing'), { kind: 'jobServers', job: 'billing' }],
  ['/billing/servers/10.0.0.7', () => p.jobServer('billing', '10.0.0.7'), { kind: 'jobServer', job: 'billing', ip: '10.0.0.7' }],
  ['/billing/servers/fe80::1', () => p.jobServer('billing', 'fe80::1'), { kind: 'jobServer', job: 'billing', ip: 'fe80::1' }],
  ['/billing/instances', () => p.jobInstances('billing'), { kind: 'jobInstances', job: 'billing' }],
  [
    '/billing/instances/10.0.0.7@-@4242',
    () => p.jobInstance('billing', '10.0.0.7@-@4242'),
    { kind: 'jobInstance', job: 'billing', instanceId: '10.0.0.7@-@4242' },
  ],
  ['/billing/sharding', () => p.jobSharding('billing'), { kind: 'jobSharding', job: 'billing' }],
  ['/billing/sharding/3', () => p.shardingItem('billing', 3), { kind: 'shardingItem', job: 'billing', item: 3 }],
  ['/billing/sharding/0/instance', () => p.shardingInstance('billing', 0), { kind: 'shardingInstance', job: 'billing', item: 0 }],
  ['/billing/sharding/3/running', () => p.shardingRunning('billing', 3), { kind: 'shardingRunning', job: 'billing', item: 3 }],
  ['/billing/sharding/3/misfire', () => p.shardingMisfire('billing', 3), { kind: 'shardingMisfire', job: 'billing', item: 3 }],
  ['/billing/sharding/3/disabled', () => p.shardingDisabled('billing', 3), { kind: 'shardingDisabled', job: 'billing', item: 3 }],
  ['/billing/sharding/12/failover', () => p.shardingFailover('billing', 12), { kind: 'shardingFailover', job: 'billing', item: 12 }],
  ['/billing/leader', () => p.leaderRoot('billing'), { kind: 'leaderRoot', job: 'billing' }],
  ['/billing/leader/sharding/necessary', () => p.leaderShardingNecessary('billing'), { kind: 'leaderShardingNecessary', job: 'billing' }],
  ['/billing/leader/failover/items', () => p.leaderFailoverItems('billing'), { kind: 'leaderFailoverItems', job: 'billing' }],
  ['/billing/leader/failover/items/5', () => p.leaderFailoverItem('billing', 5), { kind: 'leaderFailoverItem', job: 'billing', item: 5 }],
  ['/billing/leader/fire', () => p.leaderFire('billing'), { kind: 'leaderFire', job: 'billing' }],
  ['/billing/trigger', () => p.triggers('billing'), { kind: 'triggers', job: 'billing' }],
  ['/billing/trigger/req-7f3a', () => p.trigger('billing', 'req-7f3a'), { kind: 'trigger', job: 'billing', requestId: 'req-7f3a' }],
];

describe('registryPaths', () => {
  it.each(table)('builds %s', (path, build) => {
    expect(build()).toBe(path);
  });

  it('builds the election prefix ZooKeeper appends the sequence to', () => {
    expect(p.electionCandidatePrefix()).toBe('/.cluster/election/n_');
    expect(p.electionCandidate('n_0000000001').startsWith(p.electionCandidatePrefix())).toBe(true);
  });

  it('covers every builder in the table', () => {
    const kinds = new Set(table.map(([, , parsed]) => parsed.kind));
    const builders = Object.keys(p).filter((name) => name !== 'electionCandidatePrefix');
    expect(builders.sort()).toEqual([...kinds].sort());
  });

  it('is frozen', () => {
    expect(Object.isFrozen(p)).toBe(true);
  });

  it('keeps items large and small', () => {
    expect(p.shardingItem('j', Number.MAX_SAFE_INTEGER)).toBe(`/j/sharding/${Number.MAX_SAFE_INTEGER}`);
    expect(p.leaderFailoverItem('j', 0)).toBe('/j/leader/failover/items/0');
  });

  describe('argument validation', () => {
    const jobBuilders: Array<[string, (job: string) => string]> = [
      ['job', (j) => p.job(j)],
      ['jobConfig', (j) => p.jobConfig(j)],
      ['jobServers', (j) => p.jobServers(j)],
      ['jobServer', (j) => p.jobServer(j, '10.0.0.1')],
      ['jobInstances', (j) => p.jobInstances(j)],
      ['jobInstance', (j) => p.jobInstance(j, 'i@-@1')],
      ['jobSharding', (j) => p.jobSharding(j)],
      ['shardingItem', (j) => p.shardingItem(j, 0)],
      ['shardingInstance', (j) => p.shardingInstance(j, 0)],
      ['shardingRunning', (j) => p.shardingRunning(j, 0)],
      ['shardingMisfire', (j) => p.shardingMisfire(j, 0)],
      ['shardingDisabled', (j) => p.shardingDisabled(j, 0)],
      ['shardingFailover', (j) => p.shardingFailover(j, 0)],
      ['leaderRoot', (j) => p.leaderRoot(j)],
      ['leaderShardingNecessary', (j) => p.leaderShardingNecessary(j)],
      ['leaderFailoverItems', (j) => p.leaderFailoverItems(j)],
      ['leaderFailoverItem', (j) => p.leaderFailoverItem(j, 0)],
      ['leaderFire', (j) => p.leaderFire(j)],
      ['triggers', (j) => p.triggers(j)],
      ['trigger', (j) => p.trigger(j, 'r1')],
    ];

    it.each(jobBuilders)('%s rejects an invalid job name, naming `job` and the pattern', (_name, build) => {
      for (const bad of ['', '.cluster', '../etc', 'a/b', 'x'.repeat(129)]) {
        const message = rejection(() => build(bad), 'job');
        expect(message).toContain(JOB_NAME_PATTERN.source);
      }
    });

    const itemBuilders: Array<[string, (item: number) => string]> = [
      ['shardingItem', (i) => p.shardingItem('j', i)],
      ['shardingInstance', (i) => p.shardingInstance('j', i)],
      ['shardingRunning', (i) => p.shardingRunning('j', i)],
      ['shardingMisfire', (i) => p.shardingMisfire('j', i)],
      ['shardingDisabled', (i) => p.shardingDisabled('j', i)],
      ['shardingFailover', (i) => p.shardingFailover('j', i)],
      ['leaderFailoverItem', (i) => p.leaderFailoverItem('j', i)],
    ];

    it.each(itemBuilders)('%s rejects items that are not non-negative safe integers', (_name, build) => {
      for (const bad of [-1, 1.5, NaN, Infinity, Number.MAX_SAFE_INTEGER + 1, '3' as unknown as number]) {
        expect(rejection(() => build(bad), 'item')).toContain('non-negative integer');
      }
    });

    const nodeNameBuilders: Array<[field: string, build: (value: string) => string]> = [
      ['ip', (v) => p.jobServer('j', v)],
      ['instanceId', (v) => p.jobInstance('j', v)],
      ['requestId', (v) => p.trigger('j', v)],
    ];

    it.each(nodeNameBuilders)('rejects an invalid %s, naming it', (field, build) => {
      expect(rejection(() => build(''), field)).toContain('non-empty string');
      expect(rejection(() => build(undefined as unknown as string), field)).toContain('non-empty string');
      expect(rejection(() => build('a/b'), field)).toContain('contains "/"');
      expect(rejection(() => build('../x'), field)).toContain('contains "/"');
      expect(rejection(() => build('..'), field)).toContain('not a valid ZooKeeper node name');
      expect(rejection(() => build('.'), field)).toContain('not a valid ZooKeeper node name');
      expect(rejection(() => build('a\u0000b'), field)).toContain('ZooKeeper refuses');
      expect(rejection(() => build('tab\there'), field)).toContain('ZooKeeper refuses');
    });

    it('rejects election node names that are not candidates', () => {
      for (const bad of ['', 'n_', 'x_0000000001', 'n_abc', '/.cluster/election/n_0000000001', 'n_00000000001']) {
        expect(rejection(() => p.electionCandidate(bad), 'nodeName')).toContain('n_0000000007');
      }
    });

    it('shows the offending value in the message', () => {
      expect(rejection(() => p.jobServer('j', 'a/b'), 'ip')).toContain('"a/b"');
      expect(rejection(() => p.job('bad name'), 'job')).toContain('"bad name"');
    });
  });
});

describe('parseRegistryPath', () => {
  it.each(table)('parses %s', (path, _build, parsed) => {
    expect(parseRegistryPath(path)).toEqual(parsed);
  });

  it('round-trips every kind: parse(build(args)) gives back the args', () => {
    const seen = new Set<RegistryPathKind>();
    for (const [, build, parsed] of table) {
      const result = parseRegistryPath(build());
      expect(result).toEqual(parsed);
      seen.add(result.kind);
    }
    expect(seen.size).toBe(Object.keys(p).length - 1); // all but electionCandidatePrefix
  });

  it('reads the sequence (the leader epoch) of candidates, including after int32 overflow', () => {
    expect(parseRegistryPath('/.cluster/election/n_0000000000')).toEqual({ kind: 'electionCandidate', nodeName: 'n_0000000000', sequence: 0 });
    expect(parseRegistryPath('/.cluster/election/n_-2147483648')).toMatchObject({ sequence: -2147483648 });
  });

  it('works on job names that look like path words', () => {
    expect(parseRegistryPath('/leader/leader/fire')).toEqual({ kind: 'leaderFire', job: 'leader' });
    expect(parseRegistryPath('/sharding/sharding/1/running')).toEqual({ kind: 'shardingRunning', job: 'sharding', item: 1 });
    expect(parseRegistryPath('/config/config')).toEqual({ kind: 'jobConfig', job: 'config' });
  });

  it.each([
    '',
    '/',
    'billing/config',
    '/billing/',
    '//billing',
    '/billing//config',
    '/.cluster/',
    '/.cluster/other',
    '/.cluster/leader/x',
    '/.cluster/election/c_0000000001',
    '/.cluster/election/n_1/x',
    '/.other',
    '/bad name/config',
    '/zookeeper/quota',
    '/billing/config/x',
    '/billing/unknown',
    '/billing/servers/10.0.0.1/x',
    '/billing/instances/..',
    '/billing/sharding/03',
    '/billing/sharding/-1/running',
    '/billing/sharding/1.5',
    '/billing/sharding/99999999999999999999',
    '/billing/sharding/3/other',
    '/billing/sharding/3/running/x',
    '/billing/leader/sharding',
    '/billing/leader/failover',
    '/billing/leader/failover/items/x',
    '/billing/leader/failover/items/1/x',
    '/billing/leader/fire/x',
    '/billing/trigger/r1/x',
  ])('returns unknown for %j', (path) => {
    expect(parseRegistryPath(path)).toEqual({ kind: 'unknown', path });
  });

  it('never throws on non-string input from untyped callers', () => {
    expect(parseRegistryPath(undefined as unknown as string)).toEqual({ kind: 'unknown', path: undefined });
  });
});
