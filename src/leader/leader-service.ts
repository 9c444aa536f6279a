/**
 * The scheduler role: takes part in the election and, while it leads, fires every job of the
 * namespace. It composes the leader's parts: the election, the jobs and their views
 * ({@link JobRegistry}), the takeover ({@link Takeover}), the ticks ({@link FireLoop}) on one task
 * chain, queue moves ({@link QueueMoves}) and manual triggers ({@link TriggerDispatcher}).
 * Everything it knows comes from watch-backed caches, so the fire path is one fenced ZooKeeper
 * multi per tick (all jobs due together) followed by one addBulk per queue.
 */
import { doublingWait } from '../shared/concurrency';
import type { JobConfig } from '../shared/config/job-config';
import type { RedisClient } from '../shared/redis/redis-connection';
import { silentLogger, type Logger } from '../shared/logger';
import type { ExecutionRequest, ExecutionSource } from '../shared/registry/execution-request';
import { TypedEmitter } from '../shared/typed-emitter';
import type { ZkClient } from '../shared/zk';
import { DispatchLead } from './dispatch-lead';
import { FailoverCoordinator, type MissedItem } from './failover';
import { FireDispatcher, type SkipReason } from './fire-dispatcher';
import { FireLoop } from './fire-loop';
import { FireTimer, systemClock, type Clock } from './fire-timer';
import { JobRegistry } from './job-registry';
import { LeaderElection } from './leader-election';
import { QueueMoves } from './queue-moves';
import { PRIORITIZED_FROM_PERIOD_MS, priorityForPeriod, QueuePool } from './queue-pool';
import { RedisReconcile, type ReconcileResult } from './redis-reconcile';
import { ServerPrune } from './server-prune';
import { ScheduleCache, scheduleKey } from '../shared/cron/schedule-cache';
import { REFRESH_RARER_THAN_MS, StandbyReads } from './standby-reads';
import { Takeover } from './takeover';
import { TaskChain } from './task-chain';
import { TriggerDispatcher } from './trigger-dispatcher';

export { MAX_DISPATCH_LEAD_MS } from './dispatch-lead';

/** After a load ahead of a takeover did not finish, the next waits this long, doubled per failure in a row. */
const WARM_RETRY_MS = 10_000;
/** The longest such wait. */
const WARM_RETRY_MAX_MS = 5 * 60_000;

export interface LeaderServiceOptions {
  zk: ZkClient;
  /** Redis connection the queues share (createRedisClient: BullMQ wants `maxRetriesPerRequest: null`). */
  redis: RedisClient;
  /** BullMQ prefix of the namespace's queues (queuePrefix in queue-names.ts); default `shardcron`. */
  queuePrefix?: string;
  /** The namespace, for its item records in Redis (item leases): without it a reshard keeps every leased item where it is. */
  namespace?: string;
  /** Completed requests kept per queue (SHARDCRON_COMPLETED_KEPT); default 0, removed as they complete. */
  completedKept?: number;
  instanceId: string;
  logger?: Logger;
  clock?: Clock;
  /** A fire handled later than this after its nominal time counts as missed (misfire policy). */
  lateToleranceMs?: number;
  /**
   * How long before its nominal time a fire is planned and its ledger written (DESIGN.md flow 3b);
   * its requests are enqueued up to 300 ms of it before, a fire of 2,000 requests or more as long
   * before as its enqueue takes (workers hold them until the nominal time); default 300 ms. The
   * leader raises it (up to MAX_DISPATCH_LEAD_MS) while preparing a tick or enqueueing a big fire
   * takes longer, and to 700 ms, requests enqueued that early too, for ten minutes after a tick
   * whose rarer jobs went in chunks behind frequent ones (BUSY_DELIVERY_LEAD_MS), even when set lower.
   */
  dispatchLeadMs?: number;
  /**
   * Whether the candidate next in line loads every job's view before it is elected, so that its
   * takeover only prepares them (SHARDCRON_WARM_STANDBY; default true). It costs that process the
   * leader's memory and its ZooKeeper watches.
   */
  warmStandby?: boolean;
  /**
   * Job-fires of one tick planned and ledgered together (default TICK_CHUNK, 1,000): a tick with
   * more goes in chunks, jobs of shorter period first, and what comes due meanwhile passes between
   * two chunks.
   */
  tickChunk?: number;
  /** Requests of one tick chunk, at most, while jobs firing more often than once a minute exist (default TICK_CHUNK_REQUESTS, 1,000; a single wider job-fire goes whole). */
  tickChunkRequests?: number;
  /** Only jobs of at least this period are split across a tick's chunks (default 60 s: the more frequent ones go whole in its first chunk). */
  tickSplitFromPeriodMs?: number;
  /**
   * How long no live instance has an address before the leader removes its `servers/{ip}` nodes
   * that say ENABLED (SHARDCRON_SERVER_RETENTION_MS; default SERVER_RETENTION_MS, 10 minutes).
   */
  serverRetentionMs?: number;
}

export interface LeaderServiceEvents {
  [event: string]: object;
  /** Elected, and every job prepared (the jobs about to fire may have dispatched already). */
  'leader:elected': { epoch: number };
  'leader:lost': { epoch: number; reason: string };
  /** Next in line for leadership, this process has loaded every job's view (a warm standby). */
  'standby:ready': { jobs: number; loadMs: number; ledgersRead: number };
  'fire:dispatched': { job: string; fireTime: number; source: ExecutionSource; items: number; epoch: number };
  'fire:skipped': { job: string; fireTime: number; reason: SkipReason | 'not-leader' };
  /**
   * Fires folded into one MISFIRE run (misfire on): due together because the leader fell a whole
   * fire behind, or missed while no leader could dispatch them. They run once, as fire `into`.
   */
  'fire:coalesced': { job: string; fireTimes: number[]; into: number };
  'job:invalid': { job: string; error: unknown };
  /** A request of a lost or draining instance was moved to another one. */
  'item:failover': { job: string; item: number; fireTime: number; from: string; to: string };
  /** A request of a lost instance will not run (failover off, or no instance left). */
  'item:missed': MissedItem;
  /** A manual trigger was dispatched (or refused: `items` 0 and a `refused` reason). */
  'trigger:dispatched': { job: string; requestId: string; fireTime: number; items: number; refused?: string };
  /** The Redis connection was ready again after a loss; requests Redis had lost were enqueued again (redis-reconcile.ts). */
  'redis:reconciled': ReconcileResult;
}

/** The scheduler role of one process. */
export class LeaderService extends TypedEmitter<LeaderServiceEvents> {
  readonly election: LeaderElection;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly queues: QueuePool;
  /** @internal Ledgers, enqueues and item layout: the leader's writes (tests slow it down through it). */
  readonly dispatcher: FireDispatcher;
  private readonly lead: DispatchLead;
  private readonly chain: TaskChain;
  private readonly registry: JobRegistry;
  private readonly takeover: Takeover;
  private readonly fires: FireLoop;
  private readonly triggers: TriggerDispatcher;
  private readonly reconcile: RedisReconcile;
  private readonly serverPrune: ServerPrune;
  private readonly schedules = new ScheduleCache();
  /**
   * Jobs firing more often than once a minute. While there are none, no request gets a priority:
   * rate-monotonic order has nothing to let pass, and BullMQ's prioritized set costs more than its
   * wait list (bench/tools/priority-cost.ts: 13% more Redis CPU per job); nor are a tick's chunks
   * bounded by requests (FireLoop's TICK_CHUNK_REQUESTS).
   */
  private readonly frequentJobs = new Set<string>();
  /** The BullMQ priority of each job that fires once a minute or less often (priorityForPeriod), set as it is scheduled. */
  private readonly jobPriorities = new Map<string, number>();
  private readonly reads: StandbyReads;
  /** Per cron and time zone: its next fire after `from`, which holds until that fire. */
  private readonly nextFires = new Map<string, { from: number; next: number }>();
  private timer: FireTimer | undefined;
  /** Counts changes of leadership: work of an earlier one is left to the next leader. */
  private generation = 0;
  private closing: Promise<void> | undefined;
  private readonly warmStandby: boolean;
  private readonly zkClient: ZkClient;
  private offSessionLost: (() => void) | undefined;
  /** Whether the election says this process is next in line. */
  private nextInLine = false;
  /** A load ahead of a takeover is running. */
  private warmLoading = false;
  /** Loads ahead of a takeover that did not finish, in a row (a session lost while loading, an error). */
  private warmFailures = 0;
  private warmRetry: ReturnType<Clock['setTimeout']> | undefined;

  constructor(options: LeaderServiceOptions) {
    const log = (options.logger ?? silentLogger).child({ component: 'leader', instanceId: options.instanceId });
    super(log);
    this.log = log;
    this.clock = options.clock ?? systemClock;
    this.warmStandby = options.warmStandby ?? true;
    this.zkClient = options.zk;
    this.lead = new DispatchLead(options.dispatchLeadMs, () => this.clock.now());
    this.queues = new QueuePool(options.redis, options.queuePrefix, options.completedKept, (request) => this.requestPriority(request));
    this.chain = new TaskChain(this.clock, log);
    const dispatcher = (this.dispatcher = new FireDispatcher(options.zk, this.queues, log, options.namespace));
    this.election = new LeaderElection(options.zk, options.instanceId, log);
    const isLeader = () => this.election.isLeader;
    const fence = () => this.election.fence();
    let registry: JobRegistry | undefined;
    const jobs = () => registry!.jobs;
    const failover = new FailoverCoordinator({
      zk: options.zk,
      queues: this.queues,
      jobs,
      fence,
      epoch: () => this.election.epoch ?? 0,
      log,
      onMoved: (r, to) => this.emit('item:failover', { job: r.job, item: r.item, fireTime: r.fireTime, from: r.from ?? '', to }),
      onMissed: (m) => {
        this.log.warn(m, 'item missed: its instance was lost');
        this.emit('item:missed', m);
      },
    });
    const moves = new QueueMoves(this.chain, failover, isLeader, log, (queue) => this.registry?.directory?.knownQueues().queues.has(queue) ?? false);
    const reads = (this.reads = new StandbyReads(options.zk, log, (job) => this.firesOften(registry!.jobs.get(job)?.view.config)));
    this.registry = registry = new JobRegistry({
      zk: options.zk,
      log,
      dispatcher,
      isLeader,
      fence,
      prepare: (job, state) => this.takeover.prepareJob(job, state),
      schedule: (job, config, after) => this.scheduleJob(job, config, after),
      unschedule: (job) => {
        this.notePeriod(job, undefined);
        this.timer?.unschedule(job);
      },
      instanceLost: ({ instanceId, info }) => moves.schedule(instanceId, info.queue, 'lost'),
      instanceDraining: ({ instanceId, info }) => moves.schedule(instanceId, info.queue, 'draining'),
      jobsDropped: ({ instanceId, info }, jobs) => moves.scheduleJobs(instanceId, info.queue, jobs),
      invalidConfig: (job, error) => this.emit('job:invalid', { job, error }),
      triggerRequested: (job, requestId) => this.triggers.requested(job, requestId),
      reshardNeeded: (job) => this.triggers.instancesChanged(job),
      readAhead: (job) => reads.read(job),
      forgetAhead: (job) => reads.forget(job),
      nextFire: (_job, config) => this.nextFireOf(config),
      now: () => this.clock.now(),
    });
    this.takeover = new Takeover({
      zk: options.zk,
      redis: options.redis,
      log,
      clock: this.clock,
      queues: this.queues,
      failover,
      chain: this.chain,
      moves,
      jobs: this.registry.jobs,
      liveQueues: () => this.registry.directory?.knownQueues(),
      deliveryLeadMs: () => this.lead.deliveryMs,
      layOut: (job, total) => this.registry.layOut(job, total),
      reads,
    });
    this.fires = new FireLoop({
      clock: this.clock,
      log,
      jobs: this.registry.jobs,
      election: this.election,
      dispatcher,
      chain: this.chain,
      lead: this.lead,
      moves,
      schedules: this.schedules,
      lateToleranceMs: options.lateToleranceMs ?? 1_000,
      ...(options.tickChunk !== undefined && { tickChunk: options.tickChunk }),
      ...(options.tickChunkRequests !== undefined && { tickChunkRequests: options.tickChunkRequests }),
      hasFrequentJobs: () => this.frequentJobs.size > 0,
      ...(options.tickSplitFromPeriodMs !== undefined && { splitFromPeriodMs: options.tickSplitFromPeriodMs }),
      sessionTimeoutMs: () => options.zk.negotiatedSessionTimeoutMs,
      generation: () => this.generation,
      events: {
        dispatched: (event) => this.emit('fire:dispatched', event),
        skipped: (event) => this.emit('fire:skipped', event),
        coalesced: (event) => this.emit('fire:coalesced', event),
      },
      resharded: (job, reshards, settled) => this.registry.resharded(job, reshards, settled),
    });
    this.triggers = new TriggerDispatcher({
      zk: options.zk,
      log,
      queues: this.queues,
      dispatcher,
      chain: this.chain,
      jobs: this.registry.jobs,
      election: this.election,
      clock: this.clock,
      onDispatched: (event) => this.emit('trigger:dispatched', event),
      resharded: (job, reshards, settled) => this.registry.resharded(job, reshards, settled),
    });
    this.serverPrune = new ServerPrune({
      zk: options.zk,
      log,
      clock: this.clock,
      isLeader,
      jobs: this.registry.jobs,
      directory: () => this.registry.directory,
      ...(options.serverRetentionMs !== undefined && { retentionMs: options.serverRetentionMs }),
    });
    this.reconcile = new RedisReconcile({
      queues: this.queues,
      chain: this.chain,
      isLeader,
      liveQueues: () => this.readyQueues(),
      log,
      onReconciled: (result) => this.emit('redis:reconciled', result),
    });
  }

  /** Queues of the live instances that take items (none while the instances are not loaded). */
  private readyQueues(): Set<string> {
    const instances = this.registry.directory?.instances() ?? [];
    return new Set(instances.filter((i) => i.live.info.state === 'ready').map((i) => i.live.info.queue));
  }

  /**
   * How far ahead of their time fires are planned now, and a fire of a few requests enqueued (ms;
   * DispatchLead). For tests and diagnostics.
   * @internal
   */
  get dispatchLead(): { readonly ms: number; readonly deliveryMs: number } {
    return { ms: this.lead.ms, deliveryMs: this.lead.deliveryMs };
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
    this.election.on('leader:resumed', () => this.fires.catchUp());
    this.election.on('standby', ({ next }) => void this.standby(next));
    // What was read ahead is current only while the watches of the session that read it live.
    this.offSessionLost = this.zkClient.on('lost', () => this.reads.clear());
    this.reconcile.start();
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

  /** Next in line: loads every job's view ahead of the takeover; no longer: forgets them. */
  private async standby(next: boolean): Promise<void> {
    this.nextInLine = next;
    if (!this.warmStandby || this.election.isLeader || this.closing) return;
    if (!next) {
      if (this.warmRetry !== undefined) this.clock.clearTimeout(this.warmRetry);
      this.warmRetry = undefined;
      // A load cut short (its session was lost) counts as a failure: a process that cannot keep its
      // session while loading would otherwise reload in a loop, at the leader's and ZooKeeper's cost.
      if (this.warmLoading) this.warmFailures += 1;
      this.reads.clear();
      await this.registry.clear();
      return;
    }
    if (this.warmFailures === 0) return this.warmUp();
    const waitMs = doublingWait(this.warmFailures, WARM_RETRY_MS, WARM_RETRY_MAX_MS);
    this.log.warn(
      { failures: this.warmFailures, waitMs },
      'the last loads ahead of a takeover did not finish (a ZooKeeper session lost while loading: raise SHARDCRON_ZK_SESSION_TIMEOUT_MS or give the process more CPU); loading again later, and a takeover meanwhile loads every job itself',
    );
    this.warmRetry = this.clock.setTimeout(() => {
      this.warmRetry = undefined;
      if (this.nextInLine) void this.warmUp();
    }, waitMs);
  }

  private async warmUp(): Promise<void> {
    if (this.election.isLeader || this.closing || this.registry.watching) return;
    this.log.info('next in line for leadership: loading every job ahead of a takeover');
    const started = this.clock.now();
    this.warmLoading = true;
    try {
      if (!(await this.registry.watch()) || this.election.isLeader) return;
    } catch (err) {
      this.warmFailures += 1;
      this.log.warn({ err }, 'could not load the jobs ahead of a takeover; a takeover loads them');
      this.reads.clear();
      await this.registry.clear();
      return;
    } finally {
      this.warmLoading = false;
    }
    this.warmFailures = 0;
    const event = { jobs: this.registry.jobs.size, loadMs: this.clock.now() - started, ledgersRead: this.reads.currentLedgers };
    this.log.info(event, 'warm standby: every job loaded');
    this.emit('standby:ready', event);
  }

  private async activate(epoch: number): Promise<void> {
    const generation = ++this.generation;
    this.log.info({ epoch, warm: this.registry.watching }, this.registry.watching ? 'leading: preparing the jobs loaded as a standby' : 'leading: loading jobs');
    // The timer runs the lead ahead of the wall clock: a fire is handed out that long before its
    // nominal time, planned and ledgered; enqueued shortly before it; started by workers at it.
    const clock = this.clock;
    const ahead: Clock = { now: () => clock.now() + this.lead.ms, setTimeout: (fn, ms) => clock.setTimeout(fn, ms), clearTimeout: (h) => clock.clearTimeout(h) };
    this.timer = new FireTimer({ clock: ahead, onDue: (due) => this.fires.onDue(due), logger: this.log });
    const timer = this.timer;
    // The timer starts once the jobs about to fire are prepared; it has entries only of jobs prepared.
    const dispatch = (): void => {
      if (generation !== this.generation) return;
      this.fires.begin();
      timer.start();
    };
    try {
      const loaded = await this.registry.load(dispatch);
      // What a standby read ahead is of no use once the takeover is done.
      this.reads.clear();
      if (!loaded) return;
    } catch (err) {
      this.log.error({ err }, 'could not load the jobs; waiting for the next election');
      timer.close();
      return;
    }
    if (generation !== this.generation) return;
    this.fires.settled();
    this.triggers.begin();
    this.serverPrune.begin();
    this.emit('leader:elected', { epoch });
    await this.takeover.sweepOrphanedQueues().catch((err) => this.log.error({ err }, 'could not sweep queues of lost instances'));
  }

  private async deactivate(): Promise<void> {
    this.generation += 1;
    this.timer?.close();
    this.timer = undefined;
    this.fires.end();
    this.triggers.end();
    this.serverPrune.end();
    this.schedules.clear();
    this.frequentJobs.clear();
    this.jobPriorities.clear();
    this.nextFires.clear();
    this.reads.clear();
    await this.registry.clear();
  }

  /** The next fire time of a job with `config` (Infinity: none, or an invalid cron). */
  private nextFireOf(config: JobConfig | undefined): number {
    if (!config?.cron) return Infinity;
    const key = scheduleKey(config.cron, config.timeZone);
    const now = this.clock.now();
    const known = this.nextFires.get(key);
    if (known && known.from <= now && now < known.next) return known.next;
    let next: number;
    try {
      next = this.schedules.get(config.cron, config.timeZone).next(now) ?? Infinity;
    } catch {
      next = Infinity;
    }
    this.nextFires.set(key, { from: now, next });
    return next;
  }

  /** Whether a job with `config` fires at least every REFRESH_RARER_THAN_MS (no: without a cron, or one that does not parse). */
  private firesOften(config: JobConfig | undefined): boolean {
    const period = this.schedules.jobPeriodMs(config, this.clock.now());
    return period !== undefined && period <= REFRESH_RARER_THAN_MS;
  }

  /** Records whether `job` (with `config`; undefined: removed) fires more often than once a minute, and its requests' priority. */
  private notePeriod(job: string, config: JobConfig | undefined): void {
    const period = this.schedules.jobPeriodMs(config, this.clock.now());
    if (period !== undefined && period < PRIORITIZED_FROM_PERIOD_MS) this.frequentJobs.add(job);
    else this.frequentJobs.delete(job);
    const priority = priorityForPeriod(period);
    if (priority === undefined) this.jobPriorities.delete(job);
    else this.jobPriorities.set(job, priority);
  }

  /**
   * A request's BullMQ priority: rate-monotonic by its job's period (priorityForPeriod), so that at
   * a whole minute the every-second jobs' requests pass the every-minute ones queued ahead of them
   * (docs/design-notes.md, "Frequent jobs while many fire at once"). An operator's trigger has none.
   * Read on the enqueue path: two lookups, worked out when the job was scheduled.
   */
  private requestPriority(request: ExecutionRequest): number | undefined {
    if (request.source === 'TRIGGER' || this.frequentJobs.size === 0) return undefined;
    return this.jobPriorities.get(request.job);
  }

  /** (Re)arms a job's timer entry; `after` = the last fire already handled (a ledger's), else now. */
  private scheduleJob(job: string, config: JobConfig | undefined, after: number | undefined): void {
    this.notePeriod(job, config);
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

  private async doClose(): Promise<void> {
    this.offSessionLost?.();
    if (this.warmRetry !== undefined) this.clock.clearTimeout(this.warmRetry);
    this.reconcile.close();
    await this.election.close();
    if (this.chain.waiting > 0) this.log.info({ fires: this.chain.waiting }, 'closing before prepared fires were due; the next leader replays their ledgers');
    this.chain.cancelWaiting();
    await this.deactivate();
    await this.chain.close();
    await this.registry.close();
    await this.queues.close();
    this.removeAllListeners();
  }
}
