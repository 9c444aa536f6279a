/**
 * The jobs a leader knows: the children of the namespace root, each with its watch-backed
 * {@link JobView} and its dispatch state, loaded when leadership begins and followed while it lasts.
 * New jobs get their item nodes laid out before their first fire.
 *
 * The candidate next in line for leadership loads the views beforehand (a warm standby,
 * {@link watch}): its takeover then only prepares each job (its ledger and failover intents), which
 * at 10,000 jobs and more is a fraction of loading the views (docs/design-notes.md, "Warm standby").
 */
import { CoalescingRunner } from '../shared/coalescing-runner';
import { forEachLimited } from '../shared/concurrency';
import type { JobConfig } from '../shared/config/job-config';
import type { Logger } from '../shared/logger';
import { ErrorCodes, hasCode } from '../shared/errors';
import { InstanceDirectory, type InstanceDirectoryListener } from '../shared/registry/instance-directory';
import { isValidJobName, registryPaths } from '../shared/registry/registry-paths';
import { ChildrenCache, type ZkClient } from '../shared/zk';
import { tightenHeapGrowth } from '../shared/heap-growth';
import { newJobState, type FireDispatcher, type JobState } from './fire-dispatcher';
import type { Fence } from './leader-election';
import { JobView, type JobViewListener, type LiveInstance } from './job-view';

/** Jobs whose views load at the same time when leadership begins. */
const JOBS_LOADING_AT_ONCE = 256;
/** A new leader dispatches once the jobs that fire within this are prepared; the rest follow. */
export const DISPATCH_AFTER_PREPARING_MS = 10_000;

/** What the registry tells the leader and asks of it. */
export interface JobRegistryDeps {
  zk: ZkClient;
  log: Logger;
  dispatcher: FireDispatcher;
  isLeader(): boolean;
  fence(): Fence;
  /** Takeover work for a job just loaded (ledger, replay, failover intents); resolves with the fire its schedule continues after. */
  prepare(job: string, state: JobState): Promise<number | undefined>;
  /** Arms (or disarms, without a cron) the job's timer entry; `after` = the last fire already handled. */
  schedule(job: string, config: JobConfig | undefined, after: number | undefined): void;
  unschedule(job: string): void;
  instanceLost(instance: LiveInstance): void;
  instanceDraining(instance: LiveInstance): void;
  /** A live instance stopped running `jobs`: their requests waiting in its queue go elsewhere. */
  jobsDropped(instance: LiveInstance, jobs: readonly string[]): void;
  invalidConfig(job: string, error: unknown): void;
  /** A manual trigger request appeared. */
  triggerRequested(job: string, requestId: string): void;
  /** Something that changes the assignment happened (instances, servers, the flag). */
  reshardNeeded(job: string): void;
  /** A standby loaded `job`'s view: reads what its takeover needs ahead of it. */
  readAhead(job: string): Promise<void>;
  /** `job` is gone: forgets what was read ahead of it. */
  forgetAhead(job: string): void;
  /** The time `job` fires next (Infinity: never, or unknown), to prepare the soonest first. */
  nextFire(job: string, config: JobConfig | undefined): number;
  /** The leader's clock, which {@link nextFire} answers in. */
  now(): number;
}

/** The jobs of the namespace while this process leads. */
export class JobRegistry {
  readonly jobs = new Map<string, JobState>();
  /**
   * The load of each job view while it runs, shared by the cache event and the activation that
   * awaits it. Dropped once done (a job in `jobs` is loaded or loading): 10,000 settled promises
   * and their map cost a megabyte.
   */
  private readonly loading = new Map<string, Promise<void>>();
  private jobsCache: ChildrenCache | undefined;
  /** The namespace's live instances and the jobs each runs, loaded before the views. */
  private instanceDirectory: InstanceDirectory | undefined;
  private generation = 0;
  /** The load of every view (by {@link watch} or {@link load}), until {@link clear}. */
  private views: Promise<void> | undefined;
  /** Whether this process leads: a job loaded now is prepared and scheduled as well. */
  private leading = false;
  /** The heap growth holds of the loads in progress ({@link holdHeap}). */
  private readonly heapHolds = new Set<() => void>();
  /** Jobs whose item nodes are to be laid out (job -> item count), one run at a time. */
  private readonly unlaid = new Map<string, number>();
  private readonly layout = new CoalescingRunner(
    () => this.layOutItems(),
    (err: unknown) => this.deps.log.warn({ err }, 'could not lay out the items of new jobs; their first fire creates them'),
  );
  /**
   * The directory's changes: each job concerned reshards; a lost instance's queue, and a draining
   * one's waiting requests, move once for all its jobs.
   */
  private readonly directoryListener: InstanceDirectoryListener = {
    joined: (_instance, jobs) => this.instancesChanged(jobs, 'instance joined'),
    // Alive, so its queue stays; the requests waiting in it for those jobs go elsewhere.
    dropped: (instance, jobs) => {
      this.instancesChanged(jobs, 'instance left');
      this.deps.jobsDropped(instance, jobs);
    },
    left: (instance, jobs) => {
      this.instancesChanged(jobs, 'instance left');
      this.deps.instanceLost(instance);
    },
    changed: (instance, previous, jobs) => {
      this.instancesChanged(jobs, 'instance changed');
      if (instance.info.state === 'draining' && (previous.state !== 'draining' || previous.queue !== instance.info.queue)) this.deps.instanceDraining(instance);
    },
  };
  // Every job view's handlers (one set for all views): no closure or bound function per job.
  private readonly onViewConfig: JobViewListener<'config:changed'> = ({ config, previous }, view) => this.onConfig(view.job, config, previous);
  private readonly onViewInvalid: JobViewListener<'config:invalid'> = ({ error }, view) => this.deps.invalidConfig(view.job, error);
  private readonly onViewTrigger: JobViewListener<'trigger:requested'> = ({ requestId }, view) => this.deps.triggerRequested(view.job, requestId);
  private readonly onViewReshard: JobViewListener<'reshard:needed'> = ({ reason }, view) => {
    const state = this.jobs.get(view.job);
    if (state?.view !== view) return;
    const config = view.config;
    const streaming = config?.type === 'DATAFLOW' && config.streaming === true;
    // The flag of a streaming job is this leader's own (below): its reason is counted already, and
    // the event of its write can come after the reshard it asked for. The next plan sees any flag.
    if (reason === 'sharding flag set' && streaming) return;
    state.needsReshard = true;
    state.reshards += 1;
    this.deps.log.debug({ job: view.job, reason }, 'resharding at the next fire');
    // A streaming DATAFLOW run fetches until told to stop: the persistent flag tells its workers a
    // reshard is pending (ElasticJob's rule); the reshard that follows deletes it.
    this.flagStreaming(state);
    this.deps.reshardNeeded(view.job);
  };

  constructor(private readonly deps: JobRegistryDeps) {}

  /**
   * Loads and follows every job's view without leading (a warm standby). Resolves once all are
   * loaded; false when {@link clear} came meanwhile.
   */
  async watch(): Promise<boolean> {
    this.views ??= this.loadViews(++this.generation);
    const generation = this.generation;
    await this.views;
    return generation === this.generation;
  }

  /**
   * Loads every job (leadership began), or prepares every job a standby loaded. Calls `soonPrepared`
   * once the jobs that fire within {@link DISPATCH_AFTER_PREPARING_MS} are prepared (the timer
   * starts then: a job is scheduled only once prepared), and resolves once all are: the orphan
   * sweep, which would otherwise take live instances' queues for dead ones, waits for that. False
   * when leadership changed meanwhile.
   */
  async load(soonPrepared: () => void = () => undefined): Promise<boolean> {
    // The load and the takeover's reads after it, like the views' load alone (loadViews).
    const loosen = this.holdHeap();
    try {
      return await this.loadAndPrepare(soonPrepared);
    } finally {
      loosen();
    }
  }

  private async loadAndPrepare(soonPrepared: () => void): Promise<boolean> {
    this.leading = true;
    this.views ??= this.loadViews(++this.generation);
    const generation = this.generation;
    await this.views;
    if (generation !== this.generation) return false;
    // The views a standby loaded (a job still loading prepares itself once loaded: it sees `leading`),
    // the soonest to fire first: the every-second jobs do not wait for the hourly ones.
    const horizon = this.deps.now() + DISPATCH_AFTER_PREPARING_MS;
    const soon: Array<{ name: string; state: JobState; next: number }> = [];
    const later: typeof soon = [];
    for (const [name, state] of this.jobs) {
      const next = this.deps.nextFire(name, state.view.config);
      (next <= horizon ? soon : later).push({ name, state, next });
    }
    const prepareAll = (jobs: typeof soon) =>
      forEachLimited(
        jobs.sort((a, b) => a.next - b.next),
        JOBS_LOADING_AT_ONCE,
        async ({ name, state }) => {
          await this.loading.get(name);
          if (state.loaded) await this.prepare(name, state, generation);
        },
      );
    // At 100,000 jobs the every-second ones dispatched 7.3 s after the election when they waited
    // for the hourly ones, 1.5 s once they did not (bench/RESULTS.md).
    await prepareAll(soon);
    if (generation !== this.generation) return false;
    soonPrepared();
    await prepareAll(later);
    return generation === this.generation;
  }

  /** Whether every job's view is loaded or loading (a warm standby, or the leader). */
  get watching(): boolean {
    return this.views !== undefined;
  }

  /** The namespace's live instances (while the views are loaded). */
  get directory(): InstanceDirectory | undefined {
    return this.instanceDirectory;
  }

  private instancesChanged(jobs: readonly string[], reason: string): void {
    for (const job of jobs) this.jobs.get(job)?.view.handleInstances(reason);
  }

  private async loadViews(generation: number): Promise<void> {
    // The load's peak was the process's highest (docs/design-notes.md, "The load's peak").
    const loosen = this.holdHeap();
    try {
      await this.loadAllViews(generation);
    } finally {
      loosen();
    }
  }

  /**
   * Holds the heap's growth tight (tightenHeapGrowth) until the returned function or {@link clear}
   * releases it: a load that clear() abandoned may never settle (a read waiting for a lost connection).
   */
  private holdHeap(): () => void {
    const release = tightenHeapGrowth();
    const loosen = () => {
      this.heapHolds.delete(loosen);
      release();
    };
    this.heapHolds.add(loosen);
    return loosen;
  }

  private async loadAllViews(generation: number): Promise<void> {
    // The instances first: a view reads its job's from the directory as soon as it loads.
    const directory = new InstanceDirectory(this.deps.zk, { log: this.deps.log, listener: this.directoryListener });
    this.instanceDirectory = directory;
    await directory.start();
    if (generation !== this.generation) return;
    const jobsCache = new ChildrenCache(this.deps.zk, { path: '/', logger: this.deps.log });
    this.jobsCache = jobsCache;
    jobsCache.on('removed', ({ name }) => void this.remove(name));
    await jobsCache.start();
    // The jobs there at the start load a bounded number at a time, below: the cache's `added` for
    // each of them, heard from the start, began every load in one turn of the event loop, which at
    // 100,000 jobs stalled it for 13 s (longer than a 10 s session: the standby lost its session
    // and loaded again). A job that comes later is in `names()` or announced by `added`.
    jobsCache.on('added', ({ name }) => void this.add(name, generation));
    // Bounded: a leader's load reads a ledger and failover intents, which the caches' limit does not cover.
    await forEachLimited(jobsCache.names(), JOBS_LOADING_AT_ONCE, (name) => this.add(name, generation));
  }

  /** Forgets every job (leadership ended, or this process is no longer next in line). */
  async clear(): Promise<void> {
    this.generation += 1;
    this.leading = false;
    for (const loosen of [...this.heapHolds]) loosen();
    this.views = undefined;
    const cache = this.jobsCache;
    this.jobsCache = undefined;
    const directory = this.instanceDirectory;
    this.instanceDirectory = undefined;
    const states = [...this.jobs.values()];
    this.jobs.clear();
    this.loading.clear();
    this.unlaid.clear();
    await Promise.allSettled([cache?.close(), directory?.close(), ...states.map((s) => s.view.close())]);
  }

  /**
   * A fire or trigger planned at `reshards` resharded `job` and its plan landed: the streaming flag
   * written for the reshard goes, unless a new reason came since or running items held the reshard
   * (`settled` false): then the next fire reshards again, and the flag must keep telling the runs.
   * A fire's plan deletes a flag it saw in its own commit; this covers the flag whose write the plan
   * did not see yet.
   */
  resharded(job: string, reshards: number, settled: boolean): void {
    const state = this.jobs.get(job);
    if (!state) return;
    // Held by running items (FirePlan.held): a streaming run must stop to free its item, whatever
    // asked for the reshard (a new leader's first one, a join seen while standing by, a trigger).
    if (!settled) this.flagStreaming(state);
    else if (state.streamFlagged && state.reshards === reshards) {
      state.streamFlagged = false;
      this.flagOp(state, 'delete');
    }
  }

  /** Tells a streaming DATAFLOW job's runs that a reshard is pending (`leader/sharding/necessary`), once. */
  private flagStreaming(state: JobState): void {
    const config = state.view.config;
    if (config?.type !== 'DATAFLOW' || config.streaming !== true || state.streamFlagged || !this.leading) return;
    state.streamFlagged = true;
    this.flagOp(state, 'create');
  }

  /**
   * Creates or deletes `leader/sharding/necessary` of the job, after the job's earlier flag writes
   * (so a delete never overtakes the create it undoes). Idempotent; a failure only delays a
   * streaming run's stop to the end of its fetches.
   */
  private flagOp(state: JobState, op: 'create' | 'delete'): void {
    const { job } = state.view;
    const path = registryPaths.leaderShardingNecessary(job);
    const run = async (): Promise<void> => {
      if (!this.deps.isLeader()) return;
      try {
        if (op === 'create') {
          await this.deps.zk.ensurePath(path.slice(0, path.lastIndexOf('/')));
          await this.deps.zk.create(path, '');
        } else {
          await this.deps.zk.delete(path);
        }
      } catch (err) {
        if (!hasCode(err, op === 'create' ? ErrorCodes.ZK_NODE_EXISTS : ErrorCodes.ZK_NO_NODE)) this.deps.log.warn({ err, job, op }, 'could not write the resharding flag');
      }
    };
    state.streamFlagOps = (state.streamFlagOps ?? Promise.resolve()).then(run);
  }

  /** Lays out `total` item nodes of `job` (in a coalesced run). */
  layOut(job: string, total: number): void {
    this.unlaid.set(job, Math.max(total, this.unlaid.get(job) ?? 0));
    void this.layout.request();
  }

  async close(): Promise<void> {
    await this.clear();
    await this.layout.stop();
  }

  private add(name: string, generation: number): Promise<void> {
    if (!isValidJobName(name) || generation !== this.generation) return Promise.resolve();
    let loading = this.loading.get(name);
    if (!loading) {
      if (this.jobs.has(name)) return Promise.resolve();
      loading = this.loadJob(name, generation)
        .catch((err) => this.deps.log.error({ err, job: name }, 'could not load job'))
        .finally(() => {
          if (this.loading.get(name) === loading) this.loading.delete(name);
        });
      this.loading.set(name, loading);
    }
    return loading;
  }

  private async loadJob(name: string, generation: number): Promise<void> {
    // The view names its job in what it logs; a child logger per job would cost memory at 10,000 jobs.
    const directory = this.instanceDirectory;
    if (!directory) return;
    const view = new JobView(this.deps.zk, name, this.deps.log, directory);
    const state = newJobState(view);
    this.jobs.set(name, state);
    view.on('config:changed', this.onViewConfig);
    view.on('config:invalid', this.onViewInvalid);
    view.on('reshard:needed', this.onViewReshard);
    view.on('trigger:requested', this.onViewTrigger);
    await view.start();
    if (generation !== this.generation) return view.close();
    state.loaded = true;
    if (this.leading) await this.prepare(name, state, generation);
    else await this.deps.readAhead(name).catch((err) => this.deps.log.debug({ err, job: name }, 'could not read a job ahead of a takeover; a takeover reads it'));
  }

  /** A new leader's work for a loaded job (its ledger, replay and failover intents), then its timer entry. Once per job. */
  private async prepare(name: string, state: JobState, generation: number): Promise<void> {
    // A job removed meanwhile is not replayed (its requests would run after its removal).
    if (state.prepared || generation !== this.generation || this.jobs.get(name) !== state) return;
    state.prepared = true;
    try {
      const after = await this.deps.prepare(name, state);
      if (generation === this.generation && this.jobs.get(name) === state) this.deps.schedule(name, state.view.config, after);
    } catch (err) {
      this.deps.log.error({ err, job: name }, 'could not prepare job');
    }
  }

  private async remove(name: string): Promise<void> {
    const state = this.jobs.get(name);
    this.jobs.delete(name);
    this.loading.delete(name);
    this.unlaid.delete(name);
    this.deps.unschedule(name);
    this.deps.forgetAhead(name);
    await state?.view.close();
  }

  private onConfig(job: string, config: JobConfig, previous: JobConfig | undefined): void {
    if (previous && config.shardingTotalCount > previous.shardingTotalCount) this.layOut(job, config.shardingTotalCount);
    if (!previous || previous.cron !== config.cron || previous.timeZone !== config.timeZone) {
      this.deps.schedule(job, config, undefined);
    }
  }

  private async layOutItems(): Promise<void> {
    // Only jobs still loaded: the layout of a job removed meanwhile would bring its node back.
    const jobs = [...this.unlaid].filter(([job]) => this.jobs.has(job)).map(([job, total]) => ({ job, total }));
    this.unlaid.clear();
    if (jobs.length === 0 || !this.deps.isLeader()) return;
    const created = await this.deps.dispatcher.layOutItems(jobs, this.deps.fence());
    if (created > 0) this.deps.log.debug({ jobs: jobs.length, created }, 'laid out the items of jobs that have not fired yet');
  }
}
