/**
 * The jobs a leader knows: the children of the namespace root, each with its watch-backed
 * {@link JobView} and its dispatch state, loaded when leadership begins and followed while it lasts.
 * New jobs get their item nodes laid out before their first fire.
 */
import { CoalescingRunner } from '../shared/coalescing-runner';
import { forEachLimited } from '../shared/concurrency';
import type { JobConfig } from '../shared/config/job-config';
import type { Logger } from '../shared/logger';
import { ErrorCodes, hasCode } from '../shared/errors';
import { isValidJobName, registryPaths } from '../shared/registry/registry-paths';
import { ChildrenCache, type ZkClient } from '../shared/zk';
import type { FireDispatcher, JobState } from './fire-dispatcher';
import type { Fence } from './leader-election';
import { JobView, type JobViewListener, type LiveInstance } from './job-view';

/** Jobs whose views load at the same time when leadership begins. */
const JOBS_LOADING_AT_ONCE = 256;

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
  invalidConfig(job: string, error: unknown): void;
  /** A manual trigger request appeared. */
  triggerRequested(job: string, requestId: string): void;
  /** Something that changes the assignment happened (instances, servers, the flag). */
  reshardNeeded(job: string): void;
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
  private generation = 0;
  /** Jobs whose item nodes are to be laid out (job -> item count), one run at a time. */
  private readonly unlaid = new Map<string, number>();
  private readonly layout = new CoalescingRunner(
    () => this.layOutItems(),
    (err: unknown) => this.deps.log.warn({ err }, 'could not lay out the items of new jobs; their first fire creates them'),
  );
  // Every job view's handlers (one set for all views): no closure or bound function per job.
  private readonly onInstanceLost = (instance: LiveInstance): void => this.deps.instanceLost(instance);
  private readonly onInstanceDraining = (instance: LiveInstance): void => this.deps.instanceDraining(instance);
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
    state.reshards = (state.reshards ?? 0) + 1;
    this.deps.log.debug({ job: view.job, reason }, 'resharding at the next fire');
    // A streaming DATAFLOW run fetches until told to stop: the persistent flag tells its workers a
    // reshard is pending (ElasticJob's rule); the reshard that follows deletes it.
    if (streaming && !state.streamFlagged) {
      state.streamFlagged = true;
      this.flagOp(state, 'create');
    }
    this.deps.reshardNeeded(view.job);
  };

  constructor(private readonly deps: JobRegistryDeps) {}

  /**
   * Loads every job (leadership began). Resolves once all are loaded: the timer and the orphan
   * sweep, which would otherwise take live instances' queues for dead ones, wait for it. False when
   * leadership changed meanwhile.
   */
  async load(): Promise<boolean> {
    const generation = ++this.generation;
    const jobsCache = new ChildrenCache(this.deps.zk, { path: '/', logger: this.deps.log });
    this.jobsCache = jobsCache;
    jobsCache.on('added', ({ name }) => void this.add(name, generation));
    jobsCache.on('removed', ({ name }) => void this.remove(name));
    await jobsCache.start();
    // Bounded: each load reads a ledger and failover intents, which the caches' limit does not cover.
    await forEachLimited(jobsCache.names(), JOBS_LOADING_AT_ONCE, (name) => this.add(name, generation));
    return generation === this.generation;
  }

  /** Forgets every job (leadership ended). */
  async clear(): Promise<void> {
    this.generation += 1;
    const cache = this.jobsCache;
    this.jobsCache = undefined;
    const states = [...this.jobs.values()];
    this.jobs.clear();
    this.loading.clear();
    this.unlaid.clear();
    await Promise.allSettled([cache?.close(), ...states.map((s) => s.view.close())]);
  }

  /**
   * A fire or trigger planned at `reshards` resharded `job` and its plan landed: the streaming flag
   * written for the reshard goes, unless a new reason came since (then the next fire reshards again,
   * and the flag must keep telling the runs). A fire's plan deletes a flag it saw in its own commit;
   * this covers the flag whose write the plan did not see yet.
   */
  resharded(job: string, reshards: number): void {
    const state = this.jobs.get(job);
    if (!state?.streamFlagged || (state.reshards ?? 0) !== reshards) return;
    state.streamFlagged = false;
    this.flagOp(state, 'delete');
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
    const view = new JobView(this.deps.zk, name, this.deps.log);
    const state: JobState = { view, assignment: undefined, needsReshard: true, ledgerReady: false };
    this.jobs.set(name, state);
    view.on('config:changed', this.onViewConfig);
    view.on('config:invalid', this.onViewInvalid);
    view.on('instance:removed', this.onInstanceLost);
    view.on('instance:draining', this.onInstanceDraining);
    view.on('reshard:needed', this.onViewReshard);
    view.on('trigger:requested', this.onViewTrigger);
    await view.start();
    if (generation !== this.generation) return view.close();
    const after = await this.deps.prepare(name, state);
    this.deps.schedule(name, view.config, after);
  }

  private async remove(name: string): Promise<void> {
    const state = this.jobs.get(name);
    this.jobs.delete(name);
    this.loading.delete(name);
    this.unlaid.delete(name);
    this.deps.unschedule(name);
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
