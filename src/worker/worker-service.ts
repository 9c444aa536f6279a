import { setMaxListeners } from 'node:events';
import { DelayedError, WaitingError, Worker, type Job } from 'bullmq';
import { Semaphore, TurnQueue, within } from '../shared/concurrency';
import { createRedisClient, type RedisClient } from '../shared/redis/redis-connection';
import { ItemRecords, leaseAskChannel, parseLeaseAsk } from '../shared/registry/item-records';
import type { RedisTarget } from '../shared/redis/redis-target';
import { ConfigError, ErrorCodes, ShardcronError, type FieldIssue } from '../shared/errors';
import { DEFAULT_YIELD_BEFORE_FIRE_MS, WORKER_BOUNDS, type GenericJobType } from '../shared/config/env-config';
import { executionRequestSchema, type ExecutionRequest } from '../shared/registry/execution-request';
import type { ResolvedJobDefinition } from '../shared/config/job-definition';
import { silentLogger, type Logger } from '../shared/logger';
import { DRAINED_FIELD, queuePrefix } from '../shared/registry/queue-names';
import { TypedEmitter } from '../shared/typed-emitter';
import type { ZkClient } from '../shared/zk';
import { ErrorWebhooks } from './error-webhook';
import { InstanceRegistration, type Incarnation } from './instance-registration';
import { FireAlarm } from './fire-alarm';
import { FireListeners, type FireListenerTimings } from './fire-listeners';
import { ItemExecutor, type ExecutionEvent } from './item-executor';
import { WorkerHistory, type WorkerHistoryOptions } from './worker-history';
import type { ExecutionRecord } from '../shared/registry/execution-record';
import { WorkerJobs } from './worker-jobs';

/** How soon a failed-over request that found its item running tries again. */
const FAILOVER_RETRY_MS = 200;
/** Default prefetch: requests taken per handler place, and at most. */
const PREFETCH_PER_HANDLER = 10;
const MAX_DEFAULT_PREFETCH = 1_000;
/**
 * Default consumers: one per this many handler places, and at most as many as SHARDCRON_CONSUMERS
 * allows (WORKER_BOUNDS). Each consumer fetches one request per Redis round trip, so the consumers together take at most
 * their number of requests a round trip: while a big fire's requests kept Redis busy, 16 consumers
 * took a frequent job's 1,000 requests 300-900 ms after their time (bench/RESULTS.md, "Taken late,
 * not started late").
 */
const HANDLERS_PER_CONSUMER = 4;
/** How soon a request that met a ZooKeeper outage tries again. */
const TRANSIENT_RETRY_MS = 500;
/**
 * The longest a request taken before its nominal time is held. The leader enqueues at most its
 * dispatch lead (under 1 s) early; the rest allows for this host's clock running behind the
 * leader's (maxTimeDiffSeconds is the guard against worse).
 */
const MAX_EARLY_HOLD_MS = 2_000;
/** Completions let go a turn of the event loop while runs wait for a place (see WorkerService.take). */
const COMPLETIONS_PER_TURN = 64;
/**
 * How often the consumers are checked for a stall, and how long they may take nothing while
 * requests are ready for them and places are free before they are replaced. A BullMQ consumer can
 * stay blocked for good after a Redis failover (its blocking connection never ready again:
 * docs/deployment.md, "What a Redis failover can lose"); its ZooKeeper session lives on, so the
 * leader keeps its items here and only this instance can see that it no longer takes them.
 */
const CONSUMER_CHECK_MS = 500;
const CONSUMER_STALL_MS = 2_000;
/**
 * A check whose Redis round trip, or whose wait for its turn, took longer than this says nothing
 * about the consumers. So a stall of CONSUMER_STALL_MS was seen by checks at most 750 ms apart: 4 or more.
 */
const CONSUMER_CHECK_SLOW_MS = 250;
/** After the grace period, how long a close waits for the aborted executions to put their requests back. */
const ABORTED_RETURN_MS = 5_000;
/** How long a close waits to mark its queue drained (Redis may be down: then the close goes on). */
const MARK_DRAINED_MS = 2_000;
/** Sets a field of a hash that exists (KEYS[1]; ARGV: field, value). */
const MARK_IF_PRESENT = "if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end return 0";

/** The requests a consumer handed to `process`, ever and not returned yet, and what to do once it holds none after it was replaced. */
interface ConsumerState {
  taken: number;
  held: number;
  onIdle?: () => void;
  /**
   * Closed with force (replaced, or its worker closing, and holding nothing): a request it still
   * hands over (a fetch already under way) goes back to the queue.
   */
  closed?: boolean;
}

const TRANSIENT_CODES: ReadonlySet<string> = new Set([
  ErrorCodes.REDIS_UNAVAILABLE,
  ErrorCodes.ZK_CONNECTION_LOSS,
  ErrorCodes.ZK_OPERATION_TIMEOUT,
  ErrorCodes.ZK_SESSION_EXPIRED,
]);

/** Taken again after an abort put it back: it must run (see `process`). */
function mustRunAgain(job: Job): boolean {
  return (job.attemptsStarted ?? 0) > 1 && (job.data as { waited?: unknown }).waited !== true;
}

/** Work the request owes rather than a fire's first try: a failover, a trigger, a catch-up, one that waited behind catch-up work or was put back. */
function owedWork(job: Job, request: ExecutionRequest): boolean {
  return request.source === 'FAILOVER' || request.source === 'TRIGGER' || request.catchUp === true || request.waited === true || mustRunAgain(job);
}

function isTransientError(err: unknown): boolean {
  return err instanceof ShardcronError && TRANSIENT_CODES.has(err.code);
}

export interface WorkerServiceOptions {
  zk: ZkClient;
  /** The namespace's Redis (redisTarget in redis-target.ts); its kind also decides the queues' key prefix. */
  redis: RedisTarget;
  namespace: string;
  instanceId: string;
  ip: string;
  jobs: readonly ResolvedJobDefinition[];
  /** Handlers run at once by this instance. */
  concurrency: number;
  /**
   * Requests taken from the queue beyond the concurrency (default: ten per handler, at most 1,000).
   * A request is taken before its handler can start: it waits for its fire time (requests arrive up
   * to the leader's delivery lead ahead of it) and, with monitorExecution, for its lock and then its
   * release, each a ZooKeeper round trip. Those waits hold no handler place. Without a prefetch the
   * handlers sat idle behind round trips, and a burst's requests beyond the concurrency were taken
   * only after the fire time, one fetch at a time. Without monitorExecution a backlog of due
   * requests is taken without the prefetch (see `adjustTaking`).
   */
  prefetch?: number;
  /**
   * BullMQ consumers sharing the requests taken at once (concurrency + prefetch) on the instance's
   * queue (default: one per 4 of concurrency, at most 64). A BullMQ Worker fetches jobs one round
   * trip at a time, so one consumer takes a fire's 100th request after 100 sequential fetches;
   * several consumers fetch side by side. Each holds a Redis connection.
   */
  consumers?: number;
  /**
   * monitorExecution's lock as a lease kept across fires, each run recorded in Redis (no ZooKeeper
   * request per run; docs/design-notes.md "Item leases"). Every worker of a namespace must use the
   * same lock: startNode passes the one the namespace records (`settleItemLockMode`). False: the
   * `running` node is created and deleted per run, and the run recorded in ZooKeeper.
   */
  itemLease?: boolean;
  /** On close, how long running executions may take before they are aborted. Default 30000. */
  shutdownGraceMs?: number;
  /**
   * A prioritized request (its job fires once a minute or less often, and its namespace has jobs
   * firing more often: queue-pool.ts) that is due when taken, and finds requests held here for a
   * fire due within this long, waits for that fire and starts right after its requests (default
   * 50 ms; 0: never). At a minute's burst the worker otherwise spends the last milliseconds before
   * each fire of its frequent jobs starting and completing minute requests, and that fire's timer
   * comes late (docs/design-notes.md, "Frequent jobs while many fire at once").
   */
  yieldBeforeFireMs?: number;
  /**
   * Where every execution's record goes besides the events: each job's recent list in Redis
   * (`recentPerJob` records kept, default 1,000; 0: no list) and, with `tracingPgUrl`, ElasticJob's traces in
   * PostgreSQL. Both are written in batches off the execution path (docs/history.md).
   */
  history?: WorkerHistoryOptions;
  /**
   * Also run every job of the namespace defined by data (SCRIPT, HTTP: created by the API or the
   * CLI) of these types, with no code of its own (SHARDCRON_WORKER_GENERIC).
   */
  generic?: readonly GenericJobType[];
  /** Timings of the once-per-fire listeners' state (tests shorten the beforeFire lease). */
  fireListenerTimings?: Partial<FireListenerTimings>;
  logger?: Logger;
}

export interface WorkerServiceEvents {
  [event: string]: object;
  'worker:registered': Incarnation;
  /** The consumers took nothing for `stalledMs` while `ready` requests waited and places were free: new ones replaced them. */
  'worker:consumers-replaced': { queue: string; ready: number; stalledMs: number };
  'item:started': ExecutionEvent;
  'item:finished': ExecutionEvent;
}

/**
 * The worker role: registers an instance for each job it can run and executes the requests the
 * leader puts on this incarnation's queue. It stops taking requests the moment ZooKeeper is
 * suspended, aborts its executions when the session is lost, and comes back as a new incarnation
 * (new queue) on the new session: requests addressed to the old one are the leader's to move.
 */
export class WorkerService extends TypedEmitter<WorkerServiceEvents> {
  private readonly log: Logger;
  private readonly registration: InstanceRegistration;
  private readonly executor: ItemExecutor;
  /** Requests the consumers take at once: with the prefetch (`ahead`), and during a due backlog (`due`). */
  private readonly taking: { ahead: number; due: number };
  /** Whether the consumers take the prefetch now (see `adjustTaking`). */
  private prefetching = true;
  /** Requests taken before their fire time wait for it here, each fire's on one timer. */
  private readonly alarm = new FireAlarm();
  /** The jobs this worker runs: its code's, then the data-defined ones it follows (generic). */
  private readonly jobs: WorkerJobs;
  private history: WorkerHistory | undefined;
  private readonly webhooks: ErrorWebhooks;
  private readonly fires: FireListeners;
  private readonly unsubscribe: Array<() => void> = [];
  private connection: RedisClient | undefined;
  /** With item leases: the records' connection, and the one that hears asks for our leases. */
  private leaseConnections: { records: ItemRecords; commands: RedisClient; asks: RedisClient } | undefined;
  private consumers: Worker[] = [];
  /** Places among the handlers running at once (the concurrency). */
  private readonly handlers: Semaphore;
  /** Completions waiting for a later turn while handlers wait for a place (see {@link take}). */
  private readonly completions = new TurnQueue(COMPLETIONS_PER_TURN);
  private abortAll = WorkerService.stopController();
  private closing: Promise<void> | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private consumerCheck: NodeJS.Timeout | undefined;
  /** What the consumer checks saw: the consumers' requests taken at the last one and when it ran, and since when checks in a row found requests ready and none taken. */
  private readonly stall: { taken: number; at: number; since: number | undefined; checking: boolean } = { taken: 0, at: 0, since: undefined, checking: false };
  private readonly consumerStates = new WeakMap<Worker, ConsumerState>();
  /** Replaced consumers until they closed (each once its last request returned). */
  private readonly retiring = new Set<Promise<void>>();
  /** Put-backs of requests closed consumers still handed over (`take`), which a close waits for before it marks the queue drained. */
  private readonly handingBack = new Set<Promise<void>>();
  /** The close's grace period is over: a request a consumer still hands over goes back, as a closed one's does. */
  private graceOver = false;
  /** True while we stopped because the ownership deadline passed (invariant I4). */
  private fencedOut = false;

  constructor(private readonly options: WorkerServiceOptions) {
    const log = (options.logger ?? silentLogger).child({ component: 'worker', instanceId: options.instanceId });
    super(log);
    this.log = log;
    WorkerService.checkLimits(options);
    const { concurrency } = options;
    const prefetch = options.prefetch ?? Math.min(MAX_DEFAULT_PREFETCH, PREFETCH_PER_HANDLER * concurrency);
    this.taking = { ahead: concurrency + prefetch, due: concurrency + Math.min(prefetch, Math.ceil(concurrency / 4)) };
    this.registration = new InstanceRegistration(options.zk, { ...options, log, configStored: (job) => this.jobs.configStored(job) });
    this.jobs = new WorkerJobs({ ...options, registration: this.registration, forget: (job) => this.executor.forgetJob(job), log });
    this.webhooks = new ErrorWebhooks(log);
    this.fires = new FireListeners({
      namespace: options.namespace,
      instanceId: options.instanceId,
      redis: () => this.connection,
      abortSignal: () => this.abortAll.signal,
      log,
      ...(options.fireListenerTimings && { timings: options.fireListenerTimings }),
    });
    this.executor = new ItemExecutor({
      zk: options.zk,
      instanceId: options.instanceId,
      log,
      config: (job) => this.jobs.config(job),
      owns: (sessionId) => options.zk.sessionId === sessionId && this.withinContactDeadline(),
      abortSignal: () => this.abortAll.signal,
      handlers: (this.handlers = new Semaphore(options.concurrency)),
      record: (record) => this.emit(record.event === 'start' ? 'item:started' : 'item:finished', record),
      ...(WorkerHistory.wanted(options.history) && { onRecord: (record: ExecutionRecord) => this.history?.append(record) }),
      environment: { reshardingPending: (job) => this.jobs.reshardingPending(job) },
      webhooks: this.webhooks,
      fires: this.fires,
      ...(WorkerService.leased(options) && { itemRecords: () => this.leaseConnections!.records }),
    });
  }

  /**
   * Item leases: the records' own connection (on the consumers' one, each turn's end script would
   * queue behind their fetches), and a subscriber to this instance's asks. Asks sent while it was
   * disconnected are lost, so after a reconnect every idle lease's record is looked at.
   */
  private async listenForLeaseAsks(): Promise<void> {
    const { redis, namespace, instanceId } = this.options;
    const commands = createRedisClient(redis, { logger: this.log, name: 'worker-items' });
    const asks = createRedisClient(redis, { logger: this.log, name: 'worker-lease-asks' });
    const records = new ItemRecords(commands, namespace);
    this.leaseConnections = { records, commands, asks };
    asks.on('message', (_channel: string, message: string) => {
      const ask = parseLeaseAsk(message);
      if (ask) this.executor.leaseAsked(ask.job, ask.item);
    });
    let readyBefore = false;
    asks.on('ready', () => {
      if (!readyBefore) {
        readyBefore = true;
        return;
      }
      void this.lookForMissedAsks(records);
    });
    await asks.subscribe(leaseAskChannel(namespace, instanceId));
  }

  private async lookForMissedAsks(records: ItemRecords): Promise<void> {
    const idle = this.executor.idleLeases();
    await Promise.all(
      idle.map(async ({ job, item }) => {
        if (await records.asked(job, item).catch(() => false)) this.executor.leaseAsked(job, item);
      }),
    );
  }

  /** Whether monitorExecution's lock is a lease (see WorkerServiceOptions.itemLease). */
  private static leased(options: WorkerServiceOptions): boolean {
    return options.itemLease ?? false;
  }

  /** The bounds SHARDCRON_CONCURRENCY, SHARDCRON_PREFETCH and SHARDCRON_CONSUMERS have, for options given in code. */
  private static checkLimits(options: WorkerServiceOptions): void {
    const issues: FieldIssue[] = [];
    for (const [field, [min, max]] of Object.entries(WORKER_BOUNDS) as Array<[keyof typeof WORKER_BOUNDS, readonly [number, number]]>) {
      const value = options[field];
      if (value !== undefined && !(Number.isInteger(value) && value >= min && value <= max)) {
        issues.push({ field, message: `${String(value)} is not an integer from ${min} to ${max}` });
      }
    }
    if (issues.length > 0) throw new ConfigError(ErrorCodes.INVALID_CONFIG, 'Invalid worker options', issues);
  }

  get instanceId(): string {
    return this.options.instanceId;
  }

  /** The queue of the current incarnation. */
  get queue(): string | undefined {
    return this.registration.incarnation?.queue;
  }

  async start(): Promise<this> {
    const { zk } = this.options;
    this.connection = createRedisClient(this.options.redis, { logger: this.log, name: 'worker' });
    const redis = this.options.redis;
    if (WorkerService.leased(this.options)) await this.listenForLeaseAsks();
    this.history = new WorkerHistory(() => createRedisClient(redis, { logger: this.log, name: 'worker-history' }), { ...this.options.history, namespace: this.options.namespace, ip: this.options.ip, log: this.log });
    this.unsubscribe.push(
      zk.on('suspended', () => void this.pauseConsumers()),
      zk.on('reconnected', () => !this.fencedOut && this.resumeConsumers()),
      zk.on('lost', () => void this.onSessionLost()),
      zk.on('session:renewed', () => void this.startIncarnation().catch((err) => this.log.error({ err }, 'could not register again'))),
    );
    // The configs' watches load beside the registration and after it: a worker of 100,000 jobs is
    // registered (the leader gives it items) well before it has read them all, and a request of a
    // job whose config is not read yet waits for that read (process).
    this.jobs.watch().catch((err: unknown) => this.log.error({ err }, 'could not read the stored configs of the jobs; they are read again on reconnect'));
    await this.startIncarnation();
    await this.jobs.start();
    this.watchdog = setInterval(() => this.checkOwnership(), 100);
    this.watchdog.unref();
    this.consumerCheck = setInterval(() => void this.checkConsumers(), CONSUMER_CHECK_MS);
    this.consumerCheck.unref();
    return this;
  }

  /**
   * Replaces the consumers when every check for CONSUMER_STALL_MS found that they took nothing
   * while requests were ready on their queue (waiting, prioritized, or delayed and
   * due) and places were free. A check says nothing while the consumers are paused (ZooKeeper
   * suspended, fenced out), the worker closes, the queue is paused (Bull Board), Redis does not
   * answer, or the check itself came late or waited long for Redis: a blocked event loop, or a
   * reconnect that queued the check ahead of the consumers' own commands. See {@link retire} for
   * the old consumers.
   */
  private async checkConsumers(): Promise<void> {
    const consumers = this.consumers;
    const stall = this.stall;
    const now = Date.now();
    const { taken, held } = this.counts(consumers);
    const onTime = now - stall.at < CONSUMER_CHECK_MS + CONSUMER_CHECK_SLOW_MS;
    const quiet = onTime && taken === stall.taken && held < this.takenNow();
    stall.taken = taken;
    stall.at = now;
    if (!quiet || stall.checking || !this.consumersLive(consumers)) {
      stall.since = undefined;
      return;
    }
    stall.checking = true;
    try {
      const queue = consumers[0].name;
      const ready = await this.readyRequests(queue);
      const answered = Date.now();
      // Taken meanwhile, paused or replaced meanwhile (a suspension, a new incarnation, a close), or too slow to tell.
      if (ready === 0 || this.counts(consumers).taken !== stall.taken || !this.consumersLive(consumers) || this.consumers !== consumers || answered - now > CONSUMER_CHECK_SLOW_MS) {
        stall.since = undefined;
        return;
      }
      stall.since ??= now;
      const stalledMs = answered - stall.since;
      if (stalledMs < CONSUMER_STALL_MS) return;
      stall.since = undefined;
      this.log.warn({ queue, ready, stalledMs }, 'the queue consumers took no request while requests were ready and places free (a Redis failover can leave BullMQ blocked for good); replacing them');
      this.consumers = this.startConsumers(queue);
      this.retire(consumers);
      this.emit('worker:consumers-replaced', { queue, ready, stalledMs });
    } catch (err) {
      // Redis failing: the consumers cannot take anything either; nothing to judge.
      this.log.debug({ err }, 'consumer check: could not read the queue');
      stall.since = undefined;
    } finally {
      stall.checking = false;
    }
  }

  /** The requests `consumers` handed over, ever and not returned yet. */
  private counts(consumers: readonly Worker[]): { taken: number; held: number } {
    let taken = 0;
    let held = 0;
    for (const consumer of consumers) {
      const state = this.consumerStates.get(consumer)!;
      taken += state.taken;
      held += state.held;
    }
    return { taken, held };
  }

  /** The consumers may take requests now: the worker runs, owns its items, and they are not paused. */
  private consumersLive(consumers: readonly Worker[]): boolean {
    return !this.closing && !this.fencedOut && this.options.zk.state === 'connected' && consumers.length > 0 && !consumers.some((c) => c.isPaused());
  }

  /**
   * Stops consumers (replaced ones, or all of them when the worker closes) taking anything more and
   * closes each once the requests it handed over returned. With force: a stuck consumer's close
   * without force waits for its blocking connection to end, which never comes. A close of the worker
   * waits for these within its grace period (doClose).
   */
  private retire(consumers: readonly Worker[]): void {
    for (const consumer of consumers) {
      const state = this.consumerStates.get(consumer)!;
      consumer.pause(true).catch(() => undefined);
      const closed = new Promise<void>((resolve) => {
        state.onIdle = () => {
          state.onIdle = undefined;
          state.closed = true;
          consumer
            .close(true)
            .catch((err: unknown) => this.log.warn({ err }, 'closing a queue consumer failed'))
            .finally(resolve);
        };
      });
      this.retiring.add(closed);
      void closed.then(() => this.retiring.delete(closed));
      if (state.held === 0) state.onIdle?.();
    }
  }

  /** The base of `queue`'s keys in Redis (BullMQ's `{prefix}:{name}`). */
  private queueKey(queue: string): string {
    return `${queuePrefix(this.options.namespace, this.options.redis)}:${queue}`;
  }

  /** Requests a consumer of `queue` could take now: waiting, prioritized, and delayed ones already due. */
  private async readyRequests(queue: string): Promise<number> {
    const key = this.queueKey(queue);
    // BullMQ scores a delayed job by its due time x 0x1000 plus a counter below 0x1000.
    const dueScore = (Date.now() + 1) * 0x1000 - 1;
    const replies = await this.connection!.multi().hget(`${key}:meta`, 'paused').llen(`${key}:wait`).zcard(`${key}:prioritized`).zcount(`${key}:delayed`, 0, dueScore).exec();
    if (!replies) return 0;
    let ready = 0;
    for (const [err] of replies) if (err) throw err;
    // A queue paused on purpose (Bull Board's pause) keeps its requests: nothing to take.
    if (replies[0][1] !== null) return 0;
    for (const [, count] of replies.slice(1)) ready += Number(count);
    return ready;
  }

  /** The jobs defined by data this worker runs now (generic workers); sorted. */
  get genericJobs(): string[] {
    return this.jobs.genericNames();
  }

  /**
   * We must stop before the server could expire our session, since the leader fails our items
   * over the moment it does. A third of the session timeout is kept as a margin for clock rate
   * differences and the time an abort takes to reach the handler.
   */
  private withinContactDeadline(): boolean {
    const margin = this.options.zk.negotiatedSessionTimeoutMs / 3;
    return Date.now() < this.options.zk.contactDeadline() - margin;
  }

  private checkOwnership(): void {
    const ok = this.withinContactDeadline();
    if (!ok && !this.fencedOut) {
      this.fencedOut = true;
      this.log.warn('no contact with ZooKeeper for too long: aborting executions before our items can be failed over');
      this.abortExecutions('lost contact with ZooKeeper; executions aborted before failover');
      void this.pauseConsumers();
    } else if (ok && this.fencedOut) {
      this.fencedOut = false;
      this.log.info('contact with ZooKeeper restored: taking requests again');
      if (this.options.zk.state === 'connected') this.resumeConsumers();
    }
  }

  /**
   * The controller every running execution and held request listens to, through `onAbort` (one
   * listener on the signal for all of them); the limit is lifted for any other listener (Node
   * warns past 10 by default).
   */
  private static stopController(): AbortController {
    const controller = new AbortController();
    setMaxListeners(0, controller.signal);
    return controller;
  }

  /** Stops taking requests; running executions go on. */
  private async pauseConsumers(): Promise<void> {
    await Promise.all(this.consumers.map((c) => c.pause(true).catch(() => undefined)));
  }

  private resumeConsumers(): void {
    for (const consumer of this.consumers) consumer.resume();
  }

  /** Closes the consumers with force: BullMQ waits neither for their running jobs nor for their blocking connections (see `retire`). */
  private async closeAll(consumers: readonly Worker[]): Promise<void> {
    for (const consumer of consumers) this.consumerStates.get(consumer)!.closed = true;
    await Promise.all(consumers.map((c) => c.close(true)));
  }

  private abortExecutions(reason: string): void {
    const controller = this.abortAll;
    this.abortAll = WorkerService.stopController();
    controller.abort(new ShardcronError(ErrorCodes.NOT_OWNER, reason));
  }

  close(): Promise<void> {
    return (this.closing ??= this.doClose());
  }

  /**
   * Puts a taken request back on its queue. BullMQ puts a prioritized one (a job that fires once a
   * minute or less often, queue-pool.ts) back in its sorted set without the queue's wake-up marker,
   * so consumers blocked on that marker would see it only after their drain delay (5 s): the marker
   * is added here, as BullMQ's own add does.
   */
  private async putBack(job: Job, token: string | undefined): Promise<void> {
    await job.moveToWait(token);
    if (job.opts.priority) await this.connection?.zadd(`${job.queueQualifiedName}:marker`, 0, '0');
  }

  /**
   * Marks our queue drained before we leave: what still waits in it came after the leader's move of
   * our waiting requests (a fire planned before we said we were draining, a request a retired
   * consumer fetched and put back, a run aborted at the end of the grace period), never ran here,
   * and moves when we leave, with failover off too (failover.ts). Best effort: unmarked, the leader
   * takes the queue for a lost one's.
   */
  private async markDrained(): Promise<void> {
    const queue = this.registration.incarnation?.queue;
    if (!queue || !this.connection) return;
    // Only on a queue that still exists: after a session lost meanwhile the leader may have removed
    // it, and a meta key alone would read as a queue (namespaceQueues) until a takeover sweeps it.
    const marking = this.connection.eval(MARK_IF_PRESENT, 1, `${this.queueKey(queue)}:meta`, DRAINED_FIELD, String(Date.now()));
    await within(
      marking.catch((err: unknown) => this.log.warn({ err }, 'could not mark the queue drained')),
      MARK_DRAINED_MS,
    );
  }

  /**
   * Registers a new incarnation and consumes its queue. The consumers start first: the leader sends
   * requests as soon as it reads the instance entry.
   */
  private async startIncarnation(): Promise<void> {
    await this.closeAll(this.consumers.splice(0));
    // A close began meanwhile (a session renewed as the worker closes): it took the consumers there
    // were, and would never close new ones.
    if (this.closing) return;
    this.consumers = this.startConsumers(this.registration.nextQueue());
    let incarnation: Incarnation;
    try {
      incarnation = await this.registration.register();
    } catch (err) {
      await this.closeAll(this.consumers.splice(0)).catch(() => undefined);
      throw err;
    }
    this.emit('worker:registered', incarnation);
  }

  private startConsumers(queue: string): Worker[] {
    const count = Math.min(this.taking.ahead, this.options.consumers ?? Math.min(WORKER_BOUNDS.consumers[1], Math.ceil(this.options.concurrency / HANDLERS_PER_CONSUMER)));
    return Array.from({ length: count }, (_, i) => {
      const state: ConsumerState = { taken: 0, held: 0 };
      const consumer = new Worker(queue, (job, token) => this.take(state, job, token), {
        connection: this.connection!,
        prefix: queuePrefix(this.options.namespace, this.options.redis),
        concurrency: WorkerService.share(this.takenNow(), count, i),
      });
      consumer.on('error', (err) => this.log.warn({ err }, 'queue consumer error'));
      this.consumerStates.set(consumer, state);
      return consumer;
    });
  }

  /** The session is gone: our items may be failed over now, so stop them (invariant I4). */
  private async onSessionLost(): Promise<void> {
    this.abortExecutions('ZooKeeper session lost; executions aborted');
    await this.closeAll(this.consumers.splice(0)).catch((err) => this.log.warn({ err }, 'closing the old consumers failed'));
  }

  /** Consumer `i`'s part of `total` over `count` consumers, as even as it goes (10 over 3: 4, 3, 3), at least 1. */
  private static share(total: number, count: number, i: number): number {
    return Math.max(1, Math.floor(total / count) + (i < total % count ? 1 : 0));
  }

  /**
   * The prefetch is for requests ahead of their fire time: they wait for it in the worker, so that
   * at the fire only a local timer stands before their handlers. A backlog of requests already due
   * gains nothing from it without monitorExecution: the whole prefetch stayed in flight, each
   * request alive for a hundred milliseconds or more, long enough to be copied by the young
   * generation's collector and promoted. So while the consumers take due requests of such jobs they
   * take only the handlers and a quarter more; the first request taken ahead of its fire brings
   * the prefetch back. With monitorExecution the requests in flight are also what the lock and
   * release multis are merged from: with fewer of them a quick run made more, smaller multis and
   * cost ZooKeeper and the worker more than the collector saved, so those keep the prefetch
   * (docs/design-notes.md, "Dispatch path"). With item leases a run costs no ZooKeeper request and
   * its Redis steps merge within a turn whatever the number in flight, so monitored jobs go as the others.
   */
  private adjustTaking(ahead: boolean, monitored: boolean): void {
    const prefetch = (monitored && !WorkerService.leased(this.options)) || ahead;
    if (prefetch === this.prefetching) return;
    this.prefetching = prefetch;
    const total = this.takenNow();
    this.consumers.forEach((consumer, i) => (consumer.concurrency = WorkerService.share(total, this.consumers.length, i)));
  }

  /** Requests the consumers take at once now, all of them together. */
  private takenNow(): number {
    return this.prefetching ? this.taking.ahead : this.taking.due;
  }

  /** A consumer hands a request over: counted for the consumer checks and for a replaced consumer's close. */
  private async take(state: ConsumerState, job: Job, token: string | undefined): Promise<string> {
    if (state.closed || this.graceOver) {
      // Fetched as the consumer was closed with force (BullMQ does not look at its pause after a
      // fetch): not run by a consumer whose completion BullMQ no longer records, nor after the
      // close's grace period, under a signal its abort did not reach. One retired but still open
      // runs it (its close waits for it): a draining worker's is on its way to nowhere else.
      const back = this.putBack(job, token);
      this.handingBack.add(back);
      try {
        await back;
      } finally {
        this.handingBack.delete(back);
      }
      throw new WaitingError();
    }
    state.taken++;
    state.held++;
    try {
      const status = await this.process(job, token);
      // Runs wait for a place (a fire's requests woken together, more than the concurrency): they
      // start first, and this completion (BullMQ's move to completed, its next fetch) follows in a
      // later turn. In the turn it ended, it came before them: each place freed by a no-op run let
      // the next start only behind the completions queued ahead of it, and the last of a fire of
      // 1,000 one-item jobs on 200 places started 80 ms after the first. Up to COMPLETIONS_PER_TURN
      // go a turn, so that timers (the next fire's) come between.
      if (this.handlers.queued > 0) await this.completions.next();
      return status;
    } finally {
      if (--state.held === 0) state.onIdle?.();
    }
  }

  private async process(job: Job, token: string | undefined): Promise<string> {
    const parsed = executionRequestSchema.safeParse(job.data);
    if (!parsed.success) {
      throw new ShardcronError(ErrorCodes.CORRUPT_DATA, `malformed execution request ${job.id}: ${parsed.error.message}`);
    }
    const request = parsed.data;
    const definition = this.jobs.definition(request.job);
    if (!definition) {
      // Given up here (the queue fails it): still an item of its fire that ended.
      await this.fires.itemEnded(undefined, request);
      throw new ShardcronError(ErrorCodes.INVALID_CONFIG, `this instance has no handler for job ${request.job}`, { job: request.job });
    }
    // The signal of when it was taken: an abort meanwhile (session lost, forced shutdown) swaps in a
    // new controller, and this request must not run under that one.
    const signal = this.abortAll.signal;
    const reading = this.jobs.configRead(request.job);
    if (reading) {
      await reading.catch(() => undefined);
      if (signal.aborted) {
        await this.putBack(job, token);
        throw new WaitingError();
      }
    }
    const takenAt = Date.now();
    const early = request.fireTime > takenAt;
    this.adjustTaking(early, this.jobs.config(request.job).monitorExecution);
    // Requests arrive up to the leader's dispatch lead before their nominal time: hold them until
    // it, and take the item lock meanwhile, so that at the fire time only the timer they share
    // stands before the handler. A due one starts now, or right behind a fire it lets go first.
    const ahead = early ? this.executor.lockAhead(request) : undefined;
    const yieldTo = early ? undefined : this.yieldTo(job, request, takenAt);
    const wakeAt = yieldTo ?? (early ? Math.min(request.fireTime, takenAt + MAX_EARLY_HOLD_MS) : takenAt);
    const due = await this.alarm.wait(wakeAt, signal, yieldTo !== undefined);
    const lockedAhead = ahead && (await ahead);
    if (!due || signal.aborted) {
      // Stopped meanwhile (session lost, forced shutdown): not run, so put back, as an abort is.
      if (lockedAhead) await this.executor.unlockAhead(lockedAhead);
      await this.putBack(job, token);
      throw new WaitingError();
    }
    let status: Awaited<ReturnType<ItemExecutor['run']>>;
    try {
      // A request we take again was put back after an abort (it must run), or deferred behind
      // catch-up work (then it says so, `waited`, and waits no longer than its limit).
      const mustRun = mustRunAgain(job);
      status = await this.executor.run(definition, request, { mustRun, lockedAhead, enqueuedAt: job.timestamp });
    } catch (err) {
      if (!isTransientError(err)) {
        // The queue fails the request for good: its item ended for its fire (given up).
        await this.fires.itemEnded(definition, request);
        throw err;
      }
      // ZooKeeper (or, for an item lease's record, Redis) is unreachable for now: keep the request
      // rather than fail it. If our session survives we take it again; if not, the leader moves it
      // with the rest of this queue.
      this.log.warn({ err, job: request.job, item: request.item }, 'ZooKeeper or Redis unavailable; request put back');
      await job.moveToDelayed(Date.now() + TRANSIENT_RETRY_MS, token);
      throw new DelayedError();
    }
    if (status === 'deferred') {
      // Waiting for its item behind catch-up work: a request that was not owed work says so.
      if (!owedWork(job, request)) await job.updateData({ ...request, waited: true });
      await job.moveToDelayed(Date.now() + FAILOVER_RETRY_MS, token);
      throw new DelayedError();
    }
    if (status === 'aborted') {
      // Not done: put the request back. If our session survives, we take it again; if it is lost,
      // the leader moves every waiting request of this queue to a live instance. Either way the
      // item runs, which a "completed" mark would have prevented. It must run when taken again,
      // with no limit: a request that waited behind catch-up work stops saying so.
      if (request.waited) await job.updateData({ ...request, waited: undefined });
      await this.putBack(job, token);
      throw new WaitingError();
    }
    // Marks the BullMQ job failed with the job's own error, so the queue's tools (Bull Board) show
    // it; the job's errorHandler already ran. THROW rethrows the error as it is.
    if (status === 'failed' || status === 'timeout') {
      const error = this.executor.takeFailure(request);
      if (definition.errorHandler === 'THROW' && error instanceof Error) throw error;
      const why = error instanceof Error ? error.message : error === undefined ? status : String(error);
      throw new ShardcronError(ErrorCodes.EXECUTION_FAILED, `job ${request.job} item ${request.item} ${status === 'timeout' ? 'timed out' : 'failed'}: ${why}`, { job: request.job, item: request.item }, { cause: error });
    }
    return status;
  }

  /**
   * The fire a request already due lets go first (WorkerServiceOptions.yieldBeforeFireMs), if any:
   * only a prioritized request of a fire's own run. Owed work, a MISFIRE run or one that waits for
   * an older fire goes at once: waiting, it would be invisible to its item's turns, and a newer
   * fire locked ahead could run before it.
   */
  private yieldTo(job: Job, request: ExecutionRequest, now: number): number | undefined {
    const window = this.options.yieldBeforeFireMs ?? DEFAULT_YIELD_BEFORE_FIRE_MS;
    if (window === 0 || !job.opts.priority || request.source === 'MISFIRE' || request.after !== undefined || owedWork(job, request)) return undefined;
    return this.alarm.nextWake(now, window);
  }

  /**
   * Graceful drain (DESIGN.md flow 9): take nothing new, mark the instance `draining` so the leader
   * moves our waiting requests at once, let running executions finish within the grace period,
   * abort the rest, and only then remove the instance nodes.
   */
  private async doClose(): Promise<void> {
    // A session renewed from now on registers nothing; one under way stops before its next write.
    this.registration.stopRegistering();
    const consumers = this.consumers.splice(0);
    const grace = this.options.shutdownGraceMs ?? 30_000;
    // Each consumer is paused now and closes with force once the requests it handed over have
    // returned, as a replaced one does. BullMQ's close without force also waits for its blocking
    // connection, which a Redis restart can leave waiting for good (ioredis keeps a client
    // disconnected while it waits to reconnect in `reconnecting`; BullMQ #4585); and a close with
    // force after it is the same close (BullMQ keeps the first one), so that close never ended.
    this.log.debug('closing: retiring the consumers');
    this.retire(consumers);
    if (consumers.length > 0 && this.options.zk.state === 'connected') {
      this.log.debug('closing: marking the instance draining');
      await this.registration.setState('draining');
      this.log.info({ graceMs: grace }, 'draining: waiting for running executions');
    }
    if (this.watchdog) clearInterval(this.watchdog);
    if (this.consumerCheck) clearInterval(this.consumerCheck);
    for (const off of this.unsubscribe.splice(0)) off();
    if (this.retiring.size > 0) {
      const closed = Promise.all([...this.retiring]).then(() => true);
      if (!(await within(closed, grace))) {
        this.log.warn({ graceMs: grace }, 'grace period over: aborting the executions still running');
        this.graceOver = true;
        this.abortExecutions('shutdown grace period exceeded');
        // The aborted runs release their items and put their requests back through the connection
        // quit below: give them a moment (a handler that ignores its signal does not end by it).
        await within(closed, ABORTED_RETURN_MS);
        await this.closeAll(consumers).catch(() => undefined);
      }
    }
    // Each stage is logged before it starts: a close that does not end says what it waits for.
    this.log.debug('closing: consumers closed, marking the queue drained');
    // A fetch under way when its consumer closed hands its request back meanwhile (BullMQ's close
    // with force does not wait for it): back in the queue before the mark says what is there.
    await within(Promise.allSettled([...this.handingBack]), MARK_DRAINED_MS);
    // A registration that got past its last check wrote a new entry: its queue is the one to mark.
    await this.registration.registrationSettled();
    await this.markDrained();
    this.log.debug('closing: leaving the jobs');
    await this.jobs.stopFollowing();
    this.log.debug('closing: unregistering');
    await this.registration.unregister().catch(() => undefined);
    this.log.debug('closing: letting go of the items');
    await this.jobs.close();
    this.log.debug('closing: writing the history left');
    // What the runs recorded is written before the connection it goes through closes.
    await this.history?.close();
    this.log.debug('closing: quitting the Redis connections');
    await this.connection?.quit().catch(() => undefined);
    if (this.leaseConnections) {
      await this.leaseConnections.commands.quit().catch(() => undefined);
      this.leaseConnections.asks.disconnect();
    }
    this.removeAllListeners();
  }
}
