import { ErrorCodes, ShardcronError } from '../../src/shared/errors';
import { registerShardingStrategy, unregisterShardingStrategy } from '../../src/shared/sharding/sharding-strategies';
import {
  assignmentStillValid,
  changedItems,
  targetsFor,
  computeAssignment,
  planAssignment,
  itemOwners,
  sharedAssignment,
  type Assignment,
  type AssignmentInput,
} from '../../src/shared/sharding/assignment';

/**
 * Three instances given in an order that is wrong twice over: as strings "10.0.0.10" < "10.0.0.9",
 * and the two instances on 10.0.0.9 must then be ordered by id. The sharding order is m, z, a.
 */
const INSTANCES = [
  { instanceId: 'a', ip: '10.0.0.10' },
  { instanceId: 'z', ip: '10.0.0.9' },
  { instanceId: 'm', ip: '10.0.0.9' },
] as const;

function input(overrides: Partial<AssignmentInput> = {}): AssignmentInput {
  return { job: 'billing', total: 8, strategy: 'AVG_ALLOCATION', instances: INSTANCES, running: new Map(), ...overrides };
}

describe('itemOwners', () => {
  it('maps every assigned item to its instance', () => {
    const owners = itemOwners({ a: [0, 2], b: [1], c: [] });
    expect([...owners].sort(([x], [y]) => x - y)).toEqual([[0, 'a'], [1, 'b'], [2, 'a']]);
  });

  it('is empty for an empty assignment', () => {
    expect(itemOwners({}).size).toBe(0);
  });
});

describe('assignmentStillValid', () => {
  const assignment: Assignment = { a: [0, 1], b: [2] };
  const live = new Set(['a', 'b']);

  it('accepts an assignment that covers every item with live instances', () => {
    expect(assignmentStillValid(assignment, 3, live)).toBe(true);
    expect(assignmentStillValid({}, 0, new Set())).toBe(true);
  });

  it('rejects an assignment missing an item', () => {
    expect(assignmentStillValid({ a: [0], b: [2] }, 3, live)).toBe(false);
    // As many items as the total, but one of them out of range in place of the missing one.
    expect(assignmentStillValid({ a: [0, 1], b: [3] }, 3, live)).toBe(false);
  });

  it('rejects an assignment whose owner is no longer live', () => {
    expect(assignmentStillValid(assignment, 3, new Set(['a']))).toBe(false);
    expect(assignmentStillValid(assignment, 3, new Set())).toBe(false);
  });

  it('rejects an assignment naming a vanished instance even when it held no item', () => {
    // AVG_ALLOCATION gives the third of three instances nothing when there are two items; the
    // dispatcher looks up the queue of every instance named, so a vanished one must force a reshard.
    expect(assignmentStillValid({ a: [0], b: [1], c: [] }, 2, live)).toBe(false);
    expect(assignmentStillValid({ a: [0], b: [1], c: [] }, 2, new Set(['a', 'b', 'c']))).toBe(true);
  });

  it('rejects an assignment made for another total', () => {
    expect(assignmentStillValid(assignment, 2, live)).toBe(false); // item 2 no longer exists
    expect(assignmentStillValid(assignment, 4, live)).toBe(false); // item 3 has no owner
  });
});

describe('computeAssignment', () => {
  afterEach(() => {
    unregisterShardingStrategy('RECORDING');
  });

  it('applies the strategy to the instances sorted by IP numerically, then by id', () => {
    const seen: string[][] = [];
    registerShardingStrategy('RECORDING', (ids, _job, total) => {
      seen.push([...ids]);
      return { [ids[0]]: Array.from({ length: total }, (_, i) => i) };
    });
    expect(computeAssignment(input({ strategy: 'RECORDING', total: 3 }))).toEqual({ m: [0, 1, 2], z: [], a: [] });
    expect(seen).toEqual([['m', 'z', 'a']]);
  });

  it('gives the built-in strategies the same sorted order', () => {
    // AVG_ALLOCATION over m, z, a: 8 items -> [0,1,6], [2,3,7], [4,5].
    expect(computeAssignment(input())).toEqual({ m: [0, 1, 6], z: [2, 3, 7], a: [4, 5] });
    // "hello" has an even Java hash: ODEVITY reverses the list to a, z, m.
    expect(computeAssignment(input({ job: 'hello', strategy: 'ODEVITY' }))).toEqual({ a: [0, 1, 6], z: [2, 3, 7], m: [4, 5] });
    // |hash("hello")| % 3 = 1: ROUND_ROBIN rotates the list to z, a, m.
    expect(computeAssignment(input({ job: 'hello', strategy: 'ROUND_ROBIN' }))).toEqual({ z: [0, 1, 6], a: [2, 3, 7], m: [4, 5] });
  });

  it('does not depend on the order the instances are given in, nor mutate them', () => {
    const given = [...INSTANCES];
    const reversed = [...INSTANCES].reverse();
    expect(computeAssignment(input({ instances: reversed }))).toEqual(computeAssignment(input({ instances: given })));
    expect(given).toEqual([...INSTANCES]);
  });

  it('keeps running items on their holder and places the rest by the strategy', () => {
    const running = new Map([[0, 'a'], [7, 'm']]);
    expect(computeAssignment(input({ running }))).toEqual({ m: [1, 6, 7], z: [2, 3], a: [0, 4, 5] });
  });

  it('keeps an instance whose items all stay elsewhere, with no items', () => {
    const running = new Map([[4, 'm'], [5, 'm']]);
    expect(computeAssignment(input({ running }))).toEqual({ m: [0, 1, 4, 5, 6], z: [2, 3, 7], a: [] });
  });

  it('keeps a running item on a live holder the strategy did not use', () => {
    const running = new Map([[3, 'draining']]);
    expect(computeAssignment(input({ running }))).toEqual({ m: [0, 1, 6], z: [2, 7], a: [4, 5], draining: [3] });
  });

  it('names the items it held away from where the strategy puts them, and none running where it puts them', () => {
    // Items 0 and 7 run elsewhere than AVG_ALLOCATION puts them (m and z); item 2 runs on z, its place.
    const running = new Map([[7, 'm'], [2, 'z'], [0, 'a']]);
    expect(planAssignment(input({ running }))).toEqual({ assignment: { m: [1, 6, 7], z: [2, 3], a: [0, 4, 5] }, held: [0, 7] });
    expect(planAssignment(input()).held).toEqual([]);
  });

  it('ignores running items beyond the total', () => {
    expect(computeAssignment(input({ total: 2, running: new Map([[5, 'a']]) }))).toEqual({ m: [0], z: [1], a: [] });
  });

  it('returns {} when there is no instance', () => {
    expect(computeAssignment(input({ instances: [] }))).toEqual({});
  });

  it('throws UNKNOWN_STRATEGY for a strategy nobody registered', () => {
    let error: unknown;
    try {
      computeAssignment(input({ strategy: 'NO_SUCH_STRATEGY' }));
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ShardcronError);
    expect((error as ShardcronError).code).toBe(ErrorCodes.UNKNOWN_STRATEGY);
    expect((error as ShardcronError).message).toContain("'NO_SUCH_STRATEGY'");
  });
});

describe('sharedAssignment', () => {
  it('returns one frozen object for equal assignments, equal to what it was given', () => {
    const a = sharedAssignment({ 'worker-1': [0, 1], 'worker-2': [2] });
    const b = sharedAssignment({ 'worker-1': [0, 1], 'worker-2': [2] });
    expect(b).toBe(a);
    expect(a).toEqual({ 'worker-1': [0, 1], 'worker-2': [2] });
    expect(Object.isFrozen(a) && Object.isFrozen(a['worker-1'])).toBe(true);
    expect(sharedAssignment({ 'worker-1': [0], 'worker-2': [1, 2] })).not.toBe(a);
  });

  it('leaves a large assignment as it is (rarely shared, and its key would cost more than it saves)', () => {
    const items = Array.from({ length: 500 }, (_, i) => i);
    const large = { 'worker-1': items };
    expect(sharedAssignment(large)).toBe(large);
  });
});

describe('changedItems', () => {
  it('reports every item on the first assignment', () => {
    expect(changedItems(undefined, { b: [3, 1], a: [2, 0] })).toEqual([0, 1, 2, 3]);
  });

  it('reports nothing when every item keeps its owner, whatever the order', () => {
    expect(changedItems({ a: [0, 1], b: [2] }, { b: [2], a: [1, 0], c: [] })).toEqual([]);
  });

  it('reports items that moved to another instance', () => {
    expect(changedItems({ a: [0, 1, 2], b: [3, 4] }, { a: [0, 1], b: [3], c: [2, 4] })).toEqual([2, 4]);
  });

  it('reports items that no longer exist', () => {
    expect(changedItems({ a: [0, 1], b: [2, 3] }, { a: [0], b: [1] })).toEqual([1, 2, 3]);
  });

  it('reports items that are new', () => {
    expect(changedItems({ a: [0] }, { a: [0, 1] })).toEqual([1]);
  });
});

describe('targetsFor', () => {
  const instances = [
    { instanceId: 'p3', ip: '10.0.0.3' },
    { instanceId: 'p1', ip: '10.0.0.1' },
  ];

  it('sends each item where the strategy puts it over the instances left: where its next fires run', () => {
    // ElasticJob's AVG_ALLOCATION of 9 items over p1, p3 (sorted by IP): p1 0-3 and 8, p3 4-7.
    const targets = targetsFor({ job: 'nine', total: 9, strategy: 'AVG_ALLOCATION', instances }, [3, 4, 5]);
    expect([...targets]).toEqual([[3, 'p1'], [4, 'p3'], [5, 'p3']]);
    const next = computeAssignment({ job: 'nine', total: 9, strategy: 'AVG_ALLOCATION', instances, running: new Map() });
    for (const [item, target] of targets) expect(next[target]).toContain(item);
  });

  it('spreads items beyond the total by number, and has nowhere to send anything without instances', () => {
    expect([...targetsFor({ job: 'j', total: 2, strategy: 'AVG_ALLOCATION', instances }, [2, 3])]).toEqual([[2, 'p1'], [3, 'p3']]);
    expect(targetsFor({ job: 'j', total: 2, strategy: 'AVG_ALLOCATION', instances: [] }, [0]).size).toBe(0);
  });
});
