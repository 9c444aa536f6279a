import type { Redis } from 'ioredis';
import { CoalescingRunner } from '../shared/coalescing-runner';
import { parseCron, type CronSchedule } from '../shared/cron/cron';
import { forEachLimited } from '../shared/concurrency';
import { ErrorCodes, ShardcronError } from '../shared/errors';
import type { ExecutionRequest, ExecutionSource } from '../shared/registry/execution-request';
import { fireLedgerCodec, type FireLedger } from '../shared/registry/fire-ledger';
import type { JobConfig } from '../shared/config/job-config';
import { silentLogger, type Logger } from '../shared/logger';
import { isValidJobName, registryPaths } from '../shared/registry/registry-paths';
import { TypedEmitter } from '../shared/typed-emitter';
import { ChildrenCache, type ZkClient } from '../shared/zk';
import { FailoverCoordinator, findOrphanedQueues, type MissedItem, type MoveReason } from './failover';
import { FireDispatcher, type FirePlan, type JobState, type SkipReason } from './fire-dispatcher';
import { planDueFires } from './due-fires';
import { FireTimer, systemClock, type Clock, type DueJob } from './fire-timer';
import { JobView, type JobViewListener, type LiveInstance } from './job-view';
import { LeaderElection } from './leader-election';
import { QueuePool, REQUEST_RETENTION_MS } from './queue-pool';

export interface LeaderServiceOptions {
  zk: ZkClient;
  /** Redis connection the queues share (BullMQ wants `maxRetriesPerRequest: null`). */
  redis: Redis;
  instanceId: string;
  logger?: Logger;
  clock?: Clock;
  /** A fire handled later than this after its nominal time counts as missed (misfire policy). */
  lateToleranceMs?: number;
  /**
   * How long before its nominal time a fire is planned and its ledger written (DESIGN.md flow 3b);
   * its requests are enqueued up to 300 ms of it before (workers hold them until the nominal
   * time); default 300 ms. The leader raises it
   * (up to {@link MAX_DISPATCH_LEAD_MS}) while preparing a tick takes longer.
   */
  dispatchLeadMs?: number;
}

/** Upper bound of the dispatch lead: below the shortest cron period (1 s), so a job's fires never overlap. */
export const MAX_DISPATCH_LEAD_MS = 800;
/**
 * How long before its nominal time a fire's requests are enqueued, at most (never more than the
 * lead). Workers take an early request into their prefetch and hold it until its time, its item
 * locked meanwhile: the time a worker has to take a burst's requests before the fire (a worker
 * takes about 7 a millisecond on the bench machine). Not the whole lead (up to 800 ms when ticks
 * are slow to prepare): a worker's prefetch is bounded, and requests of the next fire held that
 * long took the places the tail of the current fire was waiting for.
 */
const DELIVERY_LEAD_MS = 300;
/** How many recent tick preparations the lead adapts to. */
const LEAD_WINDOW = 8;
/** Jobs planned at the same time in one tick (only a reshard makes planning wait for reads). */
const PLANS_AT_ONCE = 32;
/** Fire times of one job caught up after a suspension, at most (as the timer's own catch-up). */
const MAX_CAUGHT_UP = 100;
/** Jobs whose views load at the same time when leadership begins. */
const JOBS_LOADING_AT_ONCE = 256;

/**
 * Parsed schedules shared by every job with the same cron and time zone (a parsed expression is
 * immutable apart from its own memo), so 10,000 jobs on a few schedules hold a few parses.
 */
class ScheduleCache {
  private readonly parsed = new Map<string, CronSchedule>();

  get(cron: string, timeZone: string | undefined): CronSchedule {
    const key = `${timeZone ?? ''}\u0000${cron}`;
    let schedule = this.parsed.get(key);
    if (!schedule) {
      schedule = parseCron(cron, timeZone);
      this.parsed.set(key, schedule);
    }
    return schedule;
  }

  clear(): void {
    this.parsed.clear();
  }
}

export interface LeaderServiceEvents {
  [event: string]: object;
  'leader:elected': { epoch: number };
  'leader:lost': { epoch: number; reason: string };
  'fire:dispatched': { job: string; fireTime: number; source: ExecutionSource; items: number; epoch: number };
  'fire:skipped': { job: string; fireTime: number; reason: SkipReason | 'not-leader' };
  'job:invalid': { job: string; error: unknown };
  /** A request of a lost or draining instance was moved to another one. */
  'item:failover': { job: string; item: number; fireTime: number; from: string; to: string };
  /** A request of a lost instance will not run (failover off, or no instance left). */
  'item:missed': MissedItem;
}

/** A tick queued on the chain and not started yet: the jobs due, each with its fire times. */
interface WaitingTick {
  due: Map<string, DueJob>;
  earliest: number;
}

/**
 * The scheduler role: takes part in the election and, while it leads, fires every job of the
 * namespace. Everything it knows comes from watch-backed caches, so the fire path is one fenced
 * ZooKeeper multi per tick (all jobs due together) followed by one addBulk per queue.
 */
export class LeaderService extends TypedEmitter<LeaderServiceEvents> {
  readonly election: LeaderElection;
  private readonly log: Logger;
  private readonly queues: QueuePool;
  private readonly dispatcher: FireDispatcher;
  private readonly failover: FailoverCoordinator;
  /** Queues whose move is scheduled: queue -> {from, reason}; one move per queue, all jobs at once. */
  private readonly pendingMoves = new Map<string, { from: string; reason: MoveReason }>();
  private readonly clock: Clock;
  private readonly lateToleranceMs: number;
  private readonly jobs = new Map<string, JobState>();
  /**
   * The load of each job view while it runs, shared by the cache event and the activation that
   * awaits it. Dropped once done (a job in `jobs` is loaded or loading): 10,000 settled promises
   * and their map cost a megabyte.
   */
  private readonly loading = new Map<string, Promise<void>>();
  private jobsCache: ChildrenCache | undefined;
  private timer: FireTimer | undefined;
  /** Fires that came due while leadership was suspended (or whose ledger write failed): job -> earliest nominal time. */
  private readonly missedWhileSuspended = new Map<string, number>();
  /**
   * Fires at or before this time came due while no leader could dispatch them: before this leader
   * took over, or while it was suspended. They run each as itself when at most
   * {@link leaderlessGraceMs} late ({@link planDueFires}).
   */
  private leaderlessUntil: number | undefined;
  /** Serializes ticks, enqueues and queue moves, so one job's ledgers are written in fire order. */
  private tickChain: Promise<void> = Promise.resolve();
  /** Enqueues of committed fires waiting for their time (the lead before their nominal time). */
  private readonly deferred = new Set<unknown>();
  private readonly minLeadMs: number;
  /** Current dispatch lead, and the durations of recent tick preparations it follows. */
  private leadMs: number;
  private readonly prepareDurations: number[] = [];
  private readonly schedules = new ScheduleCache();
  /** Jobs whose item nodes are to be laid out (job -> item count), one run at a time. */
  private readonly unlaid = new Map<string, number>();
  private readonly layout = new CoalescingRunner(
    () => this.layOutItems(),
    (err: unknown) => this.log.warn({ err }, 'could not lay out the items of new jobs; their first fire creates them'),
  );
  /** The tick queued on the chain and not started yet, which new wake-ups join. */
  private waitingTick: WaitingTick | undefined;
  private generation = 0;
  private closing: Promise<void> | undefined;
  /** Every job view's handlers (one set for all views). */
  private readonly onInstanceLost = ({ instanceId, info }: LiveInstance): void => this.scheduleMove(instanceId, info.queue, 'lost');
  private readonly onInstanceDraining = ({ instanceId, info }: LiveInstance): void => this.scheduleMove(instanceId, info.queue, 'draining');
  private readonly onViewConfig: JobViewListener<'config:changed'> = ({ config, previous }, view) => this.onConfig(view.job, config, previous);
  private readonly onViewInvalid: JobViewListener<'config:invalid'> = ({ error }, view) => this.emit('job:invalid', { job: view.job, error });
  private readonly onViewReshard: JobViewListener<'reshard:needed'> = ({ reason }, view) => {
    const state = this.jobs.get(view.job);
    if (state?.view !== view) return;
    state.needsReshard = true;
    state.reshards = (state.reshards ?? 0) + 1;
    this.log.debug({ job: view.job, reason }, 'resharding at the next fire');
  };

  constructor(private readonly options: LeaderServiceOptions) {
    const log = (options.logger ?? silentLogger).child({ component: 'leader', instanceId: options.instanceId });
    super(log);
    this.log = log;
    this.clock = options.clock ?? systemClock;
    this.lateToleranceMs = options.lateToleranceMs ?? 1_000;
    const lead = options.dispatchLeadMs ?? DELIVERY_LEAD_MS;
    if (!Number.isInteger(lead) || lead < 0 || lead > MAX_DISPATCH_LEAD_MS) {
      throw new ShardcronError(ErrorCodes.INVALID_CONFIG, `dispatchLeadMs must be an integer in [0, ${MAX_DISPATCH_LEAD_MS}], got ${String(lead)}`);
    }
    this.minLeadMs = lead;
    this.leadMs = lead;
    this.queues = new QueuePool(options.redis);
    this.dispatcher = new FireDispatcher(options.zk, this.queues, log);
    this.election = new LeaderElection(options.zk, options.instanceId, log);
    this.failover = new FailoverCoordinator({
      zk: options.zk,
      queues: this.queues,
      jobs: () => this.jobs,
      fence: () => this.election.fence(),
      epoch: () => this.election.epoch ?? 0,
      log,
      onMoved: (r, to) => this.emit('item:failover', { job: r.job, item: r.item, fireTime: r.fireTime, from: r.from ?? '', to }),
      onMissed: (m) => {
        this.log.warn(m, 'item missed: its instance was lost');
        this.emit('item:missed', m);
      },
    });
  }

  get isLeader(): boolean {
    return this.election.isLeader;
  }

  async start(): Promise<this> {
    this.election.on('leader:elected', ({ epoch }) => void this.activate(epoch));
    this.election.on('leader:lost', ({ epoch, reason }) => {
      void this.deactivate();
      this.emit('leader:lost', { epoch, reason });
    });
    this.election.on('leader:resumed', () => this.catchUpAfterSuspension());
    await this.election.start();
    return this;
  }

  close(): Promise<void> {
    return (this.closing ??= this.doClose());
  }

  /** Next nominal fire time of a job as scheduled by this leader (undefined when not leading). */
  nextFireTime(job: string): number | undefined {
    return this.timer?.nextFireTime(job);
  }

  // ---- leadership -----------------------------------------------------------------------

  private async activate(epoch: number): Promise<void> {
    const generation = ++this.generation;
    this.log.info({ epoch }, 'leading: loading jobs');
    // The timer runs `leadMs` ahead of the wall clock: a fire is handed out that long before its
    // nominal time, planned and ledgered; enqueued shortly before it; started by workers at it.
    const clock = this.clock;
    const ahead: Clock = { now: () => clock.now() + this.leadMs, setTimeout: (fn, ms) => clock.setTimeout(fn, ms), clearTimeout: (h) => clock.clearTimeout(h) };
    const timer = new FireTimer({ clock: ahead, onDue: (due) => this.onDue(due), logger: this.log });
    this.timer = timer;
    const jobsCache = new ChildrenCache(this.options.zk, { path: '/', logger: this.log });
    this.jobsCache = jobsCache;
    jobsCache.on('added', ({ name }) => void this.addJob(name, generation));
    jobsCache.on('removed', ({ name }) => void this.removeJob(name));
    try {
      await jobsCache.start();
      // Every job must be loaded before the timer starts and before the orphan sweep, which
      // would otherwise take live instances' queues for dead ones.
      // Bounded: each load reads a ledger and failover intents, which the caches' limit does not cover.
      await forEachLimited(jobsCache.names(), JOBS_LOADING_AT_ONCE, (name) => this.addJob(name, generation));
    } catch (err) {
      this.log.error({ err }, 'could not load the jobs; waiting for the next election');
      return;
    }
    if (generation !== this.generation) return;
    // Fires due before now came due with no leader (since each job's last ledger).
    this.leaderlessUntil = this.clock.now();
    timer.start();
    this.emit('leader:elected', { epoch });
    await this.sweepOrphanedQueues().catch((err) => this.log.error({ err }, 'could not sweep queues of lost instances'));
  }

  private async deactivate(): Promise<void> {
    this.generation += 1;
    this.timer?.close();
    this.timer = undefined;
    const cache = this.jobsCache;
    this.jobsCache = undefined;
    const states = [...this.jobs.values()];
    this.jobs.clear();
    this.loading.clear();
    this.missedWhileSuspended.clear();
    this.leaderlessUntil = undefined;
    this.schedules.clear();
    await Promise.allSettled([cache?.close(), ...states.map((s) => s.view.close())]);
  }

  private addJob(name: string, generation: number): Promise<void> {
    if (!isValidJobName(name) || generation !== this.generation) return Promise.resolve();
    let loading = this.loading.get(name);
    if (!loading) {
      if (this.jobs.has(name)) return Promise.resolve();
      loading = this.loadJob(name, generation)
        .catch((err) => this.log.error({ err, job: name }, 'could not load job'))
        .finally(() => {
          if (this.loading.get(name) === loading) this.loading.delete(name);
        });
      this.loading.set(name, loading);
    }
    return loading;
  }

  private async loadJob(name: string, generation: number): Promise<void> {
    // The view names its job in what it logs; a child logger per job would cost memory at 10,000 jobs.
    const view = new JobView(this.options.zk, name, this.log);
    const state: JobState = { view, assignment: undefined, needsReshard: true, ledgerReady: false };
    this.jobs.set(name, state);
    // Handlers shared by every view (a view hands its listeners itself), not closures or bound
    // functions: this runs for each of thousands of jobs.
    view.on('config:changed', this.onViewConfig);
    view.on('config:invalid', this.onViewInvalid);
    view.on('instance:removed', this.onInstanceLost);
    view.on('instance:draining', this.onInstanceDraining);
    view.on('reshard:needed', this.onViewReshard);
    await view.start();
    if (generation !== this.generation) return view.close();
    const ledger = await this.readLedger(name, state);
    // A job that never fired may have no item nodes yet: lay them out before its first fire.
    if (!ledger && view.config) this.layOut(name, view.config.shardingTotalCount);
    state.assignment = ledger ? this.assignmentOf(ledger) : undefined;
    if (ledger) await this.replay(name, ledger);
    await this.failover.resumeIntents(name).catch((err) => this.log.error({ err, job: name }, 'could not finish failover intents'));
    this.scheduleJob(name, view.config, ledger?.fireTime);
  }

  private async removeJob(name: string): Promise<void> {
    const state = this.jobs.get(name);
    this.jobs.delete(name);
    this.loading.delete(name);
    this.unlaid.delete(name);
    this.timer?.unschedule(name);
    await state?.view.close();
  }

  private onConfig(job: string, config: JobConfig, previous: JobConfig | undefined): void {
    if (previous && config.shardingTotalCount > previous.shardingTotalCount) this.layOut(job, config.shardingTotalCount);
    if (!previous || previous.cron !== config.cron || previous.timeZone !== config.timeZone) {
      this.scheduleJob(job, config, undefined);
    }
  }

  /** (Re)arms a job's timer entry; `after` = the last fire already handled (a ledger's), else now. */
  private scheduleJob(job: string, config: JobConfig | undefined, after: number | undefined): void {
    const timer = this.timer;
    if (!timer || !config) return;
    if (!config.cron) {
      timer.unschedule(job);
      return;
    }
    try {
      timer.schedule(job, this.schedules.get(config.cron, config.timeZone), after ?? this.clock.now());
    } catch (err) {
      this.log.error({ err, job }, 'cannot schedule job');
      this.emit('job:invalid', { job, error: err });
    }
  }

  private layOut(job: string, total: number): void {
    this.unlaid.set(job, Math.max(total, this.unlaid.get(job) ?? 0));
    void this.layout.request();
  }

  private async layOutItems(): Promise<void> {
    // Only jobs still loaded: the layout of a job removed meanwhile would bring its node back.
    const jobs = [...this.unlaid].filter(([job]) => this.jobs.has(job)).map(([job, total]) => ({ job, total }));
    this.unlaid.clear();
    if (jobs.length === 0 || !this.election.isLeader) return;
    const created = await this.dispatcher.layOutItems(jobs, this.election.fence());
    if (created > 0) this.log.debug({ jobs: jobs.length, created }, 'laid out the items of jobs that have not fired yet');
  }

  // ---- firing -----------------------------------------------------------------------------

  private onDue(due: DueJob[]): Promise<void> {
    // A tick still waiting for the chain after its fire time means the leader fell behind (a
    // takeover of 10,000 jobs, a stalled ZooKeeper): later wake-ups join it instead of queueing
    // behind it, so it catches up in one tick, each job once under its earliest due time (the
    // misfire rule; skipped when misfire is off), instead of working through a backlog that keeps
    // every later fire late too.
    const waiting = this.waitingTick;
    if (waiting && this.clock.now() > waiting.earliest) {
      for (const d of due) {
        const known = waiting.due.get(d.job);
        if (known) known.fireTimes.push(...d.fireTimes);
        else waiting.due.set(d.job, { ...d, fireTimes: [...d.fireTimes] });
      }
      return this.tickChain;
    }
    const tick: WaitingTick = { due: new Map(due.map((d) => [d.job, d])), earliest: due.reduce((min, d) => Math.min(min, d.fireTimes[0]), Number.POSITIVE_INFINITY) };
    this.waitingTick = tick;
    return this.onChain(() => {
      if (this.waitingTick === tick) this.waitingTick = undefined;
      return this.tick([...tick.due.values()]);
    }, 'fire tick failed');
  }

  private onChain(task: () => Promise<void>, failure: string): Promise<void> {
    this.tickChain = this.tickChain.then(task).catch((err) => this.log.error({ err }, failure));
    return this.tickChain;
  }

  private async tick(due: DueJob[]): Promise<void> {
    const started = this.clock.now();
    if (this.election.state === 'suspended') {
      for (const d of due) if (!this.missedWhileSuspended.has(d.job)) this.missedWhileSuspended.set(d.job, d.fireTimes[0]);
      return;
    }
    const epoch = this.election.epoch;
    if (!this.election.isLeader || epoch === undefined) {
      for (const d of due) this.emit('fire:skipped', { job: d.job, fireTime: d.fireTimes[d.fireTimes.length - 1], reason: 'not-leader' });
      return;
    }
    const runs: Array<{ job: string; fireTime: number; source: ExecutionSource; catchUp: boolean }> = [];
    const later: DueJob[] = [];
    for (const d of due) {
      const config = this.jobs.get(d.job)?.view.config;
      const plan = planDueFires({
        fireTimes: d.fireTimes,
        now: started,
        misfire: config?.misfire ?? true,
        lateToleranceMs: this.lateToleranceMs,
        leaderlessUntil: this.leaderlessUntil,
        leaderlessGraceMs: this.leaderlessGraceMs(),
      });
      for (const fireTime of plan.skipped) this.skip(d.job, fireTime, 'missed');
      if (plan.run) runs.push({ job: d.job, ...plan.run });
      // Fires left for later go to a tick of their own, queued behind this one, so that each job's
      // ledgers stay in fire order (a fire still ahead folded into a MISFIRE run would run early and
      // have no run of its own: the ZooKeeper-restart chaos test saw a fire with no start at all).
      if (plan.later.length > 0) later.push({ job: d.job, fireTimes: plan.later, truncated: false });
    }
    if (later.length > 0) void this.onDue(later);
    const planned: Array<FirePlan | undefined> = new Array(runs.length);
    // Planning reads nothing unless a job reshards (then its `running` nodes): several at a time.
    await forEachLimited(runs.keys(), PLANS_AT_ONCE, async (i) => {
      const { job, fireTime, source, catchUp } = runs[i];
      planned[i] = await this.planFire(job, fireTime, source, epoch, catchUp);
    });
    await this.dispatch(planned.filter((p): p is FirePlan => p !== undefined), started);
  }

  /**
   * How late a fire that came due with no leader may be and still run as itself: twice the session
   * timeout, which covers a takeover (the old leader's session expires within one, the new leader
   * loads and dispatches well within the other) and any suspension that kept the session.
   */
  private leaderlessGraceMs(): number {
    return 2 * this.options.zk.negotiatedSessionTimeoutMs;
  }

  /** How long before its nominal time a prepared fire is enqueued. */
  private deliveryLeadMs(): number {
    return Math.min(this.leadMs, DELIVERY_LEAD_MS);
  }

  /** Keeps the lead at twice the slowest recent preparation (within its bounds). */
  private adaptLead(durationMs: number): void {
    this.prepareDurations.push(durationMs);
    if (this.prepareDurations.length > LEAD_WINDOW) this.prepareDurations.shift();
    const wanted = Math.ceil(2 * Math.max(...this.prepareDurations));
    const lead = Math.min(MAX_DISPATCH_LEAD_MS, Math.max(this.minLeadMs, wanted));
    if (lead !== this.leadMs) this.log.debug({ from: this.leadMs, to: lead, prepareMs: durationMs }, 'dispatch lead changed');
    this.leadMs = lead;
  }

  /** Plans one fire ({@link planDueFires} decided which, and its source). */
  private async planFire(job: string, fireTime: number, source: ExecutionSource, epoch: number, catchUp: boolean): Promise<FirePlan | undefined> {
    const state = this.jobs.get(job);
    if (!state) return undefined;
    const plan = await this.dispatcher.plan(state, fireTime, source, epoch, catchUp);
    if (typeof plan === 'string') {
      this.skip(job, fireTime, plan);
      return undefined;
    }
    return plan;
  }

  private async dispatch(plans: FirePlan[], started: number): Promise<void> {
    if (plans.length === 0) return;
    try {
      await this.dispatcher.commit(plans, this.jobs, this.election.fence());
    } catch (err) {
      if (err instanceof ShardcronError && (err.code === ErrorCodes.ZK_FENCE_LOST || err.code === ErrorCodes.LEADERSHIP_LOST)) {
        this.log.warn({ jobs: plans.map((p) => p.job) }, 'not the leader any more: fire not dispatched');
        return;
      }
      // The multi may or may not have landed; treat the fires as missed while suspended. They are
      // caught up when leadership resumes, or, if it already has (the write timed out just as the
      // connection came back), by a retry of our own a moment later.
      this.log.error({ err }, 'could not write the dispatch ledger');
      for (const plan of plans) if (!this.missedWhileSuspended.has(plan.job)) this.missedWhileSuspended.set(plan.job, plan.ledger.fireTime);
      const retry = setTimeout(() => this.election.isLeader && this.catchUpAfterSuspension(), 1_000);
      retry.unref();
      return;
    }
    for (const plan of plans) {
      const state = this.jobs.get(plan.job);
      if (state) {
        state.assignment = plan.assignment;
        // A trigger that came while the plan was made still counts: the next fire reshards again.
        if ((state.reshards ?? 0) === plan.reshards) state.needsReshard = false;
      }
    }
    this.adaptLead(this.clock.now() - started);
    // The ledgers are durable: if the enqueue fails or we crash before it, the next leader replays them.
    const generation = this.generation;
    const byTime = new Map<number, FirePlan[]>();
    for (const plan of plans) {
      const group = byTime.get(plan.ledger.fireTime);
      if (group) group.push(plan);
      else byTime.set(plan.ledger.fireTime, [plan]);
    }
    // Enqueued shortly before the nominal time: the workers take the requests ahead and hold them
    // until that time (WorkerService), so at the fire time only their own timer and the item lock
    // stand between the fire and the handler.
    for (const [fireTime, group] of byTime) await this.at(fireTime - this.deliveryLeadMs(), () => this.release(group, generation));
  }

  /**
   * Runs `task` on the tick chain at `time` (at once when it has passed). Waiting off the chain
   * keeps other ticks and queue moves going; running on it keeps them in order with the task.
   */
  private async at(time: number, task: () => Promise<void>): Promise<void> {
    const wait = time - this.clock.now();
    if (wait <= 0) return task();
    const handle = this.clock.setTimeout(() => {
      this.deferred.delete(handle);
      void this.onChain(task, 'deferred enqueue failed');
    }, wait);
    this.deferred.add(handle);
  }

  /**
   * Sends the requests of instances that died or began draining since the plan was made to live
   * ones instead (each item where the job's next fires will run it, `targetsFor`): nothing ran yet,
   * so this is what planning at the fire time would have done. The ledger still names the old owner; the next fire
   * reshards, since the assignment no longer holds.
   */
  private reroute(plan: FirePlan): void {
    const view = this.jobs.get(plan.job)?.view;
    if (!view) return;
    for (const [instanceId, queue] of Object.entries(plan.ledger.queues)) {
      const info = view.instance(instanceId);
      if (info && info.queue === queue && info.state === 'ready') continue;
      const requests = plan.requests.get(queue) ?? [];
      const targets = view.targetsFor(requests.map((r) => r.item), instanceId);
      if (targets.size === 0) return;
      plan.requests.delete(queue);
      for (const request of requests) {
        const target = targets.get(request.item)!;
        const list = plan.requests.get(target.info.queue);
        if (list) list.push(request);
        else plan.requests.set(target.info.queue, [request]);
      }
      this.log.info({ job: plan.job, fireTime: plan.ledger.fireTime, from: instanceId, items: requests.map((r) => r.item) }, 'instance left before the fire; its items go to live instances');
    }
  }


  /**
   * Enqueues committed fires, then does what their ledgers imply but the enqueue does not. After a
   * change of leadership (`generation` moved on) only the enqueue is left: the job views that the
   * rest relies on are gone or new, and the next leader replays these ledgers anyway.
   */
  private async release(plans: readonly FirePlan[], generation: number): Promise<void> {
    if (generation === this.generation) for (const plan of plans) this.reroute(plan);
    await this.dispatcher.enqueue(plans);
    for (const plan of plans) {
      const items = [...plan.requests.values()].reduce((n, list) => n + list.length, 0);
      this.emit('fire:dispatched', { job: plan.job, fireTime: plan.ledger.fireTime, source: plan.ledger.source, items, epoch: plan.ledger.epoch });
      if (generation !== this.generation) continue;
      // An instance that died or began draining after the plan was made got requests it will not
      // run: its queue is moved (again) behind this enqueue, which is what failover would do.
      const view = this.jobs.get(plan.job)?.view;
      if (!view) continue;
      for (const [instanceId, queue] of Object.entries(plan.ledger.queues)) {
        const info = view.instance(instanceId);
        if (!info || info.queue !== queue) this.scheduleMove(instanceId, queue, 'lost');
        else if (info.state === 'draining') this.scheduleMove(instanceId, queue, 'draining');
      }
    }
    if (generation !== this.generation || !this.election.isLeader) return;
    await this.dispatcher.recordAssignments(plans, this.jobs, this.election.fence()).catch((err) => {
      const deposed = err instanceof ShardcronError && (err.code === ErrorCodes.ZK_FENCE_LOST || err.code === ErrorCodes.LEADERSHIP_LOST);
      if (!deposed) this.log.warn({ err }, 'could not record item owners in sharding/{i}/instance; retried with the next fire');
    });
  }

  private skip(job: string, fireTime: number, reason: SkipReason): void {
    this.log.info({ job, fireTime, reason }, 'fire skipped');
    this.emit('fire:skipped', { job, fireTime, reason });
  }

  /**
   * After a suspension (or a ledger write that failed): every fire that came due meanwhile, from the
   * earliest one missed, is due now; {@link planDueFires} runs each as itself while it is recent
   * enough, and applies the misfire policy to older ones.
   */
  private catchUpAfterSuspension(): void {
    const missed = [...this.missedWhileSuspended];
    this.missedWhileSuspended.clear();
    if (missed.length === 0) return;
    const now = this.clock.now();
    this.leaderlessUntil = Math.max(this.leaderlessUntil ?? 0, now);
    const due: DueJob[] = [];
    for (const [job, earliest] of missed) {
      const config = this.jobs.get(job)?.view.config;
      const since = config?.cron ? this.schedules.get(config.cron, config.timeZone).between(earliest - 1, now, MAX_CAUGHT_UP) : [];
      due.push({ job, fireTimes: since.length > 0 ? since : [earliest], truncated: false });
    }
    void this.onDue(due);
  }

  // ---- failover ---------------------------------------------------------------------------

  /**
   * Moves a queue's requests on the tick chain, so that no dispatch to that queue runs at the same
   * time. Several jobs report the same lost instance; the queue is handled once for all of them.
   */
  private scheduleMove(from: string, queue: string, reason: MoveReason): void {
    if (!this.election.isLeader) return;
    const known = this.pendingMoves.get(queue);
    if (known && (known.reason === 'lost' || reason === 'draining')) return;
    this.pendingMoves.set(queue, { from, reason });
    this.tickChain = this.tickChain
      .then(async () => {
        const move = this.pendingMoves.get(queue);
        this.pendingMoves.delete(queue);
        if (!move || !this.election.isLeader) return;
        await this.failover.moveQueue(move.from, queue, move.reason);
      })
      .catch((err) => this.log.error({ err, queue, from }, 'failover of a queue failed'));
  }

  /** Queues of instances that died while no leader watched are handled like any lost instance. */
  private async sweepOrphanedQueues(): Promise<void> {
    const live = new Set<string>();
    for (const state of this.jobs.values()) for (const i of state.view.liveInstances()) live.add(i.info.queue);
    const orphans = await findOrphanedQueues(this.options.redis, this.options.zk.options.namespace, live);
    for (const { from, queue } of orphans) this.scheduleMove(from, queue, 'lost');
  }

  // ---- takeover ---------------------------------------------------------------------------

  private async readLedger(job: string, state: JobState): Promise<FireLedger | undefined> {
    const path = registryPaths.leaderFire(job);
    const text = await this.options.zk.getText(path);
    if (text !== undefined) state.ledgerReady = true;
    if (!text) return undefined;
    try {
      return fireLedgerCodec.decode(Buffer.from(text), path);
    } catch (err) {
      this.log.error({ err, job }, 'unreadable dispatch ledger; ignoring it');
      return undefined;
    }
  }

  private assignmentOf(ledger: FireLedger): Record<string, number[]> {
    return Object.fromEntries(Object.entries(ledger.assignment).map(([id, items]) => [id, [...items]]));
  }

  /**
   * Re-enqueues the last ledgered fire to the queues it named (flow 7). Requests that were already
   * enqueued keep their job ids, so BullMQ ignores them; only those the old leader never enqueued
   * are added. Ledgers older than the retention of completed requests are not replayed: the
   * requests could be gone and the replay would run them twice.
   */
  private async replay(job: string, ledger: FireLedger): Promise<void> {
    if (this.clock.now() - ledger.fireTime > REQUEST_RETENTION_MS) return;
    const state = this.jobs.get(job);
    if (!state) return;
    const byQueue = new Map<string, ExecutionRequest[]>();
    // Enqueued after their time by a new leader: catch-up work (see ExecutionRequest.catchUp).
    const request = (item: number): ExecutionRequest => ({ job, item, fireTime: ledger.fireTime, source: ledger.source, epoch: ledger.epoch, catchUp: true });
    const orphaned: number[] = [];
    for (const [instanceId, items] of Object.entries(ledger.assignment)) {
      const queue = ledger.queues[instanceId];
      if (!queue || state.view.instance(instanceId)?.queue !== queue) {
        orphaned.push(...items);
        continue;
      }
      byQueue.set(queue, items.map(request));
    }
    if (orphaned.length > 0) {
      // Their instances died before or after the enqueue: if before, nothing else will run them,
      // so they go to live instances (a request the dead instance did take is failed over from its
      // queue as well; the completed list makes the second run a no-op).
      const targets = state.view.targetsFor(orphaned);
      for (const item of orphaned) {
        const target = targets.get(item);
        if (!target) continue;
        const list = byQueue.get(target.info.queue) ?? [];
        list.push(request(item));
        byQueue.set(target.info.queue, list);
      }
      this.log.warn({ job, fireTime: ledger.fireTime, items: orphaned, live: targets.size }, 'last fire names instances that are gone; their items go to live instances');
    }
    // A ledger written ahead of its fire is enqueued no earlier than any fire is.
    await this.at(ledger.fireTime - this.deliveryLeadMs(), () => this.queues.enqueue(byQueue));
  }

  private async doClose(): Promise<void> {
    await this.election.close();
    if (this.deferred.size > 0) this.log.info({ fires: this.deferred.size }, 'closing before prepared fires were due; the next leader replays their ledgers');
    for (const handle of this.deferred) this.clock.clearTimeout(handle);
    this.deferred.clear();
    await this.deactivate();
    await this.tickChain.catch(() => undefined);
    await this.layout.stop();
    await this.queues.close();
    this.removeAllListeners();
  }
}
