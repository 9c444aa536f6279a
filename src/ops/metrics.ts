/**
 * Prometheus metrics of one process (DESIGN.md "Console contract": the names are a contract). One
 * prom-client Registry per process, fed by the roles' events: the leader's fires, failovers and
 * leadership, the worker's executions. Queue depths and live instances are read when scraped.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { LeaderServiceEvents } from '../leader/leader-service';
import type { TypedEmitter } from '../shared/typed-emitter';
import type { WorkerServiceEvents } from '../worker/worker-service';

/** What the leader role reports (LeaderService's events and leadership). */
export type LeaderEventSource = Pick<TypedEmitter<LeaderServiceEvents>, 'on'> & { readonly isLeader: boolean };

/** What the worker role reports (WorkerService's events). */
export type WorkerEventSource = Pick<TypedEmitter<WorkerServiceEvents>, 'on'>;

/** Read when Prometheus scrapes. */
export interface ScrapeSources {
  /** Live instance queues and how many requests wait in each (waiting, delayed, prioritized, active). */
  queueDepths?(): Promise<ReadonlyMap<string, number>>;
  /** Live instances of the namespace. */
  liveInstances?(): number | Promise<number>;
}

/** The `shardcron_*` metrics of this process, and its default metrics. */
export class ShardcronMetrics {
  readonly registry = new Registry();
  private readonly fires: Counter<'job'>;
  private readonly executions: Counter<'job' | 'status'>;
  private readonly fireToStart: Histogram;
  private readonly executionSeconds: Histogram;
  private readonly failovers: Counter<'job'>;
  private readonly misfires: Counter<'job'>;
  private leaderSource: LeaderEventSource | undefined;
  private scrape: ScrapeSources = {};
  /** Start times of executions in progress, for their duration. */
  private readonly started = new Map<string, number>();

  constructor() {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: 'shardcron_' });
    this.fires = new Counter({ name: 'shardcron_fires_total', help: 'Fires dispatched by this process while it led, by job (MISFIRE and TRIGGER fires included)', labelNames: ['job'], registers });
    this.executions = new Counter({ name: 'shardcron_executions_total', help: 'Executions ended on this worker, by job and status', labelNames: ['job', 'status'], registers });
    this.fireToStart = new Histogram({
      name: 'shardcron_fire_to_start_seconds',
      help: 'From a fire\'s nominal time to its handler starting on this worker',
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.executionSeconds = new Histogram({
      name: 'shardcron_execution_seconds',
      help: 'How long handlers ran on this worker',
      buckets: [0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300],
      registers,
    });
    this.failovers = new Counter({ name: 'shardcron_failovers_total', help: 'Requests of lost or draining instances this leader moved, by job', labelNames: ['job'], registers });
    this.misfires = new Counter({ name: 'shardcron_misfires_total', help: 'Fires that found their item running (skipped or marked) on this worker, were skipped as missed, or were folded into one MISFIRE run, by job', labelNames: ['job'], registers });
    const metrics = this;
    // Gauges read when scraped: registered, never set from the outside.
    new Gauge({
      name: 'shardcron_is_leader',
      help: '1 while this process leads its namespace',
      registers,
      collect() {
        this.set(metrics.leaderSource?.isLeader ? 1 : 0);
      },
    });
    new Gauge({
      name: 'shardcron_live_instances',
      help: 'Live worker instances of the namespace, as this process sees them',
      registers,
      async collect() {
        const count = await metrics.scrape.liveInstances?.();
        if (count !== undefined) this.set(count);
      },
    });
    new Gauge({
      name: 'shardcron_queue_depth',
      help: 'Requests waiting, delayed, prioritized or running in each live instance queue',
      labelNames: ['queue'],
      registers,
      async collect() {
        const depths = await metrics.scrape.queueDepths?.().catch(() => undefined);
        if (!depths) return;
        this.reset();
        for (const [queue, depth] of depths) this.set({ queue }, depth);
      },
    });
  }

  /** Counts the leader role's fires, failovers and misfires. */
  watchLeader(leader: LeaderEventSource): void {
    this.leaderSource = leader;
    leader.on('fire:dispatched', ({ job }) => this.fires.inc({ job }));
    leader.on('item:failover', ({ job }) => this.failovers.inc({ job }));
    leader.on('fire:skipped', ({ job, reason }) => reason === 'missed' && this.misfires.inc({ job }));
    leader.on('fire:coalesced', ({ job, fireTimes }) => this.misfires.inc({ job }, fireTimes.length));
  }

  /** Counts the worker role's executions. */
  watchWorker(worker: WorkerEventSource): void {
    const key = (e: { job: string; fireTime: number; item: number; source: string }) => `${e.job}|${e.fireTime}|${e.item}|${e.source}`;
    worker.on('item:started', (e) => {
      this.fireToStart.observe(Math.max(0, e.at - e.fireTime) / 1000);
      this.started.set(key(e), e.at);
    });
    worker.on('item:finished', (e) => {
      const status = e.status ?? 'completed';
      this.executions.inc({ job: e.job, status });
      if (status === 'skipped' && typeof e.reason === 'string' && e.reason.includes('item running elsewhere')) this.misfires.inc({ job: e.job });
      const startedAt = this.started.get(key(e));
      if (startedAt !== undefined) {
        this.started.delete(key(e));
        this.executionSeconds.observe(Math.max(0, e.at - startedAt) / 1000);
      }
    });
  }

  /** Sources read at scrape time (set by the console role). */
  scrapeFrom(sources: ScrapeSources): void {
    this.scrape = sources;
  }

  /** The Prometheus text exposition. */
  async text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
