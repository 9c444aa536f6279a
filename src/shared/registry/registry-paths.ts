/**
 * Every ZooKeeper path of DESIGN.md's layout, and nothing else builds one. Paths are relative to the
 * namespace root: the ZooKeeper client is chrooted to `/{namespace}`, so `/.cluster/leader` here is
 * `/{namespace}/.cluster/leader` on the server. Every argument is validated before it becomes a path
 * segment, so a value like `../other` can never address a node outside its job.
 */
import { ConfigError, ErrorCodes } from '../errors';

/**
 * Job names. No leading dot, so a job can never collide with `/.cluster`; no '/', so a name is one
 * ZooKeeper node; at most 128 characters.
 */
export const JOB_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

/** Child names of election candidates: `n_` plus ZooKeeper's sequence counter (an int32, 10 digits). */
const CANDIDATE_PATTERN = /^n_(-?\d{1,10})$/;

/** Characters ZooKeeper refuses in a path (PathUtils.validatePath). */
const ZK_FORBIDDEN_CHARS = /[\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff]/;

const quote = (value: unknown): string => {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 140 ? `${text.slice(0, 140)}...` : text;
};

function invalidArgument(field: string, value: unknown, why: string): ConfigError {
  return new ConfigError(ErrorCodes.INVALID_CONFIG, 'Invalid ZooKeeper path argument', [{ field, message: `${quote(value)} ${why}` }], {
    argument: field,
  });
}

/** True when `name` is a valid job name ({@link JOB_NAME_PATTERN}). */
export function isValidJobName(name: unknown): name is string {
  return typeof name === 'string' && JOB_NAME_PATTERN.test(name);
}

/**
 * Throws a {@link ConfigError} (SHARDCRON_INVALID_CONFIG) naming `field` (default `name`, as in a job
 * definition) and the pattern unless `name` is a valid job name.
 */
export function assertJobName(name: unknown, field = 'name'): asserts name is string {
  if (isValidJobName(name)) return;
  throw new ConfigError(ErrorCodes.INVALID_CONFIG, 'Invalid job name', [
    {
      field,
      message: `${quote(name)} is not a valid job name: expected 1-128 characters from A-Z a-z 0-9 _ -, starting with a letter or digit (${JOB_NAME_PATTERN.source})`,
    },
  ]);
}

function jobSegment(job: unknown): string {
  assertJobName(job, 'job');
  return job;
}

function itemSegment(item: unknown): string {
  if (typeof item !== 'number' || !Number.isSafeInteger(item) || item < 0) {
    throw invalidArgument('item', item, 'is not a sharding item: expected a non-negative integer');
  }
  return String(item);
}

/** An ip, instanceId or requestId: any single ZooKeeper node name, since other tools may write them. */
function nodeNameSegment(field: string, value: unknown): string {
  if (typeof value !== 'string' || value === '') throw invalidArgument(field, value, 'is not a non-empty string');
  if (value.includes('/')) throw invalidArgument(field, value, 'contains "/"; expected a single ZooKeeper node name');
  if (value === '.' || value === '..') throw invalidArgument(field, value, 'is not a valid ZooKeeper node name');
  if (ZK_FORBIDDEN_CHARS.test(value)) throw invalidArgument(field, value, 'contains a character ZooKeeper refuses in a path');
  return value;
}

/** A job list's name: its content hash and its writer's session, as {@link jobListName} makes it. */
const JOB_LIST_PATTERN = /^[0-9a-f]{16}-[0-9A-Za-z]{1,32}$/;

function jobListSegment(list: unknown): string {
  if (typeof list !== 'string' || !JOB_LIST_PATTERN.test(list)) {
    throw invalidArgument('list', list, `is not a job list name: expected ${JOB_LIST_PATTERN.source}`);
  }
  return list;
}

function candidateSegment(nodeName: unknown): string {
  if (typeof nodeName !== 'string' || !CANDIDATE_PATTERN.test(nodeName)) {
    throw invalidArgument('nodeName', nodeName, 'is not an election candidate node name: expected n_ and its sequence number, e.g. n_0000000007');
  }
  return nodeName;
}

const CLUSTER = '/.cluster';
const sharding = (job: string, item: number, leaf: string) => `/${jobSegment(job)}/sharding/${itemSegment(item)}/${leaf}`;

/** Builders of every registry path (relative to the namespace root). Each validates its arguments. */
export const registryPaths = Object.freeze({
  /** `/.cluster`: namespace-wide nodes; the dot keeps it apart from job names. */
  clusterRoot: (): string => CLUSTER,
  /** `/.cluster/election`: parent of the scheduler candidates. */
  election: (): string => `${CLUSTER}/election`,
  /** `/.cluster/election/n_`: the path to create EPHEMERAL_SEQUENTIAL; ZooKeeper appends the sequence. */
  electionCandidatePrefix: (): string => `${CLUSTER}/election/n_`,
  /** `/.cluster/election/{nodeName}`, `nodeName` as returned by getChildren (`n_0000000007`). */
  electionCandidate: (nodeName: string): string => `${CLUSTER}/election/${candidateSegment(nodeName)}`,
  /** `/.cluster/leader`: EPHEMERAL `{instanceId, epoch}` of the current leader. */
  leader: (): string => `${CLUSTER}/leader`,
  /** `/.cluster/item-lock`: "lease" | "per-run", monitorExecution's lock for every worker of the namespace. */
  itemLock: (): string => `${CLUSTER}/item-lock`,
  /** `/.cluster/instances`: parent of the live worker instances. */
  instances: (): string => `${CLUSTER}/instances`,
  /**
   * `/.cluster/instances/{instanceId}`: EPHEMERAL, one per live worker incarnation: its
   * {@link InstanceEntry} (queue, state, and which job list it runs).
   */
  instance: (instanceId: string): string => `${CLUSTER}/instances/${nodeNameSegment('instanceId', instanceId)}`,
  /** `/.cluster/job-lists`: parent of the parts of the instances' job lists. */
  jobLists: (): string => `${CLUSTER}/job-lists`,
  /** `/.cluster/job-lists/{list}.{part}`: EPHEMERAL, job names one per line, written by the list's instance. */
  jobListPart: (list: string, part: number): string => `${CLUSTER}/job-lists/${jobListSegment(list)}.${itemSegment(part)}`,

  /** `/{job}`: the job root (data: job type). */
  job: (job: string): string => `/${jobSegment(job)}`,
  /** `/{job}/config`: JSON job config. */
  jobConfig: (job: string): string => `/${jobSegment(job)}/config`,
  /** `/{job}/servers`. */
  jobServers: (job: string): string => `/${jobSegment(job)}/servers`,
  /** `/{job}/servers/{ip}`: "ENABLED" | "DISABLED". */
  jobServer: (job: string, ip: string): string => `/${jobSegment(job)}/servers/${nodeNameSegment('ip', ip)}`,
  /**
   * `/{job}/instances`: where workers before the instance directory registered (one EPHEMERAL node
   * per job and worker); read only to tell such a worker is alive.
   */
  jobInstances: (job: string): string => `/${jobSegment(job)}/instances`,
  /** `/{job}/instances/{instanceId}`: an earlier version's per-job instance registration. */
  jobInstance: (job: string, instanceId: string): string =>
    `/${jobSegment(job)}/instances/${nodeNameSegment('instanceId', instanceId)}`,
  /** `/{job}/sharding`. */
  jobSharding: (job: string): string => `/${jobSegment(job)}/sharding`,
  /** `/{job}/sharding/{item}`. */
  shardingItem: (job: string, item: number): string => `/${jobSegment(job)}/sharding/${itemSegment(item)}`,
  /** `/{job}/sharding/{item}/instance`: the assigned instanceId. */
  shardingInstance: (job: string, item: number): string => sharding(job, item, 'instance'),
  /** `/{job}/sharding/{item}/running`: EPHEMERAL, while the item runs (monitorExecution). */
  shardingRunning: (job: string, item: number): string => sharding(job, item, 'running'),
  /** `/{job}/sharding/{item}/misfire`: run once more when the current run ends. */
  shardingMisfire: (job: string, item: number): string => sharding(job, item, 'misfire'),
  /** `/{job}/sharding/{item}/disabled`. */
  shardingDisabled: (job: string, item: number): string => sharding(job, item, 'disabled'),
  /** `/{job}/sharding/{item}/failover`: EPHEMERAL instanceId running a failed-over item. */
  shardingFailover: (job: string, item: number): string => sharding(job, item, 'failover'),

  /** `/{job}/leader`: nodes only the leader writes. */
  leaderRoot: (job: string): string => `/${jobSegment(job)}/leader`,
  /** `/{job}/leader/sharding/necessary`: reshard at the next fire. */
  leaderShardingNecessary: (job: string): string => `/${jobSegment(job)}/leader/sharding/necessary`,
  /** `/{job}/leader/failover/items`. */
  leaderFailoverItems: (job: string): string => `/${jobSegment(job)}/leader/failover/items`,
  /** `/{job}/leader/failover/items/{item}`: durable failover intent `{fireTime, from}`. */
  leaderFailoverItem: (job: string, item: number): string =>
    `/${jobSegment(job)}/leader/failover/items/${itemSegment(item)}`,
  /** `/{job}/leader/fire`: dispatch ledger `{fireTime, epoch, assignment}`. */
  leaderFire: (job: string): string => `/${jobSegment(job)}/leader/fire`,
  /** `/{job}/trigger`: parent of manual trigger requests. */
  triggers: (job: string): string => `/${jobSegment(job)}/trigger`,
  /** `/{job}/trigger/{requestId}`: one manual trigger request. */
  trigger: (job: string, requestId: string): string => `/${jobSegment(job)}/trigger/${nodeNameSegment('requestId', requestId)}`,
});

/** What a registry path addresses; `kind` is the name of the {@link registryPaths} builder that makes it. */
export type RegistryPath =
  | { kind: 'clusterRoot' }
  | { kind: 'election' }
  | { kind: 'electionCandidate'; nodeName: string; /** ZooKeeper's sequence number: the leader epoch. */ sequence: number }
  | { kind: 'leader' }
  | { kind: 'itemLock' }
  | { kind: 'instances' }
  | { kind: 'instance'; instanceId: string }
  | { kind: 'jobLists' }
  | { kind: 'jobListPart'; list: string; part: number }
  | { kind: 'job'; job: string }
  | { kind: 'jobConfig'; job: string }
  | { kind: 'jobServers'; job: string }
  | { kind: 'jobServer'; job: string; ip: string }
  | { kind: 'jobInstances'; job: string }
  | { kind: 'jobInstance'; job: string; instanceId: string }
  | { kind: 'jobSharding'; job: string }
  | { kind: 'shardingItem'; job: string; item: number }
  | { kind: 'shardingInstance'; job: string; item: number }
  | { kind: 'shardingRunning'; job: string; item: number }
  | { kind: 'shardingMisfire'; job: string; item: number }
  | { kind: 'shardingDisabled'; job: string; item: number }
  | { kind: 'shardingFailover'; job: string; item: number }
  | { kind: 'leaderRoot'; job: string }
  | { kind: 'leaderShardingNecessary'; job: string }
  | { kind: 'leaderFailoverItems'; job: string }
  | { kind: 'leaderFailoverItem'; job: string; item: number }
  | { kind: 'leaderFire'; job: string }
  | { kind: 'triggers'; job: string }
  | { kind: 'trigger'; job: string; requestId: string }
  | { kind: 'unknown'; path: string };

/** Every `kind` of {@link RegistryPath}. */
export type RegistryPathKind = RegistryPath['kind'];

/** Canonical decimal only ("3", not "03" or "3.0"), so parse and build round-trip exactly. */
function parseItem(segment: string): number | undefined {
  if (!/^(0|[1-9]\d*)$/.test(segment)) return undefined;
  const item = Number(segment);
  return Number.isSafeInteger(item) ? item : undefined;
}

function isNodeName(segment: string): boolean {
  return segment !== '' && segment !== '.' && segment !== '..' && !ZK_FORBIDDEN_CHARS.test(segment);
}

const SHARDING_LEAVES = {
  instance: 'shardingInstance',
  running: 'shardingRunning',
  misfire: 'shardingMisfire',
  disabled: 'shardingDisabled',
  failover: 'shardingFailover',
} as const;

function parseClusterPath(rest: string[], path: string): RegistryPath {
  const [a, b, ...more] = rest;
  if (more.length > 0) return { kind: 'unknown', path };
  if (a === undefined) return { kind: 'clusterRoot' };
  if (a === 'leader' && b === undefined) return { kind: 'leader' };
  if (a === 'item-lock' && b === undefined) return { kind: 'itemLock' };
  if (a === 'instances') {
    if (b === undefined) return { kind: 'instances' };
    return isNodeName(b) ? { kind: 'instance', instanceId: b } : { kind: 'unknown', path };
  }
  if (a === 'job-lists') {
    if (b === undefined) return { kind: 'jobLists' };
    const dot = b.lastIndexOf('.');
    const list = b.slice(0, dot);
    const part = parseItem(b.slice(dot + 1));
    return dot > 0 && JOB_LIST_PATTERN.test(list) && part !== undefined ? { kind: 'jobListPart', list, part } : { kind: 'unknown', path };
  }
  if (a !== 'election') return { kind: 'unknown', path };
  if (b === undefined) return { kind: 'election' };
  const sequence = CANDIDATE_PATTERN.exec(b)?.[1];
  return sequence === undefined ? { kind: 'unknown', path } : { kind: 'electionCandidate', nodeName: b, sequence: Number(sequence) };
}

function parseJobPath(job: string, rest: string[], path: string): RegistryPath {
  const unknown: RegistryPath = { kind: 'unknown', path };
  const [a, b, c, d, ...more] = rest;
  if (more.length > 0) return unknown;
  if (a === undefined) return { kind: 'job', job };
  if (a === 'config') return b === undefined ? { kind: 'jobConfig', job } : unknown;
  if (a === 'servers' || a === 'instances' || a === 'trigger') {
    if (c !== undefined) return unknown;
    if (b === undefined) return { kind: a === 'servers' ? 'jobServers' : a === 'instances' ? 'jobInstances' : 'triggers', job };
    if (!isNodeName(b)) return unknown;
    if (a === 'servers') return { kind: 'jobServer', job, ip: b };
    return a === 'instances' ? { kind: 'jobInstance', job, instanceId: b } : { kind: 'trigger', job, requestId: b };
  }
  if (a === 'sharding') {
    if (b === undefined) return { kind: 'jobSharding', job };
    const item = parseItem(b);
    if (item === undefined || d !== undefined) return unknown;
    if (c === undefined) return { kind: 'shardingItem', job, item };
    return Object.hasOwn(SHARDING_LEAVES, c) ? { kind: SHARDING_LEAVES[c as keyof typeof SHARDING_LEAVES], job, item } : unknown;
  }
  if (a === 'leader') {
    if (b === undefined) return { kind: 'leaderRoot', job };
    if (b === 'fire' && c === undefined) return { kind: 'leaderFire', job };
    if (b === 'sharding' && c === 'necessary' && d === undefined) return { kind: 'leaderShardingNecessary', job };
    if (b === 'failover' && c === 'items') {
      if (d === undefined) return { kind: 'leaderFailoverItems', job };
      const item = parseItem(d);
      return item === undefined ? unknown : { kind: 'leaderFailoverItem', job, item };
    }
  }
  return unknown;
}

/**
 * Tells what a registry path (relative to the namespace root, as watchers report it) addresses.
 * The inverse of {@link registryPaths}: `parseRegistryPath(registryPaths.X(...args))` is
 * `{kind: 'X', ...args}`. Anything else, including intermediate nodes such as `/{job}/leader/sharding`,
 * non-canonical items (`03`) and trailing slashes, is `{kind: 'unknown', path}`; it never throws.
 */
export function parseRegistryPath(path: string): RegistryPath {
  if (typeof path !== 'string' || !path.startsWith('/') || path === '/') return { kind: 'unknown', path };
  const [first, ...rest] = path.slice(1).split('/');
  // An empty segment ("//", trailing "/") is not a ZooKeeper path at all.
  if (first === undefined || rest.includes('')) return { kind: 'unknown', path };
  if (first === '.cluster') return parseClusterPath(rest, path);
  return isValidJobName(first) ? parseJobPath(first, rest, path) : { kind: 'unknown', path };
}
