/**
 * The item runner (DESIGN.md flow 4): one execution request from lock to release. The rounds of a
 * request are its own run, then a run per misfire mark it finds; each round takes the item's lock
 * ({@link ItemLock}), calls the job's code ({@link HandlerCalls}), releases the lock with the
 * completion, and only then reports the run. With monitorExecution the lock is ZooKeeper's
 * `running` node (a lease kept across fires, or a node per run), which makes I1 hold; a request that finds it taken by a regular run sets `misfire`
 * (when enabled) and the holder runs the item once more when it finishes. Without monitorExecution
 * the same rules apply within this process only.
 */
import type { Semaphore } from '../shared/concurrency';
import type { JobConfig } from '../shared/config/job-config';
import type { ExecutionStatus, ResolvedJobDefinition } from '../shared/config/job-definition';
import type { Logger } from '../shared/logger';
import type { ExecutionRequest } from '../shared/registry/execution-request';
import { registryPaths } from '../shared/registry/registry-paths';
import type { ItemRecords } from '../shared/registry/item-records';
import type { ZkClient } from '../shared/zk';
import type { FireListeners } from './fire-listeners';
import { HandlerCalls, type ExecutionEvent, type HandlerCallContext } from './handler-call';
import { isBusy, itemKey, ItemLocks, type Hold, type ItemLock, type MisfireMark, type Released } from './item-lock';
import { ItemTurns } from './item-turns';
import { LeaseItemLock } from './lease-item-lock';
import { LocalItemLock } from './local-item-lock';
import { MisfireMarks } from './misfire-marks';
import { NextFires } from './next-fires';
import { ZkItemLock } from './zk-item-lock';

export type { ExecutionEvent } from './handler-call';

/** How long a moved request waits for the one moved just before it (`ExecutionRequest.after`), at most. */
const AFTER_WAIT_MS = 2_000;
/** How often such a request looks whether the earlier one has come. */
const ARRIVAL_POLL_MS = 100;

/** Why a completed run is reported aborted: its completion is not known to be recorded. */
const NOT_RECORDED = 'the completion could not be recorded in ZooKeeper (session lost or unreachable)';
const MAYBE_RECORDED =
  'the session was lost before ZooKeeper answered the release: the completion may have been recorded, and a failed-over request skips the fire if it was';

/** An item lock taken ahead of its request's fire time (`ItemExecutor.lockAhead`). */
export interface EarlyLock {
  readonly request: ExecutionRequest;
  readonly hold: Hold;
}

export interface ExecutorContext {
  zk: ZkClient;
  instanceId: string;
  log: Logger;
  /** The current config of a job (kept fresh by a watch), falling back to the definition's. */
  config(job: string): JobConfig;
  /** False once the session this execution started under is gone or suspended. */
  owns(sessionId: string): boolean;
  /** The signal aborted when every execution must stop (session lost, forced shutdown). */
  abortSignal(): AbortSignal;
  /** The places of the handlers running at once (see HandlerCallContext.handlers). */
  handlers: Semaphore;
  record(event: ExecutionEvent): void;
  /** Every execution's record, once it ended (the history's input). */
  onRecord?: HandlerCallContext['onRecord'];
  /** What executors may ask (a pending reshard). */
  environment?: HandlerCallContext['environment'];
  /** Where `{ webhook }` error handlers post. */
  webhooks?: HandlerCallContext['webhooks'];
  /** The once-per-fire listeners of requests that carry `fireItems`. */
  fires?: FireListeners;
  /**
   * With item leases (SHARDCRON_ITEM_LEASE): the item records in Redis, once connected. Unset:
   * monitorExecution's lock is the `running` node created and deleted per run.
   */
  itemRecords?: () => ItemRecords;
}

/** Options of {@link ItemExecutor.run}. */
export interface RunOptions {
  /** The request was put back after an abort: it must run. */
  mustRun?: boolean;
  /** The lock taken while the request waited for its fire time. */
  lockedAhead?: EarlyLock;
  /** When the request was enqueued (the BullMQ job's timestamp): a catch-up wait ends at the job's next fire after it. */
  enqueuedAt?: number;
}

/** Runs execution requests, one at a time per item. */
export class ItemExecutor {
  private readonly lock: ItemLock;
  /** The monitored lock when it is a lease kept across fires. */
  private readonly leases: LeaseItemLock | undefined;
  private readonly turns: ItemTurns;
  private readonly calls: HandlerCalls;
  /** The limit of a catch-up wait: the job's next fire. */
  private readonly nextFires = new NextFires();
  /** The error of each request whose run failed, until the worker takes it ({@link takeFailure}). */
  private readonly failures = new WeakMap<ExecutionRequest, unknown>();

  constructor(private readonly ctx: ExecutorContext) {
    const onReleased = (key: string) => this.turns.pass(key);
    const { zk, instanceId, log, itemRecords } = ctx;
    this.leases = itemRecords ? new LeaseItemLock({ zk, instanceId, log, records: itemRecords, onReleased, owns: (sessionId) => ctx.owns(sessionId) }) : undefined;
    const monitored = this.leases ?? new ZkItemLock({ zk, instanceId, log, marks: new MisfireMarks(zk), onReleased });
    this.lock = new ItemLocks(monitored, new LocalItemLock(onReleased));
    this.turns = new ItemTurns(this.lock, () => ctx.abortSignal());
    this.calls = new HandlerCalls(ctx);
  }

  /** Another instance asked for an item whose lease we hold (item leases only). */
  leaseAsked(job: string, item: number): void {
    this.leases?.asked(job, item);
  }

  /** The leases held and not in use (item leases only): what to look at after a missed ask. */
  idleLeases(): Array<{ job: string; item: number }> {
    return this.leases?.idleLeases() ?? [];
  }

  /** Forgets what this process remembers of a removed job's items. */
  forgetJob(job: string): void {
    this.lock.forgetJob(job);
  }

  /**
   * Executes the request; resolves with the final status of its last run, or `deferred` when the
   * request must wait for its item and another process holds it: a request that must run (a
   * FAILOVER, one put back after an abort, a late fire after a leaderless window) is work that was
   * assigned and not done, and a request that finds the item catching up waits its turn, both under
   * their own fire times instead of being folded into a misfire that a newer fire could coalesce.
   * Behind a run of this process such a request waits here, oldest fire first.
   */
  async run(definition: ResolvedJobDefinition, request: ExecutionRequest, options: RunOptions = {}): Promise<ExecutionStatus | 'deferred'> {
    const config = this.ctx.config(request.job);
    const early = options.lockedAhead;
    // Only requests of jobs with once-per-fire listeners carry fireItems: the others skip all of it.
    if (request.fireItems !== undefined && this.ctx.fires) {
      if (!(await this.ctx.fires.beforeItem(definition, request))) {
        if (early) await this.unlockAhead(early);
        return 'aborted';
      }
      if (request.givenUp) {
        await this.ctx.fires.itemEnded(definition, request);
        return 'skipped';
      }
    } else if (definition.config.fireListeners) this.ctx.fires?.warnUnannounced(definition);
    if (config.disabled) {
      if (early) await this.unlockAhead(early);
      const skipped = this.calls.skipped(request, 'job disabled');
      if (request.fireItems !== undefined) await this.ownRoundEnded(definition, request);
      return skipped;
    }
    // A lock taken ahead belongs to the session it was taken on: if that session is gone, or out of
    // contact for too long, while the request was held, the item may be someone else's by now.
    if (early && !this.ctx.owns(early.hold.session!.sessionId)) {
      await this.unlockAhead(early);
      return 'aborted';
    }
    const key = itemKey(request);
    this.turns.enter(key, request.fireTime);
    try {
      return await this.runRounds(definition, config, request, key, options);
    } finally {
      this.turns.leave(key, request.fireTime);
    }
  }

  /**
   * Takes the item's lock now for a request held until its fire time (monitorExecution only), so
   * that at the fire time no round trip stands before the handler. Only a free item is taken: one
   * found running is left alone, with no misfire mark, since its run may well end before the fire
   * time; the request then locks at the fire time as usual. Undefined (at once, or as the
   * promise's value) when not taken.
   */
  lockAhead(request: ExecutionRequest): Promise<EarlyLock | undefined> | undefined {
    const config = this.ctx.config(request.job);
    // Without monitorExecution (most requests held ahead) nothing is locked ahead: no promise either.
    if (request.givenUp || config.disabled || !config.monitorExecution) return undefined;
    const key = itemKey(request);
    // Requests of ours for older fires of the item come first (waiting for it, or on their way).
    if (this.turns.hasWaiters(key) || this.turns.olderInFlight(key, request.fireTime)) return undefined;
    return this.tryLockAhead(config, request);
  }

  private async tryLockAhead(config: JobConfig, request: ExecutionRequest): Promise<EarlyLock | undefined> {
    try {
      const acquired = await this.lock.acquire(config, request, { markOnBusy: false, waitBehindCatchUp: false, catchUp: request.catchUp === true });
      return isBusy(acquired) ? undefined : { request, hold: acquired };
    } catch (err) {
      this.ctx.log.debug({ err, job: request.job, item: request.item }, 'could not lock ahead; locking at the fire time');
      return undefined;
    }
  }

  /**
   * The error of a request whose run ended `failed` or `timeout` (its last round's), once: what the
   * worker fails the queue's job with, so the queue's tools show the job's own error.
   */
  takeFailure(request: ExecutionRequest): unknown {
    const error = this.failures.get(request);
    this.failures.delete(request);
    return error;
  }

  /** Gives back a lock taken ahead whose request does not run (stopped while it was held). */
  async unlockAhead(lock: EarlyLock): Promise<void> {
    const { request, hold } = lock;
    try {
      await this.lock.release(request, hold, { completed: false, readMark: false });
    } catch (err) {
      this.ctx.log.warn({ err, job: request.job, item: request.item }, 'could not give back an item locked ahead');
    }
  }

  /** The rounds of one request: its own run, then a run per misfire mark it finds. */
  private async runRounds(definition: ResolvedJobDefinition, config: JobConfig, request: ExecutionRequest, key: string, options: RunOptions): Promise<ExecutionStatus | 'deferred'> {
    // Owed work waits for its item whoever holds it: a FAILOVER, a request put back after an abort,
    // a fire the leader dispatched late after a leaderless window (`catchUp`); so does a manual
    // trigger, which runs once more after a run it finds (an operator asked for a run now).
    const owed = request.source === 'FAILOVER' || options.mustRun === true || request.catchUp === true;
    const mustRun = owed || request.source === 'TRIGGER';
    let catchUp = owed || request.waited === true;
    let current = request;
    /** The misfire mark the current round stands for; deleted only when that round completes. */
    let mark: MisfireMark | undefined;
    let status: ExecutionStatus = 'skipped';
    this.failures.delete(request);
    for (let round = 0; ; round += 1) {
      let hold: Hold | undefined = round === 0 ? options.lockedAhead?.hold : undefined;
      if (!hold) {
        const taken = round === 0 ? await this.takeInTurn(config, current, key, mustRun, catchUp, options.enqueuedAt) : await this.takeForRerun(config, current, mustRun);
        if (taken === 'deferred' || taken === 'aborted') return taken;
        if (taken === 'skipped' && round === 0) {
          if (request.fireItems !== undefined) await this.ownRoundEnded(definition, request);
          return 'skipped';
        }
        if (taken === 'skipped') return status; // a later round's mark stays for whoever holds the item
        hold = taken.hold;
        catchUp ||= taken.catchUp;
      }
      let released: Released;
      if (hold.done?.includes(current.fireTime)) {
        // Awaited even when the lock answers at once: the request its release woke (the oldest
        // waiting for the item) takes it before a re-run of this one can (a replay, so rare).
        released = await this.lock.release(current, hold, { completed: false, mark, readMark: config.misfire });
        const skipped = this.calls.skipped(current, 'this fire of the item already completed');
        // A later round skipped is no run: the status stays that of the run this request made.
        if (round === 0) status = skipped;
      } else {
        let error: unknown;
        ({ status, released, error } = await this.runHeld(definition, config, current, hold, mark));
        if (status === 'failed' || status === 'timeout') this.failures.set(request, error);
        else this.failures.delete(request);
      }
      if (status === 'aborted') return status;
      // The item ended for the request's own fire; later rounds stand for other fires, whose own
      // requests counted the item when they found it running (skipped).
      if (round === 0 && request.fireItems !== undefined) await this.ownRoundEnded(definition, request);
      // The release read the mark right after it when it could; otherwise read it now.
      let next = released.mark ?? undefined;
      if (released.mark === undefined && config.misfire) {
        const answer = this.lock.peekMisfire(config, current);
        next = answer instanceof Promise ? await answer : answer;
      }
      // The same mark again means we could not delete it: stop rather than loop (the next holder
      // takes it). A re-created mark is new even at version 0: it carries another fire time.
      if (!next || (mark && next.version === mark.version && next.fireTime === mark.fireTime)) return status;
      mark = next;
      // The re-run stands for the fire that found the item running, under that fire's time.
      current = { ...current, source: 'MISFIRE', fireTime: next.fireTime };
    }
  }

  /**
   * The lock of a request's own round, in its turn among this process's requests for the item.
   * `skipped` when it is a misfire (recorded), `deferred` when it must wait for another process.
   */
  private async takeInTurn(
    config: JobConfig,
    request: ExecutionRequest,
    key: string,
    mustRun: boolean,
    catchUp: boolean,
    enqueuedAt: number | undefined,
  ): Promise<{ hold: Hold; catchUp: boolean } | 'skipped' | 'deferred' | 'aborted'> {
    // The fire moved with this one just before it goes first once it is here (the consumers take
    // requests in any order), and so does any older fire of the item taken by this process.
    if (request.after !== undefined) {
      const until = Date.now() + AFTER_WAIT_MS;
      const after = request.after;
      while (!this.turns.arrived(key, after) && Date.now() < until) {
        if (!(await this.turns.wait(key, request.fireTime, () => this.turns.arrived(key, after), ARRIVAL_POLL_MS))) return 'aborted';
      }
    }
    // Catch-up work only: a regular fire that finds an older run of its item takes the misfire path.
    while (catchUp && this.turns.olderInFlight(key, request.fireTime)) {
      if (!(await this.turns.wait(key, request.fireTime))) return 'aborted';
    }
    // A request waits behind catch-up work until its job's next fire after it was enqueued is due;
    // then it is a fire that found its item running (misfire policy). Bounded so that a job whose
    // runs outlast its period does not pile up waiting fires for ever.
    const waitLimit = mustRun ? Number.POSITIVE_INFINITY : this.nextFires.after(config, Math.max(request.fireTime, enqueuedAt ?? 0));
    for (;;) {
      const waiting = Date.now() < waitLimit;
      const answer = this.lock.acquire(config, request, { markOnBusy: !mustRun, waitBehindCatchUp: waiting, catchUp });
      const acquired = answer instanceof Promise ? await answer : answer;
      if (!isBusy(acquired)) return { hold: acquired, catchUp };
      // Leased elsewhere with no run in progress: its holder was asked for it and lets go at once.
      // Or the lock could not tell who holds it: try again shortly.
      if (acquired.handoff || acquired.unsettled) return 'deferred';
      if (!mustRun && !(waiting && acquired.catchUp)) {
        this.calls.skipped(request, config.misfire ? 'item running elsewhere; misfire recorded' : 'item running elsewhere; fire skipped (misfire off)');
        return 'skipped';
      }
      if (!acquired.local) return 'deferred';
      // Behind a run of our own: wait for its release here, then try again. A run that follows
      // catch-up work is catch-up work itself.
      catchUp ||= acquired.catchUp;
      if (!(await this.turns.wait(key, request.fireTime))) return 'aborted';
    }
  }

  /** The lock of a misfire re-run: the item free, else the mark stays for whoever holds it. */
  private async takeForRerun(config: JobConfig, request: ExecutionRequest, mustRun: boolean): Promise<{ hold: Hold; catchUp: boolean } | 'skipped'> {
    const acquired = await this.lock.acquire(config, request, { markOnBusy: !mustRun, waitBehindCatchUp: false, catchUp: false });
    return isBusy(acquired) ? 'skipped' : { hold: acquired, catchUp: false };
  }

  /**
   * Runs a held round and releases it. The release runs before the run's outcome is reported: a run
   * counts as completed only once its completion is recorded with the release of the lock. One that
   * could not be (the session was lost between the handler's return and the release) is reported
   * aborted and its request goes back to the queue, instead of being logged as done while ZooKeeper
   * does not know it, which let its failed-over request complete the fire a second time.
   */
  private async runHeld(
    definition: ResolvedJobDefinition,
    config: JobConfig,
    request: ExecutionRequest,
    hold: Hold,
    mark: MisfireMark | undefined,
  ): Promise<{ status: ExecutionStatus; released: Released; error?: unknown }> {
    const failoverMarker = request.source === 'FAILOVER' && (await this.markFailover(request));
    let run: Awaited<ReturnType<HandlerCalls['call']>>;
    try {
      run = await this.calls.call(definition, config, request, hold.session?.sessionId ?? this.ctx.zk.sessionId);
    } catch (err) {
      try {
        await this.lock.release(request, hold, { completed: false, readMark: false });
      } catch {
        // The call's own error is the one to report.
      }
      if (failoverMarker) await this.unmarkFailover(request);
      throw err;
    }
    const completed = run?.outcome.status === 'completed';
    let released: Released;
    try {
      const answer = this.lock.release(request, hold, { completed, mark: completed ? mark : undefined, readMark: config.misfire });
      released = answer instanceof Promise ? await answer : answer;
    } catch (err) {
      this.ctx.log.warn({ err, job: request.job, item: request.item }, 'could not release the item after its run');
      released = { recorded: false, mark: undefined };
    }
    if (failoverMarker) await this.unmarkFailover(request);
    // Stopped before it got a place: nothing ran, and that was recorded.
    if (!run) return { status: 'aborted', released };
    let status = run.outcome.status;
    let reason: string | undefined;
    if (completed && !released.recorded) {
      status = 'aborted';
      reason = released.unknown ? MAYBE_RECORDED : NOT_RECORDED;
    }
    const listening = this.calls.finish(definition, request, run, status, reason);
    if (listening) await listening;
    return { status, released, error: run.outcome.error };
  }

  /**
   * The request's item ended for its fire, whatever the outcome (not when it goes back to the queue):
   * counted for the fire's afterFire. Only for requests with `fireItems` (the callers look first:
   * an async call per request for nothing was a promise and a frame on every other request).
   */
  private async ownRoundEnded(definition: ResolvedJobDefinition, request: ExecutionRequest): Promise<void> {
    await this.ctx.fires?.itemEnded(definition, request);
  }

  /** `sharding/{i}/failover` tells operators which instance runs a failed-over item. */
  private async markFailover(request: ExecutionRequest): Promise<boolean> {
    try {
      await this.ctx.zk.create(registryPaths.shardingFailover(request.job, request.item), this.ctx.instanceId, 'ephemeral');
      return true;
    } catch (err) {
      this.ctx.log.debug({ err, job: request.job, item: request.item }, 'failover marker not written');
      return false;
    }
  }

  private async unmarkFailover(request: ExecutionRequest): Promise<void> {
    await this.ctx.zk.delete(registryPaths.shardingFailover(request.job, request.item)).catch(() => undefined);
  }
}
