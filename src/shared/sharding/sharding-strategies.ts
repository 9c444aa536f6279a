/**
 * Sharding strategies: pure functions that split a job's items 0..total-1 over worker instances.
 *
 * The three built-ins reproduce ElasticJob-Lite 3.x's strategies result for result, so a job moved
 * from ElasticJob keeps its item placement: AVG_ALLOCATION (AverageAllocationJobShardingStrategy),
 * ODEVITY (OdevitySortByNameJobShardingStrategy) and ROUND_ROBIN (RotateServerByNameJobShardingStrategy).
 * Custom strategies are registered by name; {@link runShardingStrategy} checks what they return.
 * No I/O here: the leader sorts live instances with {@link sortInstancesForSharding} and passes the ids in.
 */
import { ErrorCodes, ShardcronError } from '../errors';

/**
 * A sharding strategy. Applied to `instanceIds` in the order given (callers sort them first with
 * {@link sortInstancesForSharding}); returns the items of each instance. Built-ins return a key for
 * every instance, possibly with an empty array, and `{}` when there is no instance.
 * Must not mutate `instanceIds`.
 */
export type ShardingStrategy = (instanceIds: readonly string[], jobName: string, total: number) => Record<string, number[]>;

/** Names of the built-in strategies, as ElasticJob 3.x spells its strategy types. */
export type BuiltInShardingStrategyName = 'AVG_ALLOCATION' | 'ODEVITY' | 'ROUND_ROBIN';

/** The strategy used when a job names none (ElasticJob's default as well). */
export const DEFAULT_SHARDING_STRATEGY: BuiltInShardingStrategyName = 'AVG_ALLOCATION';

/** Pattern a custom strategy name must match. */
export const SHARDING_STRATEGY_NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_]*$/;

/**
 * Java's `String.hashCode()`: `h = 31 * h + c` over the UTF-16 code units, with 32-bit signed
 * overflow. ODEVITY and ROUND_ROBIN depend on it, so it must match the JVM bit for bit
 * (e.g. `"hello"` → 99162322, `"polygenelubricants"` → -2147483648).
 */
export function javaStringHashCode(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) {
    // Math.imul and `| 0` give exactly Java's int wrap-around; plain `*` would lose bits past 2^53.
    h = (Math.imul(31, h) + s.charCodeAt(i)) | 0;
  }
  return h;
}

/**
 * Rejects inputs ElasticJob never passes (its config requires a positive total and its instance
 * ids are unique): a duplicate id would silently swallow items, since a map keeps one entry per id.
 */
function checkInputs(instanceIds: readonly string[], jobName: string, total: number): void {
  if (!Number.isSafeInteger(total) || total < 0) {
    throw new ShardcronError(
      ErrorCodes.INVALID_CONFIG,
      `shardingTotalCount of job '${jobName}' must be a non-negative integer, got ${String(total)}`,
      { job: jobName, field: 'shardingTotalCount', value: total },
    );
  }
  const seen = new Set<string>();
  for (const id of instanceIds) {
    if (seen.has(id)) {
      throw new ShardcronError(
        ErrorCodes.INVALID_CONFIG,
        `instance '${id}' appears twice in the instances to shard job '${jobName}' over; instance ids must be unique`,
        { job: jobName, instanceId: id },
      );
    }
    seen.add(id);
  }
}

/**
 * Builds the result with Object.fromEntries so that every id, even `__proto__`, becomes an own
 * property. Note: as for any JS object, integer-like ids enumerate first in numeric order.
 */
function toRecord(entries: Array<[string, number[]]>): Record<string, number[]> {
  return Object.fromEntries(entries) as Record<string, number[]>;
}

/**
 * AVG_ALLOCATION, ElasticJob's AverageAllocationJobShardingStrategy: with n instances and
 * per = floor(total / n), instance k gets items k*per .. k*per+per-1; the remainder items
 * n*per .. total-1 then go one each to the first instances, in order.
 * 3 instances, 8 items: [0,1,6], [2,3,7], [4,5]. 3 instances, 2 items: [0], [1], [].
 */
function averageAllocation(instanceIds: readonly string[], jobName: string, total: number): Record<string, number[]> {
  checkInputs(instanceIds, jobName, total);
  const n = instanceIds.length;
  if (n === 0) return {};
  const per = Math.floor(total / n);
  const entries = instanceIds.map((id, k): [string, number[]] => {
    const items: number[] = [];
    for (let i = k * per; i < (k + 1) * per; i++) items.push(i);
    return [id, items];
  });
  // The aliquant items are appended after the aliquot ones, exactly as ElasticJob builds its lists.
  const remainder = total % n;
  for (let k = 0; k < remainder; k++) entries[k][1].push(n * per + k);
  return toRecord(entries);
}

/**
 * ODEVITY, ElasticJob's OdevitySortByNameJobShardingStrategy: when the job name's Java hash is
 * even, the instance list is reversed, then AVG_ALLOCATION applies. Java's `%` keeps the sign
 * of the dividend, so a negative odd hash gives -1 (odd: no reversal) and JS's `%` agrees.
 *
 * Divergence: ElasticJob reverses the caller's list in place (Collections.reverse); this works on
 * a copy, so `instanceIds` is never mutated.
 */
function odevity(instanceIds: readonly string[], jobName: string, total: number): Record<string, number[]> {
  checkInputs(instanceIds, jobName, total);
  const even = javaStringHashCode(jobName) % 2 === 0; // -0 === 0, so MIN_VALUE counts as even, as in Java
  return averageAllocation(even ? instanceIds.slice().reverse() : instanceIds, jobName, total);
}

/**
 * ROUND_ROBIN, ElasticJob's RotateServerByNameJobShardingStrategy: offset = Math.abs(hash) % n
 * with Java semantics; a non-zero offset rotates the list so that new[i] = old[(i + offset) % n];
 * then AVG_ALLOCATION applies.
 *
 * Deliberate divergences:
 * - Java's Math.abs(Integer.MIN_VALUE) is still MIN_VALUE, so for a name hashing to MIN_VALUE
 *   (e.g. `"polygenelubricants"`) the offset can be negative and ElasticJob throws
 *   IndexOutOfBoundsException from `list.get(negative)`. Here the offset is taken modulo n
 *   with floor semantics, `(offset + n) % n`, so such a job still gets a valid rotation.
 * - With no instance ElasticJob divides by zero; here the result is `{}` like the other strategies.
 */
function roundRobin(instanceIds: readonly string[], jobName: string, total: number): Record<string, number[]> {
  checkInputs(instanceIds, jobName, total);
  const n = instanceIds.length;
  if (n === 0) return {};
  // No JS Math.abs here: Java's abs overflows on MIN_VALUE and the result must follow it.
  const hash = javaStringHashCode(jobName);
  const javaAbs = hash === -2147483648 ? hash : Math.abs(hash);
  const offset = ((javaAbs % n) + n) % n;
  if (offset === 0) return averageAllocation(instanceIds, jobName, total);
  const rotated = instanceIds.map((_, i) => instanceIds[(i + offset) % n]);
  return averageAllocation(rotated, jobName, total);
}

/** The built-in strategies, by their ElasticJob type names. Frozen. */
export const shardingStrategies: Readonly<Record<BuiltInShardingStrategyName, ShardingStrategy>> = Object.freeze({
  AVG_ALLOCATION: averageAllocation,
  ODEVITY: odevity,
  ROUND_ROBIN: roundRobin,
});

const builtInNames = Object.keys(shardingStrategies) as BuiltInShardingStrategyName[];
const customStrategies = new Map<string, ShardingStrategy>();

function isBuiltIn(name: string): name is BuiltInShardingStrategyName {
  return Object.prototype.hasOwnProperty.call(shardingStrategies, name);
}

/**
 * Registers a custom strategy under `name` (pattern {@link SHARDING_STRATEGY_NAME_PATTERN}), so
 * jobs can name it in `shardingStrategy`. Registering a name again replaces the earlier custom
 * strategy (a jobs module loaded twice must not fail). Throws ShardcronError INVALID_CONFIG for a
 * bad name, a non-function, or a name that is a built-in one in any letter case (a
 * `Round_Robin` next to `ROUND_ROBIN` would only confuse).
 */
export function registerShardingStrategy(name: string, fn: ShardingStrategy): void {
  if (typeof name !== 'string' || !SHARDING_STRATEGY_NAME_PATTERN.test(name)) {
    throw new ShardcronError(
      ErrorCodes.INVALID_CONFIG,
      `Invalid sharding strategy name ${JSON.stringify(name)}: it must start with a letter and contain only letters, digits and '_'`,
      { field: 'shardingStrategy', value: name },
    );
  }
  if (builtInNames.some((b) => b.toUpperCase() === name.toUpperCase())) {
    throw new ShardcronError(
      ErrorCodes.INVALID_CONFIG,
      `Cannot register sharding strategy '${name}': it is (or differs only in case from) a built-in strategy (${builtInNames.join(', ')}); choose another name`,
      { field: 'shardingStrategy', value: name },
    );
  }
  if (typeof fn !== 'function') {
    throw new ShardcronError(
      ErrorCodes.INVALID_CONFIG,
      `Cannot register sharding strategy '${name}': expected a function (instanceIds, jobName, total) => Record<instanceId, items[]>, got ${typeof fn}`,
      { field: 'shardingStrategy', value: name },
    );
  }
  customStrategies.set(name, fn);
}

/**
 * Removes a custom strategy; returns whether it was registered. Meant for tests. Throws
 * ShardcronError INVALID_CONFIG for a built-in name, which cannot be removed.
 */
export function unregisterShardingStrategy(name: string): boolean {
  if (isBuiltIn(name)) {
    throw new ShardcronError(ErrorCodes.INVALID_CONFIG, `Cannot unregister built-in sharding strategy '${name}'`, {
      field: 'shardingStrategy',
      value: name,
    });
  }
  return customStrategies.delete(name);
}

/** Names of every known strategy: the built-ins first, then custom ones in alphabetical order. */
export function listShardingStrategies(): string[] {
  return [...builtInNames, ...[...customStrategies.keys()].sort()];
}

/**
 * The strategy registered as `name` (names are case-sensitive, as ElasticJob's type lookup is).
 * An absent or empty name means {@link DEFAULT_SHARDING_STRATEGY}, as in ElasticJob.
 * Throws ShardcronError UNKNOWN_STRATEGY, listing the known names, for any other unknown name.
 */
export function getShardingStrategy(name?: string | null): ShardingStrategy {
  if (name === undefined || name === null || name === '') return shardingStrategies[DEFAULT_SHARDING_STRATEGY];
  if (isBuiltIn(name)) return shardingStrategies[name];
  const custom = customStrategies.get(name);
  if (custom) return custom;
  const known = listShardingStrategies();
  throw new ShardcronError(
    ErrorCodes.UNKNOWN_STRATEGY,
    `Unknown sharding strategy '${name}'. Known strategies: ${known.join(', ')}. Register a custom one with registerShardingStrategy() before starting the node`,
    { field: 'shardingStrategy', value: name, known },
  );
}

const MAX_LISTED_PROBLEMS = 5;

/** Lists everything wrong with a strategy's result; empty when it is a valid assignment. */
function findProblems(result: unknown, instanceIds: readonly string[], total: number): string[] {
  if (typeof result !== 'object' || result === null || Array.isArray(result) || result instanceof Map) {
    const kind = result === null ? 'null' : Array.isArray(result) ? 'an array' : result instanceof Map ? 'a Map' : typeof result;
    return [`it returned ${kind}, expected a plain object { [instanceId]: number[] }`];
  }
  const problems: string[] = [];
  const given = new Set(instanceIds);
  const owner = new Map<number, string>();
  for (const [id, items] of Object.entries(result as Record<string, unknown>)) {
    if (!given.has(id)) {
      problems.push(`it assigned items to '${id}', which is not one of the given instances`);
      continue;
    }
    if (!Array.isArray(items)) {
      problems.push(`the items of '${id}' are not an array`);
      continue;
    }
    for (const item of items as unknown[]) {
      if (typeof item !== 'number' || !Number.isInteger(item) || item < 0 || item >= total) {
        problems.push(`'${id}' got item ${String(item)}, which is not an integer in 0..${total - 1}`);
      } else if (owner.has(item)) {
        problems.push(`item ${item} is assigned twice ('${owner.get(item)}' and '${id}')`);
      } else {
        owner.set(item, id);
      }
    }
  }
  for (let item = 0; item < total; item++) {
    if (!owner.has(item)) problems.push(`item ${item} is not assigned`);
  }
  return problems;
}

/**
 * Runs the strategy registered as `name` and checks its result, since custom strategies can be
 * buggy: every item 0..total-1 must be assigned exactly once, only to the given instances.
 * Returns a fresh record with a key for every instance (an instance the strategy left out gets
 * `[]`, as ElasticJob treats it). With no instance it returns `{}` without calling the strategy:
 * ElasticJob never shards over an empty list, and strategies written for it may divide by zero.
 * Throws ShardcronError UNKNOWN_STRATEGY for an unknown name, and INVALID_CONFIG naming the
 * strategy, the job and the problems for bad input, a throwing strategy or an invalid result.
 */
export function runShardingStrategy(
  name: string,
  instanceIds: readonly string[],
  jobName: string,
  total: number,
): Record<string, number[]> {
  const strategy = getShardingStrategy(name);
  checkInputs(instanceIds, jobName, total);
  if (instanceIds.length === 0) return {};
  let result: unknown;
  try {
    // A frozen copy: a strategy that mutates its input must not reorder the caller's list.
    result = strategy(Object.freeze(instanceIds.slice()), jobName, total);
  } catch (err) {
    throw new ShardcronError(
      ErrorCodes.INVALID_CONFIG,
      `Sharding strategy '${name}' threw while sharding job '${jobName}' (${total} items over ${instanceIds.length} instances): ${err instanceof Error ? err.message : String(err)}`,
      { strategy: name, job: jobName },
      { cause: err },
    );
  }
  const problems = findProblems(result, instanceIds, total);
  if (problems.length > 0) {
    const shown = problems.slice(0, MAX_LISTED_PROBLEMS);
    const more = problems.length > shown.length ? `; and ${problems.length - shown.length} more` : '';
    throw new ShardcronError(
      ErrorCodes.INVALID_CONFIG,
      `Sharding strategy '${name}' returned an invalid assignment for job '${jobName}' (${total} items over ${instanceIds.length} instances): ${shown.join('; ')}${more}`,
      { strategy: name, job: jobName, problems },
    );
  }
  const valid = result as Record<string, number[]>;
  return toRecord(
    instanceIds.map((id): [string, number[]] => [id, Object.prototype.hasOwnProperty.call(valid, id) ? valid[id].slice() : []]),
  );
}

/** An instance as the leader knows it, for ordering before sharding. */
export interface ShardableInstance {
  instanceId: string;
  ip: string;
}

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;

/** Dotted-quad IPv4 as a number, or undefined for IPv6, hostnames and octets with leading zeros. */
function ipv4Value(ip: string): number | undefined {
  const m = IPV4.exec(ip);
  if (!m) return undefined;
  return ((Number(m[1]) * 256 + Number(m[2])) * 256 + Number(m[3])) * 256 + Number(m[4]);
}

/** Code-unit comparison: deterministic on every machine, unlike localeCompare. */
function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Returns the instances in the order strategies are applied to (DESIGN.md): IPv4 addresses
 * numerically, octet by octet (so 10.0.0.9 precedes 10.0.0.10); then IPv6 addresses and hostnames,
 * compared as strings; ties broken by instanceId. ElasticJob shards in ZooKeeper's child order,
 * which is not stable across servers; a total order makes every leader compute the same
 * assignment. Does not mutate `instances`.
 */
export function sortInstancesForSharding<T extends ShardableInstance>(instances: readonly T[]): T[] {
  const keyed = instances.map((inst) => ({ inst, v4: ipv4Value(inst.ip) }));
  keyed.sort((a, b) => {
    if (a.v4 !== undefined && b.v4 !== undefined) {
      if (a.v4 !== b.v4) return a.v4 - b.v4;
    } else if (a.v4 !== undefined) {
      return -1;
    } else if (b.v4 !== undefined) {
      return 1;
    } else {
      const byIp = compareStrings(a.inst.ip, b.inst.ip);
      if (byIp !== 0) return byIp;
    }
    return compareStrings(a.inst.instanceId, b.inst.instanceId);
  });
  return keyed.map((k) => k.inst);
}
