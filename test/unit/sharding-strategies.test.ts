import { ErrorCodes, ShardcronError } from '../../src/shared/errors';
import {
  DEFAULT_SHARDING_STRATEGY,
  getShardingStrategy,
  javaStringHashCode,
  listShardingStrategies,
  registerShardingStrategy,
  runShardingStrategy,
  shardingStrategies,
  sortInstancesForSharding,
  unregisterShardingStrategy,
  type ShardingStrategy,
} from '../../src/shared/sharding/sharding-strategies';

const { AVG_ALLOCATION, ODEVITY, ROUND_ROBIN } = shardingStrategies;
const h3 = ['host0', 'host1', 'host2'] as const;

/** Catches the error `fn` throws, failing the test when it throws nothing. */
function thrown(fn: () => unknown): ShardcronError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ShardcronError);
    return err as ShardcronError;
  }
  throw new Error('expected an error');
}

describe('javaStringHashCode', () => {
  it('matches the JVM', () => {
    expect(javaStringHashCode('')).toBe(0);
    expect(javaStringHashCode('0')).toBe(48);
    expect(javaStringHashCode('ab')).toBe(3105);
    expect(javaStringHashCode('hello')).toBe(99162322);
    // Overflowing names, negative in Java.
    expect(javaStringHashCode('billing')).toBe(-109829509);
    expect(javaStringHashCode('test_job')).toBe(-1146456432);
    // Non-ASCII: UTF-16 code units, a surrogate pair counts as two.
    expect(javaStringHashCode('作业')).toBe(0x4f5c * 31 + 0x4e1a);
    expect(javaStringHashCode('😀')).toBe(0xd83d * 31 + 0xde00);
  });

  it('gives exactly Integer.MIN_VALUE for "polygenelubricants"', () => {
    expect(javaStringHashCode('polygenelubricants')).toBe(-2147483648);
  });
});

describe('AVG_ALLOCATION', () => {
  it('returns {} for no instance', () => {
    expect(AVG_ALLOCATION([], 'job', 3)).toEqual({});
  });

  it('gives every item to a single instance', () => {
    expect(AVG_ALLOCATION(['host0'], 'job', 3)).toEqual({ host0: [0, 1, 2] });
  });

  it('leaves trailing instances empty when there are fewer items than instances', () => {
    expect(AVG_ALLOCATION(h3, 'job', 2)).toEqual({ host0: [0], host1: [1], host2: [] });
  });

  it('gives every instance an empty list for 0 items', () => {
    expect(AVG_ALLOCATION(h3, 'job', 0)).toEqual({ host0: [], host1: [], host2: [] });
  });

  it('splits evenly when the total is a multiple of the instance count', () => {
    expect(AVG_ALLOCATION(h3, 'job', 3)).toEqual({ host0: [0], host1: [1], host2: [2] });
    expect(AVG_ALLOCATION(h3, 'job', 9)).toEqual({ host0: [0, 1, 2], host1: [3, 4, 5], host2: [6, 7, 8] });
  });

  it('hands the remainder items out one each to the first instances', () => {
    expect(AVG_ALLOCATION(h3, 'job', 8)).toEqual({ host0: [0, 1, 6], host1: [2, 3, 7], host2: [4, 5] });
    expect(AVG_ALLOCATION(h3, 'job', 10)).toEqual({ host0: [0, 1, 2, 9], host1: [3, 4, 5], host2: [6, 7, 8] });
    expect(AVG_ALLOCATION(['a', 'b'], 'job', 5)).toEqual({ a: [0, 1, 4], b: [2, 3] });
  });

  it('follows the given order, not the ids', () => {
    expect(AVG_ALLOCATION(['z', 'a'], 'job', 3)).toEqual({ z: [0, 2], a: [1] });
  });

  it('does not depend on the job name', () => {
    expect(AVG_ALLOCATION(h3, 'polygenelubricants', 4)).toEqual(AVG_ALLOCATION(h3, 'other', 4));
  });

  it('keeps odd instance ids as own keys', () => {
    const r = AVG_ALLOCATION(['__proto__', 'constructor'], 'job', 2);
    expect(Object.keys(r)).toEqual(['__proto__', 'constructor']);
    expect(Object.getPrototypeOf(r)).toBe(Object.prototype);
    expect(r['__proto__']).toEqual([0]);
  });

  it('rejects a negative or fractional total and duplicate ids', () => {
    expect(thrown(() => AVG_ALLOCATION(h3, 'job', -1)).code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(thrown(() => AVG_ALLOCATION(h3, 'job', 1.5)).message).toMatch(/shardingTotalCount of job 'job'/);
    expect(thrown(() => AVG_ALLOCATION(['a', 'a'], 'job', 2)).message).toMatch(/instance 'a' appears twice/);
  });
});

describe('ODEVITY', () => {
  // "1": hash 49, odd -> list kept. "0": hash 48, even -> list reversed.
  it('keeps the order for an odd hash', () => {
    expect(javaStringHashCode('1') % 2).toBe(1);
    expect(ODEVITY(h3, '1', 2)).toEqual({ host0: [0], host1: [1], host2: [] });
  });

  it('reverses the order for an even hash', () => {
    expect(javaStringHashCode('0') % 2).toBe(0);
    expect(ODEVITY(h3, '0', 2)).toEqual({ host2: [0], host1: [1], host0: [] });
    expect(ODEVITY(h3, '0', 8)).toEqual({ host2: [0, 1, 6], host1: [2, 3, 7], host0: [4, 5] });
  });

  it('treats a negative odd hash as odd (Java remainder -1 is not 0)', () => {
    // "billing": -109829509; Java -109829509 % 2 == -1.
    expect(javaStringHashCode('billing')).toBe(-109829509);
    expect(ODEVITY(h3, 'billing', 4)).toEqual({ host0: [0, 3], host1: [1], host2: [2] });
  });

  it('reverses for a negative even hash', () => {
    // "test_job": -1146456432, even.
    expect(javaStringHashCode('test_job')).toBe(-1146456432);
    expect(ODEVITY(h3, 'test_job', 4)).toEqual({ host2: [0, 3], host1: [1], host0: [2] });
  });

  it('reverses for the MIN_VALUE name (even)', () => {
    expect(ODEVITY(h3, 'polygenelubricants', 3)).toEqual({ host2: [0], host1: [1], host0: [2] });
  });

  it('handles one and zero instances and does not mutate its input', () => {
    const input = [...h3];
    ODEVITY(input, '0', 3);
    expect(input).toEqual([...h3]);
    expect(ODEVITY(['host0'], '0', 2)).toEqual({ host0: [0, 1] });
    expect(ODEVITY([], '0', 2)).toEqual({});
  });
});

describe('ROUND_ROBIN', () => {
  // offset = |hash| % n; new[i] = old[(i + offset) % n].
  it('keeps the order when the offset is 0', () => {
    expect(Math.abs(javaStringHashCode('0')) % 3).toBe(0); // 48 % 3
    expect(ROUND_ROBIN(h3, '0', 2)).toEqual({ host0: [0], host1: [1], host2: [] });
  });

  it('rotates by 1 and by 2', () => {
    expect(Math.abs(javaStringHashCode('1')) % 3).toBe(1); // 49 % 3
    expect(ROUND_ROBIN(h3, '1', 2)).toEqual({ host1: [0], host2: [1], host0: [] });
    expect(Math.abs(javaStringHashCode('2')) % 3).toBe(2); // 50 % 3
    expect(ROUND_ROBIN(h3, '2', 2)).toEqual({ host2: [0], host0: [1], host1: [] });
    expect(ROUND_ROBIN(h3, '2', 8)).toEqual({ host2: [0, 1, 6], host0: [2, 3, 7], host1: [4, 5] });
  });

  it('uses the absolute value of a negative hash', () => {
    // "billing": |-109829509| % 3 == 1.
    expect(Math.abs(javaStringHashCode('billing')) % 3).toBe(1);
    expect(ROUND_ROBIN(h3, 'billing', 3)).toEqual({ host1: [0], host2: [1], host0: [2] });
    // "java_simple_job": |-1876478483| % 3 == 2.
    expect(Math.abs(javaStringHashCode('java_simple_job')) % 3).toBe(2);
    expect(ROUND_ROBIN(h3, 'java_simple_job', 3)).toEqual({ host2: [0], host0: [1], host1: [2] });
  });

  it('rotates the MIN_VALUE name by the floor modulo where Java would throw', () => {
    // Java: Math.abs(MIN_VALUE) % 3 == -2, then list.get(-2) throws. Here (-2 + 3) % 3 == 1.
    expect(javaStringHashCode('polygenelubricants') % 3).toBe(-2);
    expect(ROUND_ROBIN(h3, 'polygenelubricants', 3)).toEqual({ host1: [0], host2: [1], host0: [2] });
    // MIN_VALUE % 2 == 0: unchanged, as in Java.
    expect(ROUND_ROBIN(['a', 'b'], 'polygenelubricants', 2)).toEqual({ a: [0], b: [1] });
    // MIN_VALUE % 5 == -3 -> offset 2.
    expect(ROUND_ROBIN(['a', 'b', 'c', 'd', 'e'], 'polygenelubricants', 5)).toEqual({
      c: [0],
      d: [1],
      e: [2],
      a: [3],
      b: [4],
    });
  });

  it('handles one and zero instances', () => {
    expect(ROUND_ROBIN(['host0'], '1', 2)).toEqual({ host0: [0, 1] });
    expect(ROUND_ROBIN([], '1', 2)).toEqual({}); // Java would divide by zero
  });
});

describe('strategy registry', () => {
  const mine: ShardingStrategy = (ids, _job, total) => {
    const out: Record<string, number[]> = {};
    ids.forEach((id) => (out[id] = []));
    for (let i = 0; i < total; i++) out[ids[ids.length - 1 - (i % ids.length)]].push(i);
    return out;
  };

  afterEach(() => {
    for (const name of listShardingStrategies()) {
      if (!(name in shardingStrategies)) unregisterShardingStrategy(name);
    }
  });

  it('is frozen and resolves the built-ins, and the default for an absent name', () => {
    expect(Object.isFrozen(shardingStrategies)).toBe(true);
    expect(getShardingStrategy('ODEVITY')).toBe(ODEVITY);
    expect(getShardingStrategy(undefined)).toBe(AVG_ALLOCATION);
    expect(getShardingStrategy('')).toBe(AVG_ALLOCATION);
    expect(DEFAULT_SHARDING_STRATEGY).toBe('AVG_ALLOCATION');
  });

  it('lists, resolves and runs a custom strategy', () => {
    registerShardingStrategy('REVERSE_RR', mine);
    expect(listShardingStrategies()).toEqual(['AVG_ALLOCATION', 'ODEVITY', 'ROUND_ROBIN', 'REVERSE_RR']);
    expect(getShardingStrategy('REVERSE_RR')).toBe(mine);
    expect(runShardingStrategy('REVERSE_RR', ['a', 'b'], 'job', 3)).toEqual({ a: [1], b: [0, 2] });
    expect(unregisterShardingStrategy('REVERSE_RR')).toBe(true);
    expect(unregisterShardingStrategy('REVERSE_RR')).toBe(false);
  });

  it('lets a custom registration be replaced', () => {
    registerShardingStrategy('mine', mine);
    const other: ShardingStrategy = (ids, job, total) => AVG_ALLOCATION(ids, job, total);
    registerShardingStrategy('mine', other);
    expect(getShardingStrategy('mine')).toBe(other);
  });

  it('refuses bad names, built-in names and non-functions', () => {
    for (const bad of ['', '1abc', 'has-dash', 'has space', '_x']) {
      const err = thrown(() => registerShardingStrategy(bad, mine));
      expect(err.code).toBe(ErrorCodes.INVALID_CONFIG);
      expect(err.message).toMatch(/must start with a letter/);
    }
    for (const builtIn of ['AVG_ALLOCATION', 'round_robin', 'Odevity']) {
      const err = thrown(() => registerShardingStrategy(builtIn, mine));
      expect(err.code).toBe(ErrorCodes.INVALID_CONFIG);
      expect(err.message).toMatch(/built-in/);
    }
    expect(thrown(() => registerShardingStrategy('x', 42 as unknown as ShardingStrategy)).message).toMatch(/expected a function/);
    expect(thrown(() => unregisterShardingStrategy('ODEVITY')).code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(getShardingStrategy('AVG_ALLOCATION')).toBe(AVG_ALLOCATION);
  });

  it('names the known strategies when a name is unknown (case-sensitive)', () => {
    registerShardingStrategy('mine', mine);
    const err = thrown(() => getShardingStrategy('avg_allocation'));
    expect(err.code).toBe(ErrorCodes.UNKNOWN_STRATEGY);
    expect(err.message).toContain("'avg_allocation'");
    expect(err.message).toContain('AVG_ALLOCATION, ODEVITY, ROUND_ROBIN, mine');
    expect(thrown(() => runShardingStrategy('nope', ['a'], 'job', 1)).code).toBe(ErrorCodes.UNKNOWN_STRATEGY);
  });
});

describe('runShardingStrategy', () => {
  afterEach(() => {
    unregisterShardingStrategy('BUGGY');
  });

  function runBuggy(result: unknown, ids: string[] = ['a', 'b'], total = 3): ShardcronError {
    registerShardingStrategy('BUGGY', () => result as Record<string, number[]>);
    const err = thrown(() => runShardingStrategy('BUGGY', ids, 'myJob', total));
    expect(err.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(err.message).toContain("Sharding strategy 'BUGGY'");
    expect(err.message).toContain("job 'myJob'");
    return err;
  }

  it('runs the built-ins and matches their direct results', () => {
    expect(runShardingStrategy('AVG_ALLOCATION', h3, 'job', 8)).toEqual(AVG_ALLOCATION(h3, 'job', 8));
    expect(runShardingStrategy('ODEVITY', h3, '0', 8)).toEqual(ODEVITY(h3, '0', 8));
    expect(runShardingStrategy('ROUND_ROBIN', h3, 'polygenelubricants', 8)).toEqual(ROUND_ROBIN(h3, 'polygenelubricants', 8));
  });

  it('returns {} for no instance without calling the strategy', () => {
    const fn = jest.fn<Record<string, number[]>, Parameters<ShardingStrategy>>(() => ({}));
    registerShardingStrategy('BUGGY', fn);
    expect(runShardingStrategy('BUGGY', [], 'job', 3)).toEqual({});
    expect(fn).not.toHaveBeenCalled();
  });

  it('adds an empty list for an instance the strategy left out', () => {
    registerShardingStrategy('BUGGY', () => ({ b: [0, 1] }));
    expect(runShardingStrategy('BUGGY', ['a', 'b'], 'job', 2)).toEqual({ a: [], b: [0, 1] });
  });

  it('passes a frozen copy, so a mutating strategy cannot reorder the caller list', () => {
    const ids = ['a', 'b'];
    registerShardingStrategy('BUGGY', (list) => {
      (list as string[]).reverse();
      return { a: [0], b: [1] };
    });
    expect(() => runShardingStrategy('BUGGY', ids, 'job', 2)).toThrow(/threw while sharding job 'job'/);
    expect(ids).toEqual(['a', 'b']);
  });

  it('reports an unassigned item', () => {
    expect(runBuggy({ a: [0], b: [1] }).message).toContain('item 2 is not assigned');
  });

  it('reports an item assigned twice', () => {
    expect(runBuggy({ a: [0, 1], b: [1, 2] }).message).toContain("item 1 is assigned twice ('a' and 'b')");
    expect(runBuggy({ a: [0, 0, 1, 2], b: [] }).message).toContain("item 0 is assigned twice ('a' and 'a')");
  });

  it('reports an unknown instance', () => {
    expect(runBuggy({ a: [0, 1], c: [2] }).message).toContain("'c', which is not one of the given instances");
  });

  it('reports items out of range or not integers', () => {
    expect(runBuggy({ a: [0, 1, 2], b: [3] }).message).toContain("'b' got item 3, which is not an integer in 0..2");
    expect(runBuggy({ a: [0, 1, 2], b: [-1] }).message).toContain('got item -1');
    expect(runBuggy({ a: [0, 1, 2.5], b: [2] }).message).toContain('got item 2.5');
    expect(runBuggy({ a: [0, 1, '2'], b: [] }).message).toContain('got item 2,');
  });

  it('reports a result of the wrong shape', () => {
    expect(runBuggy(null).message).toContain('returned null');
    expect(runBuggy([[0, 1, 2]]).message).toContain('returned an array');
    expect(runBuggy(new Map([['a', [0, 1, 2]]])).message).toContain('returned a Map');
    expect(runBuggy({ a: 0, b: [1, 2] }).message).toContain("the items of 'a' are not an array");
  });

  it('lists the problems in details and caps them in the message', () => {
    const err = runBuggy({ a: [] }, ['a', 'b'], 8);
    expect(err.details.problems).toHaveLength(8);
    expect(err.message).toContain('and 3 more');
  });

  it('wraps an error thrown by the strategy', () => {
    const boom = new Error('boom');
    registerShardingStrategy('BUGGY', () => {
      throw boom;
    });
    const err = thrown(() => runShardingStrategy('BUGGY', ['a'], 'job', 1));
    expect(err.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(err.message).toContain("Sharding strategy 'BUGGY' threw while sharding job 'job'");
    expect(err.message).toContain('boom');
    expect(err.cause).toBe(boom);
  });

  it('rejects bad input before calling the strategy', () => {
    expect(thrown(() => runShardingStrategy('AVG_ALLOCATION', ['a', 'a'], 'job', 2)).message).toMatch(/appears twice/);
    expect(thrown(() => runShardingStrategy('AVG_ALLOCATION', ['a'], 'job', NaN)).message).toMatch(/non-negative integer/);
  });
});

describe('sortInstancesForSharding', () => {
  it('sorts IPv4 numerically, then IPv6 and hostnames as strings, then by instanceId', () => {
    const input = [
      { instanceId: 'host-b@-@1', ip: 'host-b' },
      { instanceId: '::1@-@1', ip: '::1' },
      { instanceId: '10.0.0.10@-@1', ip: '10.0.0.10' },
      { instanceId: '10.0.0.9@-@2', ip: '10.0.0.9' },
      { instanceId: '10.0.0.9@-@10', ip: '10.0.0.9' },
      { instanceId: '9.255.255.255@-@1', ip: '9.255.255.255' },
      { instanceId: '192.168.1.2@-@1', ip: '192.168.1.2' },
      { instanceId: 'fe80::1@-@1', ip: 'fe80::1' },
      { instanceId: 'host-a@-@1', ip: 'host-a' },
    ];
    const copy = input.slice();
    expect(sortInstancesForSharding(input).map((i) => i.instanceId)).toEqual([
      '9.255.255.255@-@1',
      '10.0.0.9@-@10', // same IP: by instanceId as a string ("1" < "2")
      '10.0.0.9@-@2',
      '10.0.0.10@-@1',
      '192.168.1.2@-@1',
      '::1@-@1',
      'fe80::1@-@1',
      'host-a@-@1',
      'host-b@-@1',
    ]);
    expect(input).toEqual(copy);
  });

  it('treats malformed dotted quads as names and keeps extra fields', () => {
    const sorted = sortInstancesForSharding([
      { instanceId: 'x', ip: '256.0.0.1', pid: 1 },
      { instanceId: 'y', ip: '010.0.0.1', pid: 2 },
      { instanceId: 'z', ip: '255.255.255.255', pid: 3 },
    ]);
    expect(sorted.map((i) => i.pid)).toEqual([3, 2, 1]);
  });

  it('returns [] for []', () => {
    expect(sortInstancesForSharding([])).toEqual([]);
  });
});
