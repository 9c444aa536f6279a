import { type JobConfig, jobConfigCodec } from '../shared/config/job-config';
import { targetsFor } from '../shared/sharding/assignment';
import type { InstanceInfo } from '../shared/registry/instance-info';
import type { InstanceDirectory, LiveInstance } from '../shared/registry/instance-directory';
import { SharedValues } from '../shared/intern';
import type { Logger } from '../shared/logger';
import { registryPaths } from '../shared/registry/registry-paths';
import { ChildrenCache, NodeCache, type ChildrenCacheEvents, type NodeCacheEvents, type ZkClient } from '../shared/zk';

export type { LiveInstance };

export interface JobViewEvents {
  [event: string]: object;
  /** A new valid config was read (also the first one). */
  'config:changed': { config: JobConfig; previous: JobConfig | undefined };
  /** The config node holds something invalid; the last valid config stays in force. */
  'config:invalid': { error: unknown };
  /** Something that changes the assignment happened (instances, servers, total, flag). */
  'reshard:needed': { reason: string };
  /** A manual trigger request node appeared (also for those there when the view started). */
  'trigger:requested': { requestId: string };
}


// Decoders shared by every view (the caches pass the path), so no job holds closures of its own.
const decodeConfig = (data: Buffer, path: string): JobConfig => jobConfigCodec.decode(data, path);
const decodeServer = (data: Buffer): string => {
  const status = data.toString('utf8').trim();
  // The two usual values as constants: one string per server node of every job adds up.
  return status === 'ENABLED' ? 'ENABLED' : status === 'DISABLED' ? 'DISABLED' : status;
};
const decodeFlag = (): true => true;

type ViewListener = (payload: never, view: JobView) => void;
type Subscriptions = ReadonlyArray<keyof JobViewEvents | ViewListener>;

const NO_SUBSCRIPTIONS: Subscriptions = Object.freeze([]);
/**
 * The subscription array that follows each one on subscribing `listener` to `event`. A leader's
 * views all get the same listeners in the same order (the job registry's six, 144 bytes of array
 * per job), so they share their arrays: views subscribe along the same chain. Weak maps: a `once`
 * wrapper or a view's last array, once unused, leaves with what it keyed.
 */
const transitions = new WeakMap<Subscriptions, Map<keyof JobViewEvents, WeakMap<ViewListener, Subscriptions>>>();

function subscribed(subs: Subscriptions, event: keyof JobViewEvents, listener: ViewListener): Subscriptions {
  let byEvent = transitions.get(subs);
  if (!byEvent) transitions.set(subs, (byEvent = new Map()));
  let byListener = byEvent.get(event);
  if (!byListener) byEvent.set(event, (byListener = new WeakMap()));
  let next = byListener.get(listener);
  // concat, not a spread: it allocates the exact length, where a spread leaves room for 29.
  if (!next) byListener.set(listener, (next = Object.freeze(subs.concat([event, listener]))));
  return next;
}

/**
 * A listener of a view's events. It gets the view as well, so that one function can serve every
 * view of a leader (a bound function per job and event costs 70 bytes, 2 MB at 10,000 jobs).
 */
export type JobViewListener<K extends keyof JobViewEvents> = (payload: JobViewEvents[K], view: JobView) => void;

/** Distinct eligible lists {@link sharedEligible} remembers (instance sets over time). */
const sharedLists = new SharedValues<readonly LiveInstance[]>(1024);

/**
 * One frozen array per distinct list of eligible instances: 10,000 jobs run on the same few
 * instances, and a list of its own per job (with an object per instance) costs 150 bytes. Instance
 * objects are the directory's, one per instance, so equal lists hold the same objects.
 */
function sharedEligible(instances: readonly LiveInstance[]): readonly LiveInstance[] {
  let key = '';
  for (const { instanceId } of instances) key += `${instanceId}\u0000`;
  const known = sharedLists.get(key);
  if (known && known.every((entry, i) => entry.info === instances[i].info)) return known;
  return sharedLists.keep(key, Object.freeze([...instances]));
}

type ChildEvent<T> = ChildrenCacheEvents<T>['added'];

/**
 * The listener of a view's four caches: one small object per view whose methods live on the
 * prototype and tell the caches apart by identity (closures would cost a function per job and
 * event, and an object per cache 32 bytes each: 128 bytes per job more).
 */
class ViewCacheListener {
  constructor(private readonly view: JobView) {}

  // Payloads as each cache's events have them, told apart by the cache.
  changed(payload: object, cache: object): void {
    const view = this.view;
    if (cache === view.configCache) {
      const { value } = payload as NodeCacheEvents<JobConfig>['changed'];
      if (value) view.handleConfig(value);
    } else if (cache === view.serversCache) view.handleReshard('server enabled/disabled');
    else if (cache === view.necessaryCache) view.handleReshard('sharding flag set');
  }

  invalid({ error }: { error: unknown }, cache: object): void {
    if (cache === this.view.configCache) this.view.handleInvalidConfig(error);
  }

  added(entry: ChildEvent<unknown>, cache: object): void {
    const view = this.view;
    if (cache === view.serversCache) view.handleReshard('server added');
    else if (cache === view.triggersCache) view.handleTrigger(entry.name);
  }

  removed(entry: ChildEvent<unknown>, cache: object): void {
    // A missing server counts as ENABLED: the removal of an ENABLED one (the leader's own, of an
    // address gone; ServerPrune) changes no instance's eligibility.
    if (cache === this.view.serversCache && entry.data !== 'ENABLED') this.view.handleReshard('server removed');
  }
}

/**
 * The leader's always-current picture of one job's subtree: config, server switches and per-item
 * flags, each a watch-backed cache, and the job's live instances from the namespace's
 * {@link InstanceDirectory}. Reading it costs no ZooKeeper round trip, which keeps the fire path
 * free of reads.
 *
 * A leader keeps one view per job, 10,000 of them or more, so a view is kept small: its caches get
 * their listeners at construction (no emitters, no closures), decoded instance nodes are shared
 * between jobs, and items are watched from the config's `shardingTotalCount` rather than through a
 * watch on `sharding`. The eligible instances are computed once per change, not once per fire.
 */
export class JobView {
  /**
   * Subscriptions as flat `[event, listener, ...]` pairs, never changed in place (copy on write) and
   * shared between views ({@link subscribed}): a view has a handful, and one map of sets per job
   * costs more than the rest of the view.
   */
  private subscriptions: Subscriptions = NO_SUBSCRIPTIONS;
  // The caches are read by their listener (ViewCacheListener) too, hence not private.
  /** @internal */
  readonly configCache: NodeCache<JobConfig>;
  /** @internal */
  readonly serversCache: ChildrenCache<string>;
  /** @internal */
  readonly necessaryCache: NodeCache<true>;
  /** @internal `trigger/{requestId}` names (no data read): manual trigger requests (DESIGN.md flow 10). */
  readonly triggersCache: ChildrenCache<undefined>;
  /**
   * `sharding/{i}/disabled` for every item i below shardingTotalCount: an existence watch, which
   * the `running` locks that come and go with every execution do not trigger (a watch on the
   * children of `sharding/{i}` did, costing the leader and ZooKeeper a notification and a
   * re-read per execution). `running` is read when a reshard needs it.
   */
  private disabledCaches: ReadonlyArray<NodeCache<true>> = [];
  private lastValid: JobConfig | undefined;
  /** {@link eligibleInstances}, until an instance or server changes. */
  private eligible: readonly LiveInstance[] | undefined;
  private closed = false;

  constructor(
    private readonly zk: ZkClient,
    readonly job: string,
    private readonly log: Logger,
    private readonly directory: InstanceDirectory,
  ) {
    const listeners = new ViewCacheListener(this);
    this.configCache = new NodeCache(zk, { path: registryPaths.jobConfig(job), decode: decodeConfig, logger: log, listeners });
    this.serversCache = new ChildrenCache(zk, {
      path: registryPaths.jobServers(job),
      decode: decodeServer,
      logger: log,
      listeners,
      internNames: true,
    });
    this.necessaryCache = new NodeCache(zk, {
      path: registryPaths.leaderShardingNecessary(job),
      decode: decodeFlag,
      expectAbsent: true,
      logger: log,
      listeners,
    });
    this.triggersCache = new ChildrenCache<undefined>(zk, { path: registryPaths.triggers(job), logger: log, listeners, expectAbsent: true });
  }

  /** Trigger request ids waiting under `trigger/`, oldest first (ids sort by time). */
  triggerRequests(): string[] {
    return this.triggersCache.names();
  }

  async start(): Promise<this> {
    await Promise.all([this.configCache.start(), this.serversCache.start(), this.necessaryCache.start(), this.triggersCache.start()]);
    const value = this.configCache.value;
    if (value && !this.lastValid) this.acceptConfig(value);
    await Promise.all(this.disabledCaches.map((cache) => cache.settled()));
    return this;
  }

  /** The last valid config, or undefined when none was ever read. */
  get config(): JobConfig | undefined {
    return this.lastValid;
  }

  /** True when the persistent `leader/sharding/necessary` flag exists. */
  get shardingFlagged(): boolean {
    return this.necessaryCache.exists;
  }

  /**
   * Instances that may receive items: live, not draining, on a server not DISABLED; sorted by
   * instance id. Frozen, and shared with other views whose eligible instances are the same.
   */
  eligibleInstances(): readonly LiveInstance[] {
    if (this.eligible) return this.eligible;
    const out: LiveInstance[] = [];
    for (const instance of this.directory.instancesOf(this.job)) {
      const info = instance.info;
      if (info.state === 'ready' && this.serversCache.get(info.ip)?.data !== 'DISABLED') out.push(instance);
    }
    return (this.eligible = sharedEligible(out));
  }

  /**
   * Where items that lost their instance go ({@link targetsFor}): over the eligible instances but
   * `except` (the instance they leave). Items with nowhere to go are left out.
   */
  targetsFor(items: Iterable<number>, except?: string): Map<number, LiveInstance> {
    const candidates = this.eligibleInstances().filter((i) => i.instanceId !== except);
    const config = this.lastValid;
    const byId = new Map(candidates.map((i) => [i.instanceId, i]));
    const owners = targetsFor(
      {
        job: this.job,
        total: config?.shardingTotalCount ?? 1,
        strategy: config?.shardingStrategy || 'AVG_ALLOCATION',
        instances: candidates.map((i) => ({ instanceId: i.instanceId, ip: i.info.ip })),
      },
      items,
    );
    return new Map([...owners].map(([item, id]) => [item, byId.get(id)!]));
  }

  /** Every live instance of the job, whatever its state. */
  liveInstances(): LiveInstance[] {
    return this.directory.instancesOf(this.job);
  }

  /**
   * `instanceId`'s info while it lives, whether it runs this job or not: what tells whether its
   * queue is still consumed (QueueMoves.afterEnqueue).
   */
  liveInstance(instanceId: string): InstanceInfo | undefined {
    return this.directory.get(instanceId)?.live.info;
  }

  /** `instanceId`'s info while it lives and runs this job. */
  instance(instanceId: string): InstanceInfo | undefined {
    return this.directory.instanceOf(this.job, instanceId);
  }

  /** True when `sharding/{item}/disabled` exists (false for items beyond the total). */
  itemDisabled(item: number): boolean {
    return this.disabledCaches[item]?.exists ?? false;
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([
      this.configCache.close(),
      this.serversCache.close(),
      this.necessaryCache.close(),
      this.triggersCache.close(),
      ...this.disabledCaches.map((c) => c.close()),
    ]);
    this.disabledCaches = [];
    this.subscriptions = NO_SUBSCRIPTIONS;
  }

  /** Subscribes; returns a function that unsubscribes. A listener that throws is logged and ignored. */
  on<K extends keyof JobViewEvents>(event: K, listener: JobViewListener<K>): () => void {
    // Copy on write: an emit in progress iterates the array it started with, as TypedEmitter does.
    this.subscriptions = subscribed(this.subscriptions, event, listener as ViewListener);
    return () => this.off(event, listener);
  }

  /** Subscribes for one event only. */
  once<K extends keyof JobViewEvents>(event: K, listener: JobViewListener<K>): () => void {
    const off = this.on(event, (payload, view) => {
      off();
      listener(payload, view);
    });
    return off;
  }

  off<K extends keyof JobViewEvents>(event: K, listener: JobViewListener<K>): void {
    const subs = this.subscriptions;
    for (let i = 0; i < subs.length; i += 2) {
      if (subs[i] === event && subs[i + 1] === listener) {
        // A new array, so that an emit iterating the old one is not disturbed.
        this.subscriptions = subs.slice(0, i).concat(subs.slice(i + 2));
        return;
      }
    }
  }

  /** Number of listeners, for leak checks in tests. */
  listenerCount(event: keyof JobViewEvents): number {
    let count = 0;
    for (let i = 0; i < this.subscriptions.length; i += 2) if (this.subscriptions[i] === event) count += 1;
    return count;
  }

  private emit<K extends keyof JobViewEvents>(event: K, payload: JobViewEvents[K]): void {
    const subs = this.subscriptions;
    for (let i = 0; i < subs.length; i += 2) {
      if (subs[i] !== event) continue;
      try {
        (subs[i + 1] as JobViewListener<K>)(payload, this);
      } catch (err) {
        this.log.error({ err, event: String(event), job: this.job }, 'event listener threw; ignored');
      }
    }
  }

  /** @internal From the config cache. */
  handleConfig(config: JobConfig): void {
    this.acceptConfig(config);
  }

  /** @internal From the config cache. */
  handleInvalidConfig(error: unknown): void {
    this.log.error({ err: error, job: this.job }, 'invalid job config in ZooKeeper; keeping the last valid one');
    this.emit('config:invalid', { error });
  }

  /** @internal From the instances, servers and flag caches: the assignment must be recomputed. */
  handleReshard(reason: string): void {
    this.eligible = undefined;
    this.emit('reshard:needed', { reason });
  }

  /** @internal From the directory (through the registry): an instance of this job came, went or changed. */
  handleInstances(reason: string): void {
    if (!this.closed) this.handleReshard(reason);
  }

  /** @internal From the triggers cache. */
  handleTrigger(requestId: string): void {
    this.emit('trigger:requested', { requestId });
  }

  private acceptConfig(config: JobConfig): void {
    const previous = this.lastValid;
    this.lastValid = config;
    this.watchItems(config.shardingTotalCount);
    this.emit('config:changed', { config, previous });
    if (previous && previous.shardingTotalCount !== config.shardingTotalCount) {
      this.emit('reshard:needed', { reason: 'shardingTotalCount changed' });
    }
    if (previous && previous.shardingStrategy !== config.shardingStrategy) {
      this.emit('reshard:needed', { reason: 'shardingStrategy changed' });
    }
  }

  /** Watches `sharding/{i}/disabled` for i below `total`, and no other item. */
  private watchItems(total: number): void {
    if (this.closed) return;
    const current = this.disabledCaches;
    for (const cache of current.slice(total)) void cache.close();
    // A new array of the exact length: pushing onto an empty one leaves room for 17.
    this.disabledCaches = Array.from({ length: total }, (_, item) => current[item] ?? this.watchItem(item));
  }

  private watchItem(item: number): NodeCache<true> {
    const cache = new NodeCache(this.zk, { path: registryPaths.shardingDisabled(this.job, item), decode: decodeFlag, logger: this.log, expectAbsent: true });
    cache.start().catch((err) => this.log.warn({ err, job: this.job, item }, 'could not watch sharding item'));
    return cache;
  }
}
