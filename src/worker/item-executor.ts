import { onAbort } from '../shared/abort-listeners';
import type { Semaphore } from '../shared/concurrency';
import { ErrorCodes, ShardcronError } from '../shared/errors';
import type { ExecutionRequest, ExecutionSource } from '../shared/registry/execution-request';
import type { JobConfig } from '../shared/config/job-config';
import { formatTaskId, type ExecutionOutcome, type ExecutionStatus, type ResolvedJobDefinition, type ShardingContext } from '../shared/config/job-definition';
import type { Logger } from '../shared/logger';
import { registryPaths } from '../shared/registry/registry-paths';
import { parseCron, type CronSchedule } from '../shared/cron/cron';
import { decodeRunningNode, encodeRunningNode, type RunningHolder } from '../shared/registry/running-node';
import { parseShardingItemParameters } from '../shared/sharding/sharding-item-parameters';
import { isRetryable, ZkError, type ZkClient, type ZkOp, type ZkSessionOps, type ZkStat } from '../shared/zk';
import { formatCompletedFires, parseCompletedFires, withCompletedFire } from '../shared/registry/completed-fires';
import { MultiBatcher, type NodeRead } from './multi-batcher';

/** A misfire mark as read: the fire it asks for, and the node version to delete it with. */
interface MisfireMark {
  fireTime: number;
  version: number;
}

/** An item lock as held: with monitorExecution, the session owning `running` and the completed fires read under it. */
interface Hold {
  session?: ZkSessionOps;
  done?: readonly number[];
  /**
   * The item node's `cversion` after this process's last release of the item, when that release
   * knew the item had no misfire mark (see `releaseMonitored`); only for a lock whose cached view of
   * the item was proven fresh.
   */
  markFree?: number;
}

/**
 * What this process knows of an item's `sharding/{i}` node from its last read or write: the
 * version, the completed fires, and the `cversion` after its last release when no misfire mark was
 * there then.
 */
interface SeenItem {
  version: number;
  done: readonly number[];
  markFree?: number;
}

/**
 * An item found taken: by a run of this process (`local`) or of another one, and whether that run
 * is catch-up work (see `ExecutionRequest.catchUp`), which a request waits for.
 */
interface Busy {
  busy: true;
  local: boolean;
  catchUp: boolean;
}

/** What an attempt to lock an item got. */
type Acquired = Hold | Busy;

const isBusy = (acquired: Acquired): acquired is Busy => (acquired as Busy).busy === true;

/** How {@link ItemExecutor.acquire} treats an item found running. */
interface AcquireOptions {
  /** Leave a misfire mark (misfire on) when the holder is a regular run. */
  markOnBusy: boolean;
  /** Return at once, without a mark, when the holder is a catch-up run: the request waits for it. */
  waitBehindCatchUp: boolean;
  /** This run is catch-up work (said in the lock's data). */
  catchUp: boolean;
}

/** How often a request waiting for its item behind a run of this process looks again anyway. */
const TURN_POLL_MS = 500;
/** How long a moved request waits for the one moved just before it (`ExecutionRequest.after`), at most. */
const AFTER_WAIT_MS = 2_000;
/** How often such a request looks whether the earlier one has come. */
const ARRIVAL_POLL_MS = 100;

/** An item lock taken ahead of its request's fire time (`ItemExecutor.lockAhead`). */
export interface EarlyLock {
  readonly request: ExecutionRequest;
  readonly hold: Hold;
}

/**
 * What a release did: whether the multi with the completion (or the consumed mark) committed, and
 * the misfire mark read right after it: null when there was none, undefined when not read.
 */
interface Released {
  recorded: boolean;
  mark: MisfireMark | null | undefined;
  /** The release's answer was lost and its session ended before we could look: it may have gone through. */
  unknown?: boolean;
}

/** Why a completed run is reported aborted: its completion is not known to be recorded. */
const NOT_RECORDED = 'the completion could not be recorded in ZooKeeper (session lost or unreachable)';
const MAYBE_RECORDED =
  'the session was lost before ZooKeeper answered the release: the completion may have been recorded, and a failed-over request skips the fire if it was';

/** A run's status once its release is over, with the reason when the release changed it. */
interface Settled {
  status: ExecutionStatus;
  reason?: string;
}

/** The name of the misfire mark under its item's node. */
const MISFIRE_NODE = registryPaths.shardingMisfire('job', 0).split('/').pop()!;

const is = (err: unknown, ...codes: string[]): boolean => err instanceof ZkError && codes.includes(err.code);

/** What this process keys an item by in its maps. */
const itemKey = (request: ExecutionRequest): string => `${request.job}|${request.item}`;

/** One line of the execution log: what ran where, for which fire, and how it ended. */
export interface ExecutionRecord {
  event: 'start' | 'finish';
  job: string;
  fireTime: number;
  item: number;
  instanceId: string;
  source: ExecutionSource;
  /** On `finish`: how it ended; `skipped` executions, and those stopped before their handler started, have no `start`. */
  status?: ExecutionStatus;
  reason?: string;
  at: number;
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
  /**
   * The places of the handlers running at once (the instance's concurrency). A place covers the
   * `beforeExecute` listener, the handler and its error handler, not the lock's round trips nor the
   * `afterExecute` listener, which runs once the release answered.
   */
  handlers: Semaphore;
  record(record: ExecutionRecord): void;
}

/**
 * Runs one execution request (DESIGN.md flow 4). With monitorExecution the `running` ephemeral
 * node is the lock that makes I1 hold: whoever creates it runs the item; a request that finds it
 * taken sets `misfire` (when enabled) and the holder runs the item once more when it finishes.
 * Without monitorExecution the same rule applies within this process only.
 */
export class ItemExecutor {
  /** Items (`{job}|{item}`) an execution of this process holds (monitorExecution off): whether it catches up. */
  private readonly localRunning = new Map<string, boolean>();
  /**
   * Requests waiting for an item a run of this process holds, oldest fire first: each release of
   * the item lets the oldest try again, so an item's stranded fires run in fire order here.
   */
  private readonly waiters = new Map<string, Array<{ fireTime: number; wake: () => void }>>();
  /**
   * Fire times of the requests of this process between the start and the end of `run`, per item:
   * an item's older fire goes first, also when the consumers happened to take a newer one first.
   */
  private readonly inFlight = new Map<string, number[]>();
  /** Fire times whose requests left `run` here while others of their item were in it (see `after`). */
  private readonly departed = new Map<string, Set<number>>();
  /** Each cron schedule, parsed once per config, for the limit of a catch-up wait. */
  private readonly schedules = new WeakMap<JobConfig, CronSchedule | null>();
  /**
   * With monitorExecution: per item, the executions of this process between sending a lock
   * create and the end of their release (or of the failed attempt). A `running` node of our own
   * session is an orphan only if no other execution of ours has the item claimed.
   */
  private readonly claims = new Map<string, number>();
  /** Per item, how many claims of this process ended with a release: an orphan seen before one ended is stale. */
  private readonly releases = new Map<string, number>();
  /** item key -> latest fire time that found it running (monitorExecution off). */
  private readonly localMisfire = new Map<string, number>();
  /**
   * Per item (monitorExecution): its `sharding/{i}` node as this process last read or wrote it,
   * the version and the completed fires. Bounded by the items this worker ever held.
   */
  private readonly seen = new Map<string, SeenItem>();
  /** Lock creates and releases issued together share one transaction. */
  private readonly batcher = new MultiBatcher();
  /** Each config's `shardingItemParameters`, parsed by item (a config object is replaced, never changed). */
  private readonly parameters = new WeakMap<JobConfig, Record<number, string>>();

  constructor(private readonly ctx: ExecutorContext) {}

  /**
   * Forgets what this process remembers of the job's items (their `sharding/{i}` versions): the
   * job was removed, and a job added again under the name has new item nodes, whose versions
   * start over and could match a remembered one.
   */
  forgetJob(job: string): void {
    for (const key of this.seen.keys()) if (key.slice(0, key.lastIndexOf('|')) === job) this.seen.delete(key);
  }

  /**
   * Executes the request; resolves with the final status of its last run, or `deferred` when the
   * request must wait for its item and another process holds it: a request that must run (a
   * FAILOVER, or one put back after an abort) is work that was assigned and not done, and a request
   * that finds the item catching up (see `ExecutionRequest.catchUp`) waits its turn, both under
   * their own fire times instead of being folded into a misfire that a newer fire could coalesce.
   * Behind a run of this process such a request waits here, oldest fire first.
   */
  async run(
    definition: ResolvedJobDefinition,
    request: ExecutionRequest,
    options: { mustRun?: boolean; lockedAhead?: EarlyLock; enqueuedAt?: number } = {},
  ): Promise<ExecutionStatus | 'deferred'> {
    const config = this.ctx.config(request.job);
    const early = options.lockedAhead;
    if (config.disabled) {
      if (early) await this.unlockAhead(early);
      return this.skipped(request, 'job disabled');
    }
    // A lock taken ahead belongs to the session it was taken on: if that session is gone, or out of
    // contact for too long, while the request was held, the item may be someone else's by now.
    if (early && !this.ctx.owns(early.hold.session!.sessionId)) {
      await this.unlockAhead(early);
      return 'aborted';
    }
    const key = itemKey(request);
    // Owed work waits for its item whoever holds it: a FAILOVER, a request put back after an abort,
    // a fire the leader dispatched late after a leaderless window (`catchUp`).
    const mustRun = request.source === 'FAILOVER' || options.mustRun === true || request.catchUp === true;
    // A request waits behind catch-up work until its job's next fire after it was enqueued is due;
    // then it is a fire that found its item running (misfire policy). Bounded so that a job whose
    // runs outlast its period does not pile up waiting fires for ever.
    const waitLimit = mustRun ? Number.POSITIVE_INFINITY : this.nextFireAfter(config, Math.max(request.fireTime, options.enqueuedAt ?? 0));
    let catchUp = mustRun || request.waited === true;
    const inFlight = this.inFlight.get(key) ?? [];
    inFlight.push(request.fireTime);
    this.inFlight.set(key, inFlight);
    // A newer fire of the item may be waiting for this one to arrive (`after`).
    this.passTurn(key);
    try {
      return await this.runRounds(definition, config, request, key, mustRun, catchUp, waitLimit, early);
    } finally {
      inFlight.splice(inFlight.indexOf(request.fireTime), 1);
      if (inFlight.length === 0 && this.inFlight.get(key) === inFlight) {
        this.inFlight.delete(key);
        this.departed.delete(key);
      } else {
        let departed = this.departed.get(key);
        if (!departed) this.departed.set(key, (departed = new Set()));
        departed.add(request.fireTime);
      }
      this.passTurn(key);
    }
  }

  /** The rounds of one request: its own run, then a run per misfire mark it finds (DESIGN.md flow 4). */
  private async runRounds(
    definition: ResolvedJobDefinition,
    config: JobConfig,
    request: ExecutionRequest,
    key: string,
    mustRun: boolean,
    catchUp: boolean,
    waitLimit: number,
    early: EarlyLock | undefined,
  ): Promise<ExecutionStatus | 'deferred'> {
    let current: ExecutionRequest = request;
    /** The misfire mark the current round stands for; deleted only when that round completes. */
    let mark: MisfireMark | undefined;
    let status: ExecutionStatus = 'skipped';
    for (let round = 0; ; round += 1) {
      let hold: Hold | undefined = round === 0 ? early?.hold : undefined;
      // The fire moved with this one just before it goes first once it is here (the consumers take
      // requests in any order), and so does any older fire of the item taken by this process.
      if (!hold && round === 0 && request.after !== undefined) {
        const until = Date.now() + AFTER_WAIT_MS;
        const after = request.after;
        while (!this.arrived(key, after) && Date.now() < until) {
          if (!(await this.waitForTurn(key, current.fireTime, () => this.arrived(key, after), ARRIVAL_POLL_MS))) return 'aborted';
        }
      }
      // Catch-up work only: a regular fire that finds an older run of its item takes the misfire path.
      while (!hold && round === 0 && catchUp && this.olderInFlight(key, current.fireTime)) {
        if (!(await this.waitForTurn(key, current.fireTime))) return 'aborted';
      }
      while (!hold) {
        const waiting = round === 0 && Date.now() < waitLimit;
        const acquired = await this.acquire(config, current, key, { markOnBusy: !mustRun, waitBehindCatchUp: waiting, catchUp: catchUp && round === 0 });
        if (!isBusy(acquired)) {
          hold = acquired;
          break;
        }
        if (round > 0) return status; // the mark stays for whoever holds the item now
        if (!mustRun && !(waiting && acquired.catchUp)) return this.skipped(current, config.misfire ? 'item running elsewhere; misfire recorded' : 'item running elsewhere; fire skipped (misfire off)');
        if (!acquired.local) return 'deferred';
        // Behind a run of our own: wait for its release here, then try again. Our run follows
        // catch-up work, so it is catch-up work itself.
        catchUp = true;
        if (!(await this.waitForTurn(key, current.fireTime))) return 'aborted';
      }
      let released: Released | undefined;
      if (hold.done?.includes(current.fireTime)) {
        released = await this.release(config, current, key, hold, false, mark);
        const skipped = this.skipped(current, 'this fire of the item already completed');
        // A later round skipped is no run: the status stays that of the run this request made.
        if (round === 0) status = skipped;
      } else {
        const marked = current.source === 'FAILOVER' && (await this.markFailover(current));
        const round = current;
        const roundMark = mark;
        // The release runs before the run's outcome is reported: a run counts as completed only
        // once its completion is recorded with the release of the lock. One that could not be
        // (the session was lost between the handler's return and the release) is reported aborted
        // and its request goes back to the queue, instead of being logged as done while ZooKeeper
        // does not know it, which let its failed-over request complete the fire a second time.
        const settle = async (outcome: ExecutionStatus): Promise<Settled> => {
          const completed = outcome === 'completed';
          released = await this.release(config, round, key, hold, completed, completed ? roundMark : undefined).catch((err) => {
            this.ctx.log.warn({ err, job: round.job, item: round.item }, 'could not release the item after its run');
            return { recorded: false, mark: undefined };
          });
          if (!completed || released.recorded) return { status: outcome };
          return { status: 'aborted', reason: released.unknown ? MAYBE_RECORDED : NOT_RECORDED };
        };
        try {
          status = await this.execute(definition, config, current, hold.session?.sessionId ?? this.ctx.zk.sessionId, settle);
        } finally {
          released ??= await this.release(config, current, key, hold, false, undefined);
          if (marked) await this.ctx.zk.delete(registryPaths.shardingFailover(current.job, current.item)).catch(() => undefined);
        }
      }
      if (status === 'aborted') return status;
      // The release read the mark right after it when it could; otherwise read it now.
      const next = released.mark !== undefined ? released.mark ?? undefined : await this.peekMisfire(config, current, key);
      // The same mark again means we could not delete it: stop rather than loop (the next holder
      // takes it). A re-created mark is new even at version 0: it carries another fire time.
      if (!next || (mark && next.version === mark.version && next.fireTime === mark.fireTime)) return status;
      mark = next;
      // The re-run stands for the fire that found the item running, under that fire's time.
      current = { ...current, source: 'MISFIRE', fireTime: next.fireTime };
    }
  }

  /**
   * Takes the item. Without monitorExecution only within this process. With it, the `running`
   * ephemeral node is created on the current session, and the item's completed fires are read in
   * the same round trip: the read is sent right behind the create on the same session, so
   * ZooKeeper answers it after the create, i.e. under the lock.
   */
  private async acquire(config: JobConfig, request: ExecutionRequest, key: string, options: AcquireOptions): Promise<Acquired> {
    if (!config.monitorExecution) {
      const holder = this.localRunning.get(key);
      if (holder !== undefined) {
        if (holder && options.waitBehindCatchUp) return { busy: true, local: true, catchUp: true };
        if (config.misfire && options.markOnBusy) this.localMisfire.set(key, Math.max(this.localMisfire.get(key) ?? 0, request.fireTime));
        return { busy: true, local: true, catchUp: holder };
      }
      this.localRunning.set(key, options.catchUp);
      return {};
    }
    const running = registryPaths.shardingRunning(request.job, request.item);
    let marked = false;
    // A holder may finish between our failed create and our misfire mark without seeing the mark;
    // re-checking after marking closes that gap (and then the item is free to take ourselves).
    // One more attempt for a lock whose cached view of the item turned out stale.
    const itemPath = registryPaths.shardingItem(request.job, request.item);
    const create = { type: 'create', path: running, data: encodeRunningNode(this.ctx.instanceId, options.catchUp), mode: 'ephemeral' } as const;
    let busy: Busy = { busy: true, local: false, catchUp: false };
    for (let attempt = 0; attempt < 4; attempt += 1) {
      const session = this.ctx.zk.onSession(this.ctx.zk.sessionId);
      // The item node as we last saw it: a version check in the lock multi proves it unchanged,
      // so its completed fires need no read. Almost always so: an item keeps its instance.
      const known = this.seen.get(key);
      let read: NodeRead | undefined;
      let taken: boolean | 'unknown';
      // The claim lasts until the release ends; a failed attempt gives it up in `finally`.
      this.claims.set(key, (this.claims.get(key) ?? 0) + 1);
      let holding = false;
      try {
        try {
          if (known) await this.batcher.commit(session, [create, { type: 'check', path: itemPath, version: known.version }]);
          else ({ read } = await this.batcher.commit(session, [create], (s) => s.get(itemPath)));
          taken = true;
        } catch (err) {
          if (is(err, ErrorCodes.ZK_NODE_EXISTS)) taken = false;
          else if (known && is(err, ErrorCodes.ZK_BAD_VERSION)) {
            // Someone else changed the item since (another instance completed a fire): read it.
            this.seen.delete(key);
            continue;
          } else if (is(err, ErrorCodes.ZK_NO_NODE)) {
            this.seen.delete(key);
            // The item's node is missing: the leader lays a new job's items out before its first
            // fire, but a fire may come before that is done.
            await this.createNode(itemPath);
            continue;
          } else if (isRetryable(err)) taken = 'unknown'; // the create may have happened: see below
          else throw err;
        }
        if (taken === true) {
          holding = true;
          return known ? { session, done: known.done, markFree: known.markFree } : await this.held(session, request, key, read!);
        }
        const releasesBefore = this.releases.get(key) ?? 0;
        const holder = await this.readHolder(running);
        // Free by now (the holder ended, or our create whose answer was lost did not happen): again.
        if (!holder) continue;
        // Our own session's node that no other execution of ours has claimed, and that no release
        // of ours overtook while we looked: a create whose answer was lost with the connection, or
        // a release that could not delete it. Nobody else can hold or delete that node, so it is
        // ours to use; otherwise the item would stay blocked for as long as our session lives.
        if (holder.stat.ephemeralOwner === this.ctx.zk.sessionId && this.claims.get(key) === 1 && (this.releases.get(key) ?? 0) === releasesBefore) {
          this.ctx.log.info({ job: request.job, item: request.item }, 'taking over our own orphaned running node');
          const own = this.ctx.zk.onSession(holder.stat.ephemeralOwner);
          holding = true;
          return await this.held(own, request, key, own.get(itemPath));
        }
        busy = { busy: true, local: holder.stat.ephemeralOwner === this.ctx.zk.sessionId, catchUp: holder.catchUp };
        // Catch-up work holds the item: the request waits for it, and leaves no mark.
        if (holder.catchUp && options.waitBehindCatchUp) return busy;
        if (!marked && config.misfire && options.markOnBusy) {
          await this.markMisfire(request);
          marked = true;
          continue;
        }
        return busy;
      } finally {
        if (!holding) this.unclaim(key, false);
      }
    }
    return busy;
  }

  /** The `running` node's holder with its stat, or null when the item is free. */
  private async readHolder(running: string): Promise<(RunningHolder & { stat: ZkStat }) | null> {
    try {
      const { data, stat } = await this.ctx.zk.get(running);
      return { ...decodeRunningNode(data), stat };
    } catch (err) {
      if (is(err, ErrorCodes.ZK_NO_NODE)) return null;
      throw err;
    }
  }

  /**
   * Waits until a run of this process holding `key` releases it and this request, the oldest
   * waiting, may try again (or `pollMs` passes, or `ready` says so already): by default until
   * nothing of ours holds the item and no older fire of it is in `run` here. False when the worker
   * stops meanwhile.
   */
  private waitForTurn(key: string, fireTime: number, ready = () => !this.holdsLocally(key) && !this.olderInFlight(key, fireTime), pollMs = TURN_POLL_MS): Promise<boolean> {
    const stop = this.ctx.abortSignal();
    return new Promise<boolean>((resolve) => {
      const list = this.waiters.get(key) ?? [];
      let timer: NodeJS.Timeout | undefined;
      let offAbort: (() => void) | undefined;
      const entry = {
        fireTime,
        wake: () => done(true),
      };
      const done = (ok: boolean) => {
        const at = list.indexOf(entry);
        if (at < 0) return;
        list.splice(at, 1);
        if (list.length === 0 && this.waiters.get(key) === list) this.waiters.delete(key);
        clearTimeout(timer);
        offAbort?.();
        resolve(ok);
      };
      let at = list.findIndex((w) => w.fireTime > fireTime);
      if (at < 0) at = list.length;
      list.splice(at, 0, entry);
      this.waiters.set(key, list);
      timer = setTimeout(() => done(true), pollMs);
      offAbort = onAbort(stop, () => done(false));
      // What we wait for may have happened between our look and now.
      if (ready()) done(true);
    });
  }

  /** Whether a run (or a lock attempt) of this process holds `key`. */
  private holdsLocally(key: string): boolean {
    return (this.claims.get(key) ?? 0) > 0 || this.localRunning.has(key);
  }

  /** Whether fire `fireTime` of the item is in `run` here, left it, or is known completed. */
  private arrived(key: string, fireTime: number): boolean {
    return this.inFlight.get(key)?.includes(fireTime) === true || this.departed.get(key)?.has(fireTime) === true || this.seen.get(key)?.done.includes(fireTime) === true;
  }

  /** Whether a request of this process for an older fire of the item is in `run`. */
  private olderInFlight(key: string, fireTime: number): boolean {
    return this.inFlight.get(key)?.some((t) => t < fireTime) ?? false;
  }

  /** A run of ours let go of `key`: the oldest request waiting for it tries again. */
  private passTurn(key: string): void {
    this.waiters.get(key)?.[0]?.wake();
  }

  /** The job's first fire after `after`; never when it has no cron (a trigger-only job). */
  private nextFireAfter(config: JobConfig, after: number): number {
    let schedule = this.schedules.get(config);
    if (schedule === undefined) {
      try {
        schedule = config.cron ? parseCron(config.cron, config.timeZone) : null;
      } catch {
        schedule = null; // the leader refuses such a config; here it only lifts the limit
      }
      this.schedules.set(config, schedule);
    }
    return schedule?.next(after) ?? Number.POSITIVE_INFINITY;
  }


  /**
   * Takes the item's lock now for a request held until its fire time (monitorExecution only), so
   * that at the fire time no round trip stands before the handler. Only a free item is taken: one
   * found running is left alone, with no misfire mark, since its run may well end before the fire
   * time; the request then locks at the fire time as usual. Undefined when not taken.
   */
  async lockAhead(request: ExecutionRequest): Promise<EarlyLock | undefined> {
    const config = this.ctx.config(request.job);
    const key = itemKey(request);
    // Requests of ours for older fires of the item come first (waiting for it, or on their way).
    if (config.disabled || !config.monitorExecution || this.waiters.has(key) || this.olderInFlight(key, request.fireTime)) return undefined;
    try {
      const acquired = await this.acquire(config, request, key, { markOnBusy: false, waitBehindCatchUp: false, catchUp: request.catchUp === true });
      return isBusy(acquired) ? undefined : { request, hold: acquired };
    } catch (err) {
      this.ctx.log.debug({ err, job: request.job, item: request.item }, 'could not lock ahead; locking at the fire time');
      return undefined;
    }
  }

  /** Gives back a lock taken ahead whose request does not run (stopped while it was held). */
  async unlockAhead(lock: EarlyLock): Promise<void> {
    const { request, hold } = lock;
    await this.releaseMonitored(request, itemKey(request), hold, undefined, undefined).catch((err) => {
      this.ctx.log.warn({ err, job: request.job, item: request.item }, 'could not give back an item locked ahead');
    });
  }

  /**
   * Ends a claim; `released`: it held the item and its release is over. The release count matters
   * only to a claim that looks at `running` while another of ours may release: with no claim left
   * nobody compares it, so it goes (each item a worker ever held used to keep an entry for good).
   */
  private unclaim(key: string, released: boolean): void {
    const left = (this.claims.get(key) ?? 1) - 1;
    if (left > 0) {
      this.claims.set(key, left);
      if (released) this.releases.set(key, (this.releases.get(key) ?? 0) + 1);
    } else {
      this.claims.delete(key);
      this.releases.delete(key);
    }
    if (released) this.passTurn(key);
  }

  /**
   * The lock is ours: note it, and take the completed fires from `read`. A read that lost its
   * connection is made again: the lock was taken first, so any later read is under it. If the
   * lock's session is gone by then, so is the lock, and the request goes back to the queue.
   */
  private async held(session: ZkSessionOps, request: ExecutionRequest, key: string, read: NodeRead): Promise<Hold> {
    const path = registryPaths.shardingItem(request.job, request.item);
    try {
      const { data, stat } = await read.catch((err) => {
        if (!isRetryable(err)) throw err;
        return this.ctx.zk.get(path);
      });
      this.assertSession(session, path);
      const done = parseCompletedFires(data);
      this.seen.set(key, { version: stat.version, done });
      return { session, done };
    } catch (err) {
      if (is(err, ErrorCodes.ZK_NO_NODE) && this.ctx.zk.sessionId === session.sessionId) return { session, done: [] };
      await this.releaseMonitored(request, key, { session }, undefined, undefined).catch(() => undefined);
      throw err;
    }
  }

  private assertSession(session: ZkSessionOps, path: string): void {
    if (this.ctx.zk.sessionId !== session.sessionId) {
      throw new ZkError(ErrorCodes.ZK_SESSION_EXPIRED, -112, 'lock', path, { lockSession: session.sessionId, currentSession: this.ctx.zk.sessionId });
    }
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

  /**
   * Releases the item. With monitorExecution, after a completion the fire is recorded, and the
   * misfire mark the run stood for deleted, in the same multi as the `running` node: the next
   * holder can never see the item unlocked without seeing that this fire is done and its mark
   * consumed. The misfire mark is read in the same round trip, right behind the release.
   */
  private async release(config: JobConfig, request: ExecutionRequest, key: string, hold: Hold, completed: boolean, mark?: MisfireMark): Promise<Released> {
    // How the item was locked, not the config now: monitorExecution may have changed since.
    if (!hold.session) {
      this.localRunning.delete(key);
      this.passTurn(key);
      return { recorded: true, mark: undefined };
    }
    return this.releaseMonitored(request, key, hold, completed ? hold.done : undefined, mark, config.misfire);
  }

  private async releaseMonitored(
    request: ExecutionRequest,
    key: string,
    hold: Hold,
    completedFrom: readonly number[] | undefined,
    mark: MisfireMark | undefined,
    readMark = false,
  ): Promise<Released> {
    const { job, item, fireTime } = request;
    const session = hold.session!;
    const running = registryPaths.shardingRunning(job, item);
    const notRecorded: Released = { recorded: false, mark: undefined };
    try {
      // Only our own lock may be released, and the session binding makes sure of it: if our session
      // expired, the server removed our node and another instance may hold the item now; deleting
      // "running" then would let a third one in. Bound requests fail instead of reaching it.
      let withMark = mark !== undefined;
      const itemPath = registryPaths.shardingItem(job, item);
      const done = completedFrom && withCompletedFire(completedFrom, fireTime);
      // Known again only from the answer of the set below.
      if (done) this.seen.delete(key);
      // Whether a misfire mark is left is told by the item's cversion when we can: see below. Not
      // in a round that consumes a mark: its lock was not taken on a mark-free view.
      const markFree = done && mark === undefined ? hold.markFree : undefined;
      for (;;) {
        const ops: ZkOp[] = [];
        if (done) ops.push({ type: 'set', path: itemPath, data: formatCompletedFires(done), version: -1 });
        ops.push({ type: 'delete', path: running, version: -1 });
        if (withMark) ops.push({ type: 'delete', path: registryPaths.shardingMisfire(job, item), version: mark!.version });
        const recorded = done !== undefined || withMark;
        try {
          // The item's children, not the mark itself: almost always there is no mark, and a read of
          // a missing node costs an error answer (and two error objects) per item.
          const listing = readMark && markFree === undefined;
          const { results, read: children } = await this.batcher.commit(session, ops, listing ? (s) => s.children(itemPath) : undefined);
          const stat = done ? results[0]?.stat : undefined;
          let found: MisfireMark | null | undefined;
          if (children) found = await this.markAmong(children, request).catch(() => undefined);
          else if (readMark) {
            // ZooKeeper counts every create and delete of a node's children in its cversion (a test
            // in zk-client.test.ts pins it). The set above ran after our create and before our
            // delete: if nothing but our create changed the item's children since a release that
            // left no mark, no mark was made since, and there is none. Otherwise look.
            const unchanged = stat !== undefined && markFree !== undefined && stat.cversion === markFree + 1;
            found = unchanged ? null : await this.markAmong(this.ctx.zk.children(itemPath), request).catch(() => undefined);
          }
          if (stat) {
            // After the multi: our delete of running, and of the mark when it consumed one, counted too.
            const after = stat.cversion + (withMark ? 2 : 1);
            this.seen.set(key, { version: stat.version, done: done!, markFree: found === null ? after : undefined });
          }
          return { recorded, mark: found };
        } catch (err) {
          if (withMark && is(err, ErrorCodes.ZK_BAD_VERSION, ErrorCodes.ZK_NO_NODE)) {
            // A newer fire changed the mark: keep it (it is taken next round) and commit the rest.
            withMark = false;
            continue;
          }
          if (is(err, ErrorCodes.ZK_SESSION_EXPIRED)) return notRecorded; // the node went with the session
          if (!isRetryable(err)) {
            this.ctx.log.warn({ err, job, item }, 'could not release the item with its completion; releasing the item only');
            await this.deleteOwnRunning(session, running);
            return notRecorded;
          }
          // The answer was lost with the connection: the multi went through or not at all. Our
          // node tells which, once we are connected again: only this release deletes it.
          const stat = await this.existsWhileSessionLives(session, running);
          if (stat === 'lost') return { ...notRecorded, unknown: true };
          if (!stat) return { recorded, mark: undefined };
          if (stat.ephemeralOwner !== session.sessionId) return notRecorded;
        }
      }
    } finally {
      this.unclaim(key, true);
    }
  }

  /**
   * Looks up `path` on `session` once the client is connected on it again; `lost` once the client
   * is on another session (ours expired). Connection losses are waited out for as long as the
   * session may live: a ZooKeeper restart or a partition shorter than the session timeout keeps it,
   * and giving up after one connect timeout reported a completion that ZooKeeper had recorded, or
   * still could, as not recorded, and the item ran a second time (the ZooKeeper-restart chaos test
   * caught it). A client closed meanwhile throws.
   */
  private async existsWhileSessionLives(session: ZkSessionOps, path: string): Promise<ZkStat | null | 'lost'> {
    for (;;) {
      try {
        return await session.exists(path);
      } catch (err) {
        if (is(err, ErrorCodes.ZK_SESSION_EXPIRED)) return 'lost';
        if (!isRetryable(err)) throw err;
      }
    }
  }

  /**
   * Deletes the running node after a release transaction failed, if it is still ours: a failure
   * that left it would block the item for as long as our session lives.
   */
  private async deleteOwnRunning(session: ZkSessionOps, running: string): Promise<void> {
    try {
      const stat = await this.ctx.zk.exists(running);
      if (!stat || stat.ephemeralOwner !== session.sessionId) return;
      await session.multi().delete(running, stat.version).commit();
    } catch (err) {
      // Gone with a lost session is fine; anything else leaves the item blocked until the session ends.
      if (!is(err, ErrorCodes.ZK_NO_NODE, ErrorCodes.ZK_SESSION_EXPIRED)) this.ctx.log.warn({ err, running }, 'could not delete running node');
    }
  }

  /** Records (in `sharding/{i}/misfire`) the latest fire time that found the item running. */
  private async markMisfire(request: ExecutionRequest): Promise<void> {
    const path = registryPaths.shardingMisfire(request.job, request.item);
    for (let attempt = 0; attempt < 5; attempt += 1) {
      try {
        const { data, stat } = await this.ctx.zk.get(path);
        if (Number(data.toString()) >= request.fireTime) return;
        await this.ctx.zk.set(path, String(request.fireTime), stat.version);
        return;
      } catch (err) {
        if (!(err instanceof ZkError)) throw err;
        if (err.code === ErrorCodes.ZK_NO_NODE) {
          await this.createNode(path, String(request.fireTime));
          continue;
        }
        if (err.code !== ErrorCodes.ZK_BAD_VERSION && err.code !== ErrorCodes.ZK_NODE_EXISTS) throw err;
      }
    }
  }

  /**
   * Creates a node of an item unless it exists. One request when its parent exists, as it almost
   * always does: a `mkdirp` sends a create per level of the path, each answered with an error but
   * the last.
   */
  private async createNode(path: string, data = ''): Promise<void> {
    try {
      await this.ctx.zk.create(path, data);
    } catch (err) {
      if (is(err, ErrorCodes.ZK_NODE_EXISTS)) return;
      if (!is(err, ErrorCodes.ZK_NO_NODE)) throw err;
      await this.ctx.zk.ensurePath(path.slice(0, path.lastIndexOf('/')));
      await this.createNode(path, data);
    }
  }

  /**
   * The misfire mark left for this item, if any, without consuming it: it is deleted only together
   * with the completion of the re-run, so a holder that dies during the re-run leaves it for the
   * next one. A mark without a readable time (written by another tool) stands for the current fire.
   */
  private async peekMisfire(config: JobConfig, request: ExecutionRequest, key: string): Promise<MisfireMark | undefined> {
    if (!config.misfire) return undefined;
    if (!config.monitorExecution) {
      const fireTime = this.localMisfire.get(key);
      this.localMisfire.delete(key);
      return fireTime === undefined ? undefined : { fireTime, version: -1 };
    }
    return (await this.readMark(request)) ?? undefined;
  }

  /** The misfire mark, if the item's `children` name one (read then; null: none). */
  private async markAmong(children: Promise<string[]>, request: ExecutionRequest): Promise<MisfireMark | null> {
    return (await children).includes(MISFIRE_NODE) ? this.readMark(request) : null;
  }

  /** The item's misfire mark (null: none). */
  private async readMark(request: ExecutionRequest): Promise<MisfireMark | null> {
    try {
      const { data, stat } = await this.ctx.zk.get(registryPaths.shardingMisfire(request.job, request.item));
      const fireTime = Number(data.toString());
      return { fireTime: Number.isSafeInteger(fireTime) && fireTime > 0 ? fireTime : request.fireTime, version: stat.version };
    } catch (err) {
      if (is(err, ErrorCodes.ZK_NO_NODE)) return null;
      throw err;
    }
  }

  /**
   * Runs the handler. `settle` gets the handler's outcome before it is reported (the finish record,
   * `afterExecute`) and may turn a completion into `aborted` when it could not be recorded.
   */
  private async execute(
    definition: ResolvedJobDefinition,
    config: JobConfig,
    request: ExecutionRequest,
    /** The session the lock is held on: the execution is ours only while it lives. */
    sessionId: string,
    settle: (status: ExecutionStatus) => Promise<Settled>,
  ): Promise<ExecutionStatus> {
    const { job, item, fireTime, source } = request;
    const stopAll = this.ctx.abortSignal();
    // Whatever may throw comes before the place is taken (a place taken is given back in `finally`).
    const taskId = formatTaskId({ jobName: job, fireTime, shardingItem: item, instanceId: this.ctx.instanceId });
    const shardingParameter = this.itemParameter(config, item);
    // A place among the handlers running at once. A request waits for one holding its lock; one
    // stopped meanwhile did not run and goes back to the queue, where it runs later, here or elsewhere.
    let freePlace = stopAll.aborted ? undefined : this.ctx.handlers.tryAcquire();
    try {
      freePlace ??= await this.ctx.handlers.acquire(stopAll);
    } catch {
      this.ctx.record({ event: 'finish', job, fireTime, item, instanceId: this.ctx.instanceId, source, status: 'aborted', reason: 'worker stopping before the handler started', at: Date.now() });
      return 'aborted';
    }
    // The handler's signal and logger are made when it first asks for them: an AbortController
    // with its listener on the worker's signal, and a pino child, cost more than a no-op handler.
    let controller: AbortController | undefined;
    let stopListening: (() => void) | undefined;
    let log: Logger | undefined;
    const logger = () => (log ??= this.ctx.log.child({ job, item, fireTime }));
    const context: ShardingContext = {
      jobName: job,
      taskId,
      shardingTotalCount: config.shardingTotalCount,
      jobParameter: config.jobParameter,
      shardingItem: item,
      shardingParameter,
      fireTime,
      source,
      instanceId: this.ctx.instanceId,
      get signal() {
        if (!controller) {
          controller = new AbortController();
          if (stopAll.aborted) controller.abort(stopAll.reason);
          else stopListening = onAbort(stopAll, () => controller!.abort(stopAll.reason));
        }
        return controller.signal;
      },
      assertOwnership: () => {
        if (stopAll.aborted || !this.ctx.owns(sessionId)) {
          throw new ShardcronError(ErrorCodes.NOT_OWNER, `execution of ${job} item ${item} (fire ${fireTime}) may no longer be ours`, { job, item, fireTime });
        }
      },
      get log() {
        return logger();
      },
    };
    const { beforeExecute, afterExecute } = definition.listeners;
    const started = Date.now();
    this.ctx.record({ event: 'start', job, fireTime, item, instanceId: this.ctx.instanceId, source, at: started });
    if (beforeExecute) await this.callListener(() => beforeExecute(context), logger);
    let outcome: ExecutionOutcome;
    try {
      await definition.execute(context);
      // Finishing after our ownership ended is not a completion: the item may already run elsewhere.
      const stillOurs = !stopAll.aborted && this.ctx.owns(sessionId);
      outcome = { status: stillOurs ? 'completed' : 'aborted', durationMs: Date.now() - started };
    } catch (error) {
      outcome = { status: stopAll.aborted ? 'aborted' : 'failed', error, durationMs: Date.now() - started };
      await this.handleError(definition, error, context, logger);
    } finally {
      stopListening?.();
      // The handler is over: its place is free while the release makes its round trip.
      freePlace();
    }
    const { status: settled, reason } = await settle(outcome.status);
    if (settled !== outcome.status) outcome = { ...outcome, status: settled };
    // `at` is when the handler ended, not when the release answered: the run stopped then.
    this.ctx.record({ event: 'finish', job, fireTime, item, instanceId: this.ctx.instanceId, source, status: outcome.status, reason, at: started + outcome.durationMs });
    const ended = outcome;
    if (afterExecute) await this.callListener(() => afterExecute(context, ended), logger);
    return outcome.status;
  }

  /** The item's `shardingItemParameters` entry, parsed once per config. */
  private itemParameter(config: JobConfig, item: number): string {
    let byItem = this.parameters.get(config);
    if (!byItem) this.parameters.set(config, (byItem = parseShardingItemParameters(config.shardingItemParameters)));
    return byItem[item] ?? '';
  }

  private async handleError(definition: ResolvedJobDefinition, error: unknown, context: ShardingContext, log: () => Logger): Promise<void> {
    const handler = definition.errorHandler;
    if (handler === 'IGNORE') return;
    if (handler === 'LOG') {
      log().error({ err: error }, 'job execution failed');
      return;
    }
    try {
      await handler(error, context);
    } catch (err) {
      log().error({ err, original: error }, 'the job error handler threw');
    }
  }

  private async callListener(fn: () => unknown, log: () => Logger): Promise<void> {
    try {
      await fn();
    } catch (err) {
      log().error({ err }, 'job listener threw; ignored');
    }
  }

  private skipped(request: ExecutionRequest, reason: string): ExecutionStatus {
    const { job, fireTime, item, source } = request;
    this.ctx.record({ event: 'finish', job, fireTime, item, instanceId: this.ctx.instanceId, source, status: 'skipped', reason, at: Date.now() });
    return 'skipped';
  }
}
