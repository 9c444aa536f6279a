import { SharedValues } from '../intern';
import { runShardingStrategy, sortInstancesForSharding } from './sharding-strategies';

/** instanceId -> the items it runs. */
export type Assignment = Record<string, number[]>;

/** item -> instanceId, for every assigned item. */
export function itemOwners(assignment: Assignment): Map<number, string> {
  const owners = new Map<number, string>();
  for (const [instanceId, items] of Object.entries(assignment)) {
    for (const item of items) owners.set(item, instanceId);
  }
  return owners;
}

/**
 * True when `assignment` still covers items 0..total-1 with live instances only. Checked at every
 * fire, so an assignment naming a vanished instance is recomputed (the reconcile of DESIGN.md flow 5,
 * done continuously instead of every few minutes).
 */
export function assignmentStillValid(assignment: Assignment, total: number, live: ReadonlySet<string>): boolean {
  // Instances left with no item count too: the dispatcher looks up the queue of every instance named.
  for (const instanceId of Object.keys(assignment)) if (!live.has(instanceId)) return false;
  const owners = itemOwners(assignment);
  if (owners.size !== total) return false;
  for (let item = 0; item < total; item += 1) {
    const owner = owners.get(item);
    if (owner === undefined || !live.has(owner)) return false;
  }
  return true;
}

export interface AssignmentInput {
  job: string;
  total: number;
  strategy: string;
  /** Eligible instances (ready, on an enabled server), any order: sorted here. */
  instances: ReadonlyArray<{ instanceId: string; ip: string }>;
  /** Items running now and where (instance still live). They stay put until they finish. */
  running: ReadonlyMap<number, string>;
}

/**
 * The assignment for the next fire: the job's strategy over the sorted eligible instances, except
 * that an item still running keeps its instance, so the same item is never started elsewhere while
 * it runs (the worker's `running` node would refuse it anyway and record a misfire).
 */
export function computeAssignment(input: AssignmentInput): Assignment {
  return planAssignment(input).assignment;
}

/**
 * {@link computeAssignment}, and the items it `held`: left on the instance running them where the
 * strategy puts them elsewhere (sorted). While there are any, the reshard has not fully taken effect.
 */
export function planAssignment(input: AssignmentInput): { assignment: Assignment; held: number[] } {
  const sorted = sortInstancesForSharding(input.instances.map((i) => ({ instanceId: i.instanceId, ip: i.ip })));
  const base = runShardingStrategy(input.strategy, sorted.map((i) => i.instanceId), input.job, input.total);
  if (input.running.size === 0) return { assignment: base, held: [] };
  const result: Assignment = {};
  const held: number[] = [];
  for (const id of Object.keys(base)) result[id] = [];
  for (const [instanceId, items] of Object.entries(base)) {
    for (const item of items) {
      const holder = input.running.get(item) ?? instanceId;
      if (holder !== instanceId) held.push(item);
      (result[holder] ??= []).push(item);
    }
  }
  for (const items of Object.values(result)) items.sort((a, b) => a - b);
  return { assignment: result, held: held.sort((a, b) => a - b) };
}

/** Distinct assignments {@link sharedAssignment} remembers; longer keys are not shared. */
const sharedAssignments = new SharedValues<Assignment>(1024);
const SHARED_KEY_MAX = 512;

/**
 * One frozen object per distinct small assignment: a leader keeps each job's, and most of 100,000
 * one-item jobs on a few workers have the same one (`{"worker-1": [0]}`): an object and an array
 * of their own per job cost about 110 bytes. Assignments are never changed in place (a reshard
 * computes a new one), so sharing them is safe; freezing makes sure of it.
 */
export function sharedAssignment(assignment: Assignment): Assignment {
  let key = '';
  for (const instanceId in assignment) {
    key += `${instanceId}\u0000${assignment[instanceId].join(',')}\u0001`;
    if (key.length > SHARED_KEY_MAX) return assignment;
  }
  const known = sharedAssignments.get(key);
  if (known) return known;
  const frozen: Assignment = {};
  for (const instanceId in assignment) frozen[instanceId] = Object.freeze([...assignment[instanceId]]) as number[];
  return sharedAssignments.keep(key, Object.freeze(frozen));
}

/** Items whose owner differs between two assignments (or that exist in only one). */
export function changedItems(previous: Assignment | undefined, next: Assignment): number[] {
  const before = previous ? itemOwners(previous) : new Map<number, string>();
  const after = itemOwners(next);
  const changed = new Set<number>();
  for (const [item, owner] of after) if (before.get(item) !== owner) changed.add(item);
  for (const item of before.keys()) if (!after.has(item)) changed.add(item);
  return [...changed].sort((a, b) => a - b);
}

/**
 * The one rule for where work goes when its instance cannot run it (failover of a lost instance,
 * the move of a draining one, a reroute before the fire, a new leader's replay): each item to the
 * instance the job's strategy gives it over the instances that can take it, which is where the
 * job's next fires will run it. An item's stranded fires and its next fires so meet on one
 * instance, which runs them in fire order without asking ZooKeeper who holds the item. Items
 * beyond `total` (the count shrank meanwhile) are spread by number. Empty when no instance can take them.
 */
export function targetsFor(input: Omit<AssignmentInput, 'running'>, items: Iterable<number>): Map<number, string> {
  const targets = new Map<number, string>();
  if (input.instances.length === 0) return targets;
  const owners = itemOwners(computeAssignment({ ...input, running: new Map() }));
  const sorted = sortInstancesForSharding(input.instances.map((i) => ({ instanceId: i.instanceId, ip: i.ip })));
  for (const item of items) targets.set(item, owners.get(item) ?? sorted[item % sorted.length].instanceId);
  return targets;
}
