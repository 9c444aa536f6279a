/**
 * DESIGN.md flow 3 while this process leads: fires handed over by the timer become ticks on the
 * task chain; a tick plans each due job's fire ({@link planDueFires} decides which fire and its
 * source), writes every ledger in fenced multis, and enqueues the requests shortly before the fire
 * time. Fires that came due while leadership was suspended are caught up when it resumes.
 */
import { forEachLimited } from '../shared/concurrency';
import { ErrorCodes, ShardcronError } from '../shared/errors';
import type { Logger } from '../shared/logger';
import type { ExecutionSource } from '../shared/registry/execution-request';
import { reroute } from './dispatch-plan';
import type { DispatchLead } from './dispatch-lead';
import { planDueFires } from './due-fires';
import type { FireDispatcher, FirePlan, JobState, SkipReason } from './fire-dispatcher';
import type { Clock, DueJob } from './fire-timer';
import type { LeaderElection } from './leader-election';
import type { QueueMoves } from './queue-moves';
import type { ScheduleCache } from '../shared/cron/schedule-cache';
import type { Lane, TaskChain } from './task-chain';

/** Jobs planned at the same time in one tick (only a reshard makes planning wait for reads). */
const PLANS_AT_ONCE = 32;
/** Fire times of one job caught up after a suspension, at most (as the timer's own catch-up). */
const MAX_CAUGHT_UP = 100;
/**
 * Job-fires of one tick planned and ledgered together. A tick with more goes in chunks, jobs of
 * shorter period first; between two chunks the chain runs what came due meanwhile (the next
 * seconds' ticks, the enqueue of a chunk already ledgered), so that 20,000 every-minute jobs no
 * longer hold back the every-second ones due during their dispatch.
 */
export const TICK_CHUNK = 1_000;
/**
 * Requests of one chunk, at most (a job-fire sends one per item), while the namespace has jobs
 * firing more often than once a minute: a chunk of rarer jobs is as long on the chain as its
 * requests take to enqueue, so a chunk of wide jobs is cut by requests, not only by job-fires.
 * Issue 23's hundred jobs of 100 items every minute made one chunk of 10,000 requests whose
 * enqueue held the chain; the every-second fires behind it ran up to 1.9 s late, and one a minute
 * was folded into the fire before it (bench/RESULTS.md, "Wide jobs in the tick's chunks"). A single
 * job-fire of more requests still goes whole, in a chunk of its own. With no frequent job there is
 * nothing to let pass, and a big fire goes in one enqueue, begun as early as its pace says
 * (DispatchLead.deliveryFor).
 */
export const TICK_CHUNK_REQUESTS = 1_000;
/**
 * Jobs of a shorter period than this are never split across chunks: their fires of one tick go
 * whole in its first chunk. Chunks are there to let frequent work pass the rarer jobs; a tick of
 * 10,000 every-second jobs in ten chunks one after another on the chain (each with its own plan,
 * ledger multi and enqueue, nothing overlapped) dispatched 5,598 job-fires a second where the
 * tick in one piece had dispatched 10,172 (bench/RESULTS.md, scale scenario).
 */
export const SPLIT_FROM_PERIOD_MS = 60_000;

/** A fire decided by a tick: which one, and how it runs. */
interface Run {
  job: string;
  fireTime: number;
  source: ExecutionSource;
  catchUp: boolean;
}

/** A tick queued on the chain and not started yet: the jobs due, each with its fire times. */
interface WaitingTick {
  due: Map<string, DueJob>;
  earliest: number;
}

/** What the fire loop reports. */
export interface FireLoopEvents {
  dispatched(event: { job: string; fireTime: number; source: ExecutionSource; items: number; epoch: number }): void;
  skipped(event: { job: string; fireTime: number; reason: SkipReason | 'not-leader' }): void;
  /** Fires folded into one MISFIRE run (`into`), misfire on: they run once, with it. */
  coalesced(event: { job: string; fireTimes: number[]; into: number }): void;
}

/** What the fire loop works with. */
export interface FireLoopDeps {
  clock: Clock;
  log: Logger;
  jobs: ReadonlyMap<string, JobState>;
  election: LeaderElection;
  dispatcher: FireDispatcher;
  chain: TaskChain;
  lead: DispatchLead;
  moves: QueueMoves;
  schedules: ScheduleCache;
  /** A fire handled later than this after its nominal time, while a leader was there, is a misfire. */
  lateToleranceMs: number;
  /** The ZooKeeper session timeout: a fire at most twice as late after a leaderless window runs as itself. */
  sessionTimeoutMs(): number;
  /** Changes with every change of leadership: work of an earlier one is left to the next leader. */
  generation(): number;
  events: FireLoopEvents;
  /** A plan that resharded `job` landed (see JobRegistry.resharded). */
  resharded(job: string, reshards: number, settled: boolean): void;
  /** Job-fires per chunk of a tick; default {@link TICK_CHUNK}. */
  tickChunk?: number;
  /** Requests per chunk of a tick (beyond the jobs never split); default {@link TICK_CHUNK_REQUESTS}. */
  tickChunkRequests?: number;
  /** Whether the namespace has jobs firing more often than once a minute (the request bound applies only then); default: yes. */
  hasFrequentJobs?(): boolean;
  /** Only jobs of at least this period are split across chunks; default {@link SPLIT_FROM_PERIOD_MS}. */
  splitFromPeriodMs?: number;
}

/**
 * What one leadership holds back so that each job's ledgers are written in fire order while a big
 * tick goes in chunks: the jobs with a fire in a chunk still to come, and the fires that came due
 * meanwhile for a job held back (in arrival order).
 */
class Holds {
  readonly pending = new Set<string>();
  readonly fires = new Map<string, number[]>();
  /**
   * Jobs with an enqueue waiting in the chain's lane behind, and how many: an enqueue of a later
   * fire of theirs is queued behind it, never ahead, so each job's enqueues go in fire order.
   */
  readonly enqueuesBehind = new Map<string, number>();

  countEnqueues(plans: readonly FirePlan[], by: 1 | -1): void {
    for (const { job } of plans) {
      const count = (this.enqueuesBehind.get(job) ?? 0) + by;
      if (count > 0) this.enqueuesBehind.set(job, count);
      else this.enqueuesBehind.delete(job);
    }
  }

  hold(job: string, fireTimes: readonly number[]): void {
    const known = this.fires.get(job);
    if (known) known.push(...fireTimes);
    else this.fires.set(job, [...fireTimes]);
  }

  /** The fires held back for `job`, no longer held. */
  take(job: string): number[] {
    const fireTimes = this.fires.get(job) ?? [];
    this.fires.delete(job);
    return fireTimes;
  }
}

/** Fire times oldest first, each once. */
function sortedFires(fireTimes: readonly number[]): number[] {
  return [...new Set(fireTimes)].sort((a, b) => a - b);
}

/** The ticks of one leader. */
export class FireLoop {
  /** Fires that came due while leadership was suspended (or whose ledger write failed): job -> earliest nominal time. */
  private readonly missed = new Map<string, number>();
  /**
   * Fires at or before this time came due while no leader could dispatch them: before this leader
   * took over, or while it was suspended ({@link planDueFires}).
   */
  private leaderlessUntil: number | undefined;
  /** The tick queued on the chain and not started yet, which new wake-ups join. */
  private waitingTick: WaitingTick | undefined;
  /** What this leadership holds back to keep each job's ledgers in fire order (a new one each leadership). */
  private holds = new Holds();

  private readonly chunkSize: number;
  private readonly chunkRequests: number;
  private readonly splitFromPeriodMs: number;

  constructor(private readonly deps: FireLoopDeps) {
    this.chunkSize = wholeAtLeastOne('tickChunk', deps.tickChunk ?? TICK_CHUNK);
    this.chunkRequests = wholeAtLeastOne('tickChunkRequests', deps.tickChunkRequests ?? TICK_CHUNK_REQUESTS);
    const split = deps.splitFromPeriodMs ?? SPLIT_FROM_PERIOD_MS;
    if (!Number.isInteger(split) || split < 0) throw new ShardcronError(ErrorCodes.INVALID_CONFIG, `splitFromPeriodMs must be a whole number of at least 0, got ${String(split)}`);
    this.splitFromPeriodMs = split;
  }

  /**
   * Leadership began: fires due until {@link settled} came due with no leader (since each job's
   * last ledger), while the jobs are still being prepared.
   */
  begin(): void {
    this.leaderlessUntil = Number.POSITIVE_INFINITY;
  }

  /**
   * Every job is prepared: the window opened by {@link begin} closes now. Until then a fire that
   * came due counts as one of the leaderless window (a job still being prepared has no timer
   * entry: its fires wait for it), as before the timer started early.
   */
  settled(): void {
    this.leaderlessUntil = this.deps.clock.now();
  }

  /** Leadership ended: nothing is left to catch up. */
  end(): void {
    this.missed.clear();
    this.leaderlessUntil = undefined;
    this.waitingTick = undefined;
    this.holds = new Holds();
  }

  /** The timer's callback: queues a tick for `due`, or joins the tick still waiting if the leader is behind. */
  onDue(due: DueJob[]): Promise<void> {
    // A tick still waiting for the chain after its fire time means the leader fell behind (a
    // takeover of 10,000 jobs, a stalled ZooKeeper): later wake-ups join it instead of queueing
    // behind it, so it catches up in one tick, each job once under its earliest due time (the
    // misfire rule; skipped when misfire is off), instead of working through a backlog that keeps
    // every later fire late too.
    const waiting = this.waitingTick;
    if (waiting && this.deps.clock.now() > waiting.earliest) {
      for (const d of due) {
        const known = waiting.due.get(d.job);
        // planDueFires takes a job's fire times oldest first, each once.
        if (known) known.fireTimes = sortedFires([...known.fireTimes, ...d.fireTimes]);
        else waiting.due.set(d.job, { ...d, fireTimes: [...d.fireTimes] });
      }
      return Promise.resolve();
    }
    const tick: WaitingTick = { due: new Map(due.map((d) => [d.job, d])), earliest: due.reduce((min, d) => Math.min(min, d.fireTimes[0]), Number.POSITIVE_INFINITY) };
    this.waitingTick = tick;
    const holds = this.holds;
    return this.deps.chain.run(() => {
      if (this.waitingTick === tick) this.waitingTick = undefined;
      // Queued in a leadership that ended: the next one's timer starts from each job's ledger.
      if (holds !== this.holds) return Promise.resolve();
      return this.tick([...tick.due.values()]);
    }, 'fire tick failed');
  }

  /**
   * After a suspension (or a ledger write that failed): every fire that came due meanwhile, from the
   * earliest one missed, is due now; {@link planDueFires} runs each as itself while it is recent
   * enough, and applies the misfire policy to older ones.
   */
  catchUp(): void {
    if (this.missed.size === 0) return;
    this.leaderlessUntil = Math.max(this.leaderlessUntil ?? 0, this.deps.clock.now());
    // On the chain: ticks queued before it still find the jobs missed and hold their fires, which
    // it then takes in, so each job's fires go in order.
    const holds = this.holds;
    void this.deps.chain.run(async () => {
      if (holds !== this.holds) return;
      const due = this.takeMissed();
      if (due.length > 0) await this.tick(due);
    }, 'catch-up failed');
  }

  /** The missed fires of each missed job, from its earliest one to now, with the fires held back for it meanwhile; clears them. */
  private takeMissed(): DueJob[] {
    const missed = [...this.missed];
    this.missed.clear();
    const now = this.deps.clock.now();
    const due: DueJob[] = [];
    for (const [job, earliest] of missed) {
      const config = this.deps.jobs.get(job)?.view.config;
      const since = config?.cron ? this.deps.schedules.get(config.cron, config.timeZone).between(earliest - 1, now, MAX_CAUGHT_UP) : [];
      // Fires that came due for the job while it was missed were held back for this catch-up (those
      // handed over ahead of their time are not among `since`); a job with a fire in a chunk still
      // to come keeps them, and this tick joins them, until that chunk is dispatched.
      const held = this.holds.pending.has(job) ? [] : this.holds.take(job);
      due.push({ job, fireTimes: sortedFires([...(since.length > 0 ? since : [earliest]), ...held]), truncated: false });
    }
    return due;
  }

  /** Whether a due fire of `job` must wait: an earlier one is in a chunk still to come, held itself, or missed and not caught up yet. */
  private held(job: string): boolean {
    return this.holds.pending.has(job) || this.holds.fires.has(job) || this.missed.has(job);
  }

  /** Remembers a fire that came due as `job`'s first missed one, unless an earlier one is. */
  private markMissed(job: string, fireTime: number): void {
    const known = this.missed.get(job);
    if (known === undefined || fireTime < known) this.missed.set(job, fireTime);
  }

  private async tick(due: DueJob[]): Promise<void> {
    const { election, clock } = this.deps;
    const started = clock.now();
    if (election.state === 'suspended') {
      // All of them kept: the catch-up rebuilds only the fires due by then, and the timer hands
      // fires over a lead ahead of their time.
      for (const d of due) {
        this.markMissed(d.job, d.fireTimes[0]);
        this.holds.hold(d.job, d.fireTimes);
      }
      return;
    }
    const epoch = election.epoch;
    if (!election.isLeader || epoch === undefined) {
      for (const d of due) this.deps.events.skipped({ job: d.job, fireTime: d.fireTimes[d.fireTimes.length - 1], reason: 'not-leader' });
      return;
    }
    // A job whose earlier fire has not been dispatched yet holds this one back: it goes right after
    // that fire's chunk (releaseHeld), or with the catch-up of a missed one.
    const free: DueJob[] = [];
    for (const d of due) {
      if (!this.held(d.job)) free.push(d);
      else this.holds.hold(d.job, d.fireTimes);
    }
    due = free;
    const runs: Run[] = [];
    const later: DueJob[] = [];
    for (const d of due) {
      const config = this.deps.jobs.get(d.job)?.view.config;
      const plan = planDueFires({
        fireTimes: d.fireTimes,
        now: started,
        misfire: config?.misfire ?? true,
        lateToleranceMs: this.deps.lateToleranceMs,
        leaderlessUntil: this.leaderlessUntil,
        leaderlessGraceMs: 2 * this.deps.sessionTimeoutMs(),
      });
      for (const fireTime of plan.skipped) this.skip(d.job, fireTime, 'missed');
      if (plan.run) runs.push({ job: d.job, ...plan.run });
      // Folded fires have no run of their own: said, and counted as misfires, not left silent.
      if (plan.run && plan.folded.length > 0) {
        this.deps.log.info({ job: d.job, fireTimes: plan.folded, into: plan.run.fireTime }, 'fires folded into one MISFIRE run');
        this.deps.events.coalesced({ job: d.job, fireTimes: plan.folded, into: plan.run.fireTime });
      }
      // Fires left for later go to a tick of their own, so that each job's ledgers stay in fire
      // order (a fire still ahead folded into a MISFIRE run would run early and have no run of its
      // own: the ZooKeeper-restart chaos test saw a fire with no start at all). Those of a job with
      // a run now are held back and go right behind that run's chunk, ahead of any tick queued
      // meanwhile; the others queue as a tick of their own.
      if (plan.later.length === 0) continue;
      if (plan.run) this.holds.hold(d.job, plan.later);
      else later.push({ job: d.job, fireTimes: plan.later, truncated: false });
    }
    if (later.length > 0) void this.onDue(later);
    // The first chunk takes every fire of the jobs never split, however many.
    const split = runs.length > this.chunkSize || (this.boundByRequests() && this.requestsOf(runs) > this.chunkRequests);
    await this.dispatchChunk(runs, epoch, started, this.holds, split ? this.byPeriod(runs) : runs.length);
  }

  /** Whether chunks are bounded by requests now: only while frequent jobs may need to pass. */
  private boundByRequests(): boolean {
    return this.deps.hasFrequentJobs?.() ?? true;
  }

  /** The requests `runs` send at most: one per item of each job. */
  private requestsOf(runs: readonly Run[]): number {
    let requests = 0;
    for (const run of runs) requests += this.itemsOf(run.job);
    return requests;
  }

  private itemsOf(job: string): number {
    return this.deps.jobs.get(job)?.view.config?.shardingTotalCount ?? 1;
  }

  /**
   * How many of `runs` the next chunk takes: the first `whole` (jobs never split) however many,
   * then more while the chunk stays within {@link chunkSize} job-fires and (while frequent jobs
   * exist) {@link chunkRequests} requests, the first `whole` counted; at least one.
   */
  private chunkLength(runs: readonly Run[], whole: number): number {
    let taken = Math.min(Math.max(1, whole), runs.length);
    // A tick not split, or whose never-split jobs fill a chunk already: nothing more to count.
    if (taken >= runs.length || taken >= this.chunkSize) return taken;
    const maxRequests = this.boundByRequests() ? this.chunkRequests : Number.POSITIVE_INFINITY;
    let requests = 0;
    if (maxRequests !== Number.POSITIVE_INFINITY) for (let i = 0; i < taken; i += 1) requests += this.itemsOf(runs[i].job);
    for (; taken < runs.length && taken < this.chunkSize; taken += 1) {
      const items = this.itemsOf(runs[taken].job);
      if (requests + items > maxRequests) break;
      requests += items;
    }
    return taken;
  }

  /**
   * Sorts `runs` rate-monotonic: jobs of shorter period first (stable; jobs without a period last).
   * Returns how many lead the order with a period below {@link splitFromPeriodMs} (never split).
   */
  private byPeriod(runs: Run[]): number {
    const periods = new Map<string, number>();
    let whole = 0;
    for (const run of runs) {
      const period = this.deps.schedules.jobPeriodMs(this.deps.jobs.get(run.job)?.view.config, run.fireTime) ?? Number.POSITIVE_INFINITY;
      periods.set(run.job, period);
      if (period < this.splitFromPeriodMs) whole += 1;
    }
    runs.sort((a, b) => periods.get(a.job)! - periods.get(b.job)!);
    return whole;
  }

  /**
   * Plans and dispatches the first chunk of `runs` (the first `whole` of them at least), then
   * queues the rest in the chain's lane behind, where the ticks of frequent jobs pass it, and the
   * fires held back for the chunk's jobs after it in its own `lane`. `holds` are those of the
   * leadership that decided the runs. A chunk that fails (a read while resharding, an enqueue)
   * still lets the rest and the held fires go.
   */
  private async dispatchChunk(runs: readonly Run[], epoch: number, started: number, holds: Holds, whole = 0, lane: Lane = 'first'): Promise<void> {
    const size = this.chunkLength(runs, whole);
    const chunk = runs.slice(0, size);
    const rest = runs.slice(size);
    // A tick's rarer jobs go in chunks behind frequent ones: fires go earlier while such bursts come.
    if (lane === 'first' && rest.length > 0 && this.boundByRequests()) this.leadMoved(this.deps.lead.noteBurst());
    for (const run of chunk) holds.pending.delete(run.job);
    for (const run of rest) holds.pending.add(run.job);
    try {
      const planned: Array<FirePlan | undefined> = new Array(chunk.length);
      // Planning reads nothing unless a job reshards (then its `running` nodes): several at a time.
      let failed = false;
      await forEachLimited(chunk.keys(), PLANS_AT_ONCE, async (i) => {
        const { job, fireTime, source, catchUp } = chunk[i];
        const state = this.deps.jobs.get(job);
        if (!state) return;
        try {
          const plan = await this.deps.dispatcher.plan(state, fireTime, source, epoch, catchUp);
          if (typeof plan === 'string') this.skip(job, fireTime, plan);
          else planned[i] = plan;
        } catch (err) {
          // A read of a reshard failed: the fire is caught up a moment later, as a failed ledger write's.
          this.deps.log.error({ err, job, fireTime }, 'could not plan a fire');
          this.markMissed(job, fireTime);
          failed = true;
        }
      });
      if (failed) this.retryMissed();
      await this.dispatch(planned.filter((p): p is FirePlan => p !== undefined), started, lane, holds);
    } finally {
      this.releaseHeld(chunk.map((run) => run.job), holds, lane);
      // What is left are jobs that may be split (never-split ones all went in the first chunk): behind the ticks that come due.
      if (rest.length > 0) void this.deps.chain.run(() => this.resumeChunks(rest, epoch, holds), 'fire tick failed', 'behind');
    }
  }

  /**
   * Queues, in `lane` (the chunk's), a tick of the fires held back for `jobs` while an earlier fire
   * of theirs waited in a chunk. Fires due for them before it runs join it (they are still held); a
   * job whose fire was missed meanwhile keeps them for its catch-up.
   */
  private releaseHeld(jobs: readonly string[], holds: Holds, lane: Lane): void {
    const released = jobs.filter((job) => holds.fires.has(job) && !holds.pending.has(job));
    if (released.length === 0) return;
    void this.deps.chain.run(async () => {
      if (holds !== this.holds) return;
      const due: DueJob[] = [];
      for (const job of released) {
        if (!holds.fires.has(job) || this.missed.has(job)) continue;
        due.push({ job, fireTimes: sortedFires(holds.take(job)), truncated: false });
      }
      if (due.length > 0) await this.tick(due);
    }, 'fire tick failed', lane);
  }

  /** The rest of a tick, when its turn on the chain comes: dispatched if this process still leads in the epoch that decided it. */
  private async resumeChunks(runs: readonly Run[], epoch: number, holds: Holds): Promise<void> {
    const { election } = this.deps;
    const current = holds === this.holds;
    if (current && election.state === 'suspended') {
      for (const run of runs) {
        holds.pending.delete(run.job);
        this.markMissed(run.job, run.fireTime);
      }
      return;
    }
    // Decided in an earlier leadership or epoch: the fires are the next leader's to catch up.
    if (!current || !election.isLeader || election.epoch !== epoch) {
      for (const run of runs) {
        holds.pending.delete(run.job);
        for (const fireTime of [run.fireTime, ...holds.take(run.job)]) this.deps.events.skipped({ job: run.job, fireTime, reason: 'not-leader' });
      }
      return;
    }
    await this.dispatchChunk(runs, epoch, this.deps.clock.now(), holds, 0, 'behind');
  }

  /** Ledgers `plans`, then enqueues them (in `lane`) a delivery lead before their fire time. */
  private async dispatch(plans: FirePlan[], started: number, lane: Lane, holds: Holds): Promise<void> {
    if (plans.length === 0) return;
    const { dispatcher, election, jobs } = this.deps;
    try {
      await dispatcher.commit(plans, jobs, election.fence());
    } catch (err) {
      if (isDeposed(err)) {
        this.deps.log.warn({ jobs: plans.map((p) => p.job) }, 'not the leader any more: fire not dispatched');
        return;
      }
      // The multi may or may not have landed; treat the fires as missed while suspended. They are
      // caught up when leadership resumes, or, if it already has (the write timed out just as the
      // connection came back), by a retry of our own a moment later.
      this.deps.log.error({ err }, 'could not write the dispatch ledger');
      for (const plan of plans) this.markMissed(plan.job, plan.ledger.fireTime);
      this.retryMissed();
      return;
    }
    for (const plan of plans) {
      const state = jobs.get(plan.job);
      if (!state) continue;
      state.assignment = plan.assignment;
      // A trigger that came while the plan was made still counts: the next fire reshards again; so
      // does one that running items kept from taking effect, reading only those items' nodes.
      const settled = plan.held.length === 0;
      if (state.reshards === plan.reshards && settled) state.needsReshard = false;
      if (plan.resharded) {
        state.held = settled ? undefined : { items: plan.held, reshards: plan.reshards };
        this.deps.resharded(plan.job, plan.reshards, settled);
      }
    }
    this.leadMoved(this.deps.lead.adapt(this.deps.clock.now() - started));
    // The ledgers are durable: if the enqueue fails or we crash before it, the next leader replays them.
    const generation = this.deps.generation();
    const byTime = new Map<number, FirePlan[]>();
    for (const plan of plans) {
      const group = byTime.get(plan.ledger.fireTime);
      if (group) group.push(plan);
      else byTime.set(plan.ledger.fireTime, [plan]);
    }
    // Enqueued shortly before the nominal time: the workers take the requests ahead and hold them
    // until that time (WorkerService), so at the fire time only their own timer and the item lock
    // stand between the fire and the handler.
    // A big fire's enqueue takes long: it begins as early as it takes, within the lead.
    for (const [fireTime, group] of byTime) {
      const time = fireTime - this.deps.lead.deliveryFor(requestCount(group));
      const { first, behind } = FireLoop.lanesOf(group, lane, holds);
      if (first.length > 0) await this.deps.chain.at(time, () => this.release(first, generation), 'deferred enqueue failed');
      if (behind.length > 0) await this.enqueueBehind(time, behind, generation, holds, lane === 'behind');
    }
  }

  /**
   * Which of a fire's plans enqueue in which lane: a chunk of the lane behind all behind; in the
   * first lane, behind only the jobs with an enqueue still behind (their enqueues stay in fire order).
   */
  private static lanesOf(group: FirePlan[], lane: Lane, holds: Holds): { first: FirePlan[]; behind: FirePlan[] } {
    if (lane === 'behind') return { first: [], behind: group };
    const waiting = holds.enqueuesBehind;
    if (waiting.size === 0) return { first: group, behind: [] };
    return { first: group.filter((plan) => !waiting.has(plan.job)), behind: group.filter((plan) => waiting.has(plan.job)) };
  }

  /**
   * Enqueues `plans` at `time` in the chain's lane behind, counted in `holds` until done; `inline`
   * (the caller runs in that lane): at once if the time has passed.
   */
  private enqueueBehind(time: number, plans: FirePlan[], generation: number, holds: Holds, inline: boolean): Promise<void> {
    holds.countEnqueues(plans, 1);
    const release = () => this.release(plans, generation).finally(() => holds.countEnqueues(plans, -1));
    return this.deps.chain.at(time, release, 'deferred enqueue failed', 'behind', inline);
  }

  /**
   * Enqueues committed fires, then does what their ledgers imply but the enqueue does not. After a
   * change of leadership (`generation` moved on) only the enqueue is left: the job views that the
   * rest relies on are gone or new, and the next leader replays these ledgers anyway.
   */
  private async release(plans: readonly FirePlan[], generation: number): Promise<void> {
    const current = generation === this.deps.generation();
    if (current) for (const plan of plans) this.reroute(plan);
    const started = this.deps.clock.now();
    try {
      await this.deps.dispatcher.enqueue(plans);
    } catch (err) {
      // After a change of leadership the next leader replays these ledgers. Leading still, nobody
      // would (found in review: the fire was logged and lost, partly enqueued perhaps): it is caught
      // up as a fire whose ledger write failed is, and what did land is not added twice (job ids).
      if (!current || !this.deps.election.isLeader) throw err;
      this.deps.log.error({ err, jobs: plans.length, fireTimes: [...new Set(plans.map((p) => p.ledger.fireTime))] }, 'could not enqueue dispatched fires; caught up in a moment');
      for (const plan of plans) this.markMissed(plan.job, plan.ledger.fireTime);
      this.retryMissed();
      return;
    }
    const enqueueMs = this.deps.clock.now() - started;
    let requests = 0;
    for (const plan of plans) {
      const items = requestCount([plan]);
      requests += items;
      this.deps.events.dispatched({ job: plan.job, fireTime: plan.ledger.fireTime, source: plan.ledger.source, items, epoch: plan.ledger.epoch });
      if (!current) continue;
      const view = this.deps.jobs.get(plan.job)?.view;
      if (view) this.deps.moves.afterEnqueue(Object.entries(plan.ledger.queues), view);
    }
    this.leadMoved(this.deps.lead.noteEnqueue(requests, enqueueMs));
    if (!current || !this.deps.election.isLeader) return;
    await this.deps.dispatcher.recordAssignments(plans, this.deps.jobs, this.deps.election.fence()).catch((err) => {
      if (!isDeposed(err)) this.deps.log.warn({ err }, 'could not record item owners in sharding/{i}/instance; retried with the next fire');
    });
  }

  /**
   * Sends the requests of instances that died or began draining since the plan was made to live
   * ones instead (each item where the job's next fires will run it). The ledger still names the old
   * owner; the next fire reshards, since the assignment no longer holds.
   */
  private reroute(plan: FirePlan): void {
    const view = this.deps.jobs.get(plan.job)?.view;
    if (!view) return;
    const moved = reroute(plan.requests, plan.ledger.queues, (id) => view.instance(id), (items, except) => {
      const targets = view.targetsFor(items, except);
      return new Map([...targets].map(([item, target]) => [item, { queue: target.info.queue }]));
    });
    for (const { from, items } of moved) {
      this.deps.log.info({ job: plan.job, fireTime: plan.ledger.fireTime, from, items }, 'instance left before the fire; its items go to live instances');
    }
  }

  private leadMoved(before: number | undefined): void {
    if (before !== undefined) this.deps.log.debug({ from: before, to: this.deps.lead.ms }, 'dispatch lead changed');
  }

  /** Catches up the missed fires a moment from now, if this process still leads then (else when it resumes). */
  private retryMissed(): void {
    const retry = setTimeout(() => this.deps.election.isLeader && this.catchUp(), 1_000);
    retry.unref();
  }

  private skip(job: string, fireTime: number, reason: SkipReason): void {
    this.deps.log.info({ job, fireTime, reason }, 'fire skipped');
    this.deps.events.skipped({ job, fireTime, reason });
  }
}

function wholeAtLeastOne(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) throw new ShardcronError(ErrorCodes.INVALID_CONFIG, `${name} must be a whole number of at least 1, got ${String(value)}`);
  return value;
}

/** How many requests the plans send. */
function requestCount(plans: readonly FirePlan[]): number {
  let n = 0;
  for (const plan of plans) for (const list of plan.requests.values()) n += list.length;
  return n;
}

/** The write failed because this process no longer leads. */
export function isDeposed(err: unknown): boolean {
  return err instanceof ShardcronError && (err.code === ErrorCodes.ZK_FENCE_LOST || err.code === ErrorCodes.LEADERSHIP_LOST);
}
