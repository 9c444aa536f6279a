/**
 * The live worker instances of a namespace and the jobs each runs, as the leader and the console
 * follow them: the children of `/.cluster/instances` (one ephemeral entry per worker incarnation)
 * and each entry's job list (job-lists.ts). One watch for every instance, where the per-job layout
 * (an instance node per job and worker) cost a leader two watches per job and a joining worker of
 * 100,000 jobs 100,000 nodes (docs/design-notes.md, "One instance entry per worker").
 */
import { ErrorCodes, hasCode } from '../errors';
import { silentLogger, type Logger } from '../logger';
import { ChildrenCache, type ChildEntry, type ZkClient } from '../zk';
import { instanceEntryCodec, type InstanceEntryData, type InstanceInfo } from './instance-info';
import { jobListHash, readJobList } from './job-lists';
import { registryPaths } from './registry-paths';

/** A live instance that can receive items of a job. */
export interface LiveInstance {
  instanceId: string;
  info: InstanceInfo;
}

/** A live instance as the directory holds it. */
export interface DirectoryInstance {
  readonly instanceId: string;
  /** Frozen `{instanceId, info}`, the object handed to listeners and views. */
  readonly live: LiveInstance;
  /** The jobs it runs. */
  readonly jobs: ReadonlySet<string>;
  /** Its list's name (what {@link InstanceEntryData.jobs} says). */
  readonly list: string;
}

/** What the directory tells its owner. Each call names the jobs concerned. */
export interface InstanceDirectoryListener {
  /** `instance` began running `jobs`: it joined, or its list grew. */
  joined?(instance: LiveInstance, jobs: readonly string[]): void;
  /** `instance`, still alive, stopped running `jobs` (its list shrank). */
  dropped?(instance: LiveInstance, jobs: readonly string[]): void;
  /** `instance` is gone (its session ended, or it unregistered); it ran `jobs`. */
  left?(instance: LiveInstance, jobs: readonly string[]): void;
  /** `instance`'s info changed (its state, a new queue): it runs `jobs`. */
  changed?(instance: LiveInstance, previous: InstanceInfo, jobs: readonly string[]): void;
  /** An entry or its list cannot be read; the last good reading of it stays in force. */
  invalid?(path: string, error: unknown): void;
  /** What was reported unreadable at `path` reads again (or went). */
  valid?(path: string): void;
}

/** A failed list read other than a replaced list is tried again after this. */
const LIST_RETRY_MS = 1_000;

function infoOf(data: InstanceEntryData): InstanceInfo {
  const { jobs: _jobs, ...info } = data;
  return Object.freeze(info);
}

function sameInfo(a: InstanceInfo, b: InstanceInfo): boolean {
  return a.ip === b.ip && a.pid === b.pid && a.hostname === b.hostname && a.queue === b.queue && a.state === b.state && a.version === b.version && a.startedAt === b.startedAt;
}

const decodeEntry = (data: Buffer, _name: string, path: string): InstanceEntryData => instanceEntryCodec.decode(data, path);

/** Follows `/.cluster/instances` and the job list of each instance. */
export class InstanceDirectory {
  private readonly cache: ChildrenCache<InstanceEntryData>;
  /** Instances whose entry and list were read, by id. */
  private readonly applied = new Map<string, DirectoryInstance>();
  /** Lists being read, by instance id: the list wanted last wins. */
  private readonly wanted = new Map<string, string>();
  /** Job sets by list hash, shared by the instances running the same jobs. */
  private readonly sets = new Map<string, { names: ReadonlySet<string>; users: number }>();
  private readonly loads = new Set<Promise<void>>();
  private readonly retries = new Map<string, NodeJS.Timeout>();
  /** The list part reported unreadable, by instance: cleared once the instance reads or goes. */
  private readonly listProblems = new Map<string, string>();
  private readonly log: Logger;
  private closed = false;

  constructor(
    private readonly zk: ZkClient,
    private readonly options: { log?: Logger; listener?: InstanceDirectoryListener } = {},
  ) {
    this.log = options.log ?? silentLogger;
    const path = registryPaths.instances();
    this.cache = new ChildrenCache(zk, {
      path,
      decode: decodeEntry,
      logger: this.log,
      internNames: true,
      listeners: {
        added: (entry) => this.onEntry(entry),
        changed: (entry) => this.onEntry(entry),
        removed: (entry) => this.onRemoved(entry.name),
        invalid: ({ name, error }) => this.options.listener?.invalid?.(registryPaths.instance(name), error),
        resynced: () => {
          // A list read that failed while disconnected is read again: a resync emits nothing for an
          // entry whose version did not change.
          for (const entry of this.cache.values()) this.onEntry(entry);
        },
      },
    });
  }

  /** Reads every entry and its list, and follows them. */
  async start(): Promise<this> {
    await this.cache.start();
    await this.settled();
    return this;
  }

  /** Resolves once no list read is in flight. */
  async settled(): Promise<void> {
    while (this.loads.size > 0) await Promise.allSettled([...this.loads]);
  }

  /** Every live instance whose list was read, sorted by id. */
  instances(): DirectoryInstance[] {
    return [...this.applied.values()].sort((a, b) => (a.instanceId < b.instanceId ? -1 : a.instanceId > b.instanceId ? 1 : 0));
  }

  get(instanceId: string): DirectoryInstance | undefined {
    return this.applied.get(instanceId);
  }

  /** The live instances that run `job`, sorted by id. */
  instancesOf(job: string): LiveInstance[] {
    const out: LiveInstance[] = [];
    for (const instance of this.applied.values()) if (instance.jobs.has(job)) out.push(instance.live);
    return out.length > 1 ? out.sort((a, b) => (a.instanceId < b.instanceId ? -1 : a.instanceId > b.instanceId ? 1 : 0)) : out;
  }

  /** `instanceId`'s info if it is alive and runs `job`. */
  instanceOf(job: string, instanceId: string): InstanceInfo | undefined {
    const instance = this.applied.get(instanceId);
    return instance?.jobs.has(job) ? instance.live.info : undefined;
  }

  /**
   * The queue of every live entry, its list read or not (still loading, or unreadable), and the ids
   * of entries that cannot be decoded and were never read (their queue is unknown): what tells a
   * dead incarnation's queue from a live one. A live worker whose list or entry the directory
   * cannot read must not have its queue taken away.
   */
  knownQueues(): { queues: Set<string>; unreadable: Set<string> } {
    const { values, unreadable } = this.known('queue');
    return { queues: values, unreadable };
  }

  /**
   * The address of every live entry, its list read or not, and the ids of entries that cannot be
   * decoded and were never read (their address is unknown), as {@link knownQueues}.
   */
  knownAddresses(): { ips: Set<string>; unreadable: Set<string> } {
    const { values, unreadable } = this.known('ip');
    return { ips: values, unreadable };
  }

  /** `field` of every live entry, from its data or from its last good reading, and the entries with neither. */
  private known(field: 'queue' | 'ip'): { values: Set<string>; unreadable: Set<string> } {
    const values = new Set<string>();
    const unreadable = new Set<string>();
    for (const entry of this.cache.values()) {
      const value = entry.data?.[field] ?? this.applied.get(entry.name)?.live.info[field];
      if (value === undefined) unreadable.add(entry.name);
      else values.add(value);
    }
    return { values, unreadable };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const timer of this.retries.values()) clearTimeout(timer);
    this.retries.clear();
    await this.cache.close();
    await Promise.allSettled([...this.loads]);
  }

  private onEntry(entry: ChildEntry<InstanceEntryData>): void {
    const data = entry.data;
    // Undecodable: reported by the cache; the last good reading stays (a corrupt write must not
    // look like a dead worker, whose queue would be taken away).
    if (this.closed || !data) return;
    const instanceId = entry.name;
    this.options.listener?.valid?.(registryPaths.instance(instanceId));
    const current = this.applied.get(instanceId);
    const info = infoOf(data);
    if (current && current.live.info.queue !== info.queue) {
      // Another incarnation under the same id (its session ended and it registered again while we
      // looked away): the old one is gone, with its queue, whatever the new one runs.
      this.forget(instanceId);
    } else if (current && !sameInfo(current.live.info, info)) {
      // A state change goes in now, even while a new list is read (or cannot be).
      const next: DirectoryInstance = { ...current, live: Object.freeze({ instanceId, info }) };
      this.applied.set(instanceId, next);
      this.options.listener?.changed?.(next.live, current.live.info, [...current.jobs]);
    }
    const applied = this.applied.get(instanceId);
    if (applied && applied.list === data.jobs.list) {
      this.wanted.delete(instanceId);
      return;
    }
    if (this.wanted.get(instanceId) === data.jobs.list) return;
    this.wanted.set(instanceId, data.jobs.list);
    const load = this.load(instanceId, data).finally(() => this.loads.delete(load));
    this.loads.add(load);
  }

  private async load(instanceId: string, data: InstanceEntryData): Promise<void> {
    const ref = data.jobs;
    const hash = jobListHash(ref.list);
    let names = this.sets.get(hash)?.names;
    if (!names || names.size !== ref.count) {
      try {
        names = new Set(await readJobList(this.zk, ref));
      } catch (err) {
        if (this.wanted.get(instanceId) !== ref.list || this.closed) return;
        if (hasCode(err, ErrorCodes.ZK_NO_NODE)) {
          // Replaced by a newer list (whose entry change comes next), or the instance went.
          this.log.debug({ instanceId, list: ref.list }, 'job list replaced while read');
          this.wanted.delete(instanceId);
          return;
        }
        if (hasCode(err, ErrorCodes.CORRUPT_DATA)) {
          this.log.error({ err, instanceId }, 'unreadable job list of a worker instance; its last good list stays in force');
          this.clearListProblem(instanceId);
          const path = registryPaths.jobListPart(ref.list, 0);
          this.listProblems.set(instanceId, path);
          this.options.listener?.invalid?.(path, err);
          return;
        }
        this.log.warn({ err, instanceId }, 'could not read the job list of a worker instance; trying again');
        this.wanted.delete(instanceId);
        this.retryLater(instanceId);
        return;
      }
    }
    // Only the list wanted last, of an entry still there.
    if (this.closed || this.wanted.get(instanceId) !== ref.list || !this.cache.has(instanceId)) return;
    this.wanted.delete(instanceId);
    this.clearListProblem(instanceId);
    const latest = this.cache.get(instanceId)?.data ?? data;
    this.apply(instanceId, latest.jobs.list === ref.list ? latest : data, names);
  }

  private clearListProblem(instanceId: string): void {
    const path = this.listProblems.get(instanceId);
    if (path === undefined) return;
    this.listProblems.delete(instanceId);
    this.options.listener?.valid?.(path);
  }

  private apply(instanceId: string, data: InstanceEntryData, names: ReadonlySet<string>): void {
    const hash = jobListHash(data.jobs.list);
    let shared = this.sets.get(hash);
    if (!shared) this.sets.set(hash, (shared = { names, users: 0 }));
    shared.users += 1;
    if (this.applied.get(instanceId)?.live.info.queue !== data.queue) this.forget(instanceId);
    const previous = this.applied.get(instanceId);
    const next: DirectoryInstance = {
      instanceId,
      live: Object.freeze({ instanceId, info: infoOf(data) }),
      jobs: shared.names,
      list: data.jobs.list,
    };
    this.applied.set(instanceId, next);
    if (previous) this.release(previous);
    const listener = this.options.listener;
    if (!previous) {
      listener?.joined?.(next.live, [...next.jobs]);
      return;
    }
    const added: string[] = [];
    const kept: string[] = [];
    for (const job of next.jobs) (previous.jobs.has(job) ? kept : added).push(job);
    const dropped = [...previous.jobs].filter((job) => !next.jobs.has(job));
    if (dropped.length > 0) listener?.dropped?.(next.live, dropped);
    if (added.length > 0) listener?.joined?.(next.live, added);
    if (!sameInfo(previous.live.info, next.live.info) && kept.length > 0) listener?.changed?.(next.live, previous.live.info, kept);
  }

  private onRemoved(instanceId: string): void {
    this.options.listener?.valid?.(registryPaths.instance(instanceId));
    this.clearListProblem(instanceId);
    this.wanted.delete(instanceId);
    const timer = this.retries.get(instanceId);
    if (timer) clearTimeout(timer);
    this.retries.delete(instanceId);
    this.forget(instanceId);
  }

  /** The instance (this incarnation of it) is gone: it left every job it ran. */
  private forget(instanceId: string): void {
    const previous = this.applied.get(instanceId);
    if (!previous) return;
    this.applied.delete(instanceId);
    this.release(previous);
    this.options.listener?.left?.(previous.live, [...previous.jobs]);
  }

  private release(instance: DirectoryInstance): void {
    const hash = jobListHash(instance.list);
    const shared = this.sets.get(hash);
    if (!shared) return;
    shared.users -= 1;
    if (shared.users <= 0) this.sets.delete(hash);
  }

  private retryLater(instanceId: string): void {
    if (this.retries.has(instanceId) || this.closed) return;
    const timer = setTimeout(() => {
      this.retries.delete(instanceId);
      const entry = this.cache.get(instanceId);
      if (entry) this.onEntry(entry);
    }, LIST_RETRY_MS);
    timer.unref();
    this.retries.set(instanceId, timer);
  }
}
