/**
 * The console's view of the execution history (docs/history.md): `GET /api/jobs/:name/executions`
 * reads the job's recent list in Redis first and, when SHARDCRON_TRACING_PG_URL is set and the list
 * comes up short, goes on in PostgreSQL's traces from the oldest record the list gave. `GET
 * /api/jobs` shows each job's last outcome from a cache refreshed off the request path, so listing
 * a thousand jobs costs no Redis round trip per job per request.
 */
import type { Redis, Cluster } from 'ioredis';
import type { Logger } from '../shared/logger';
import type { ExecutionRecord } from '../shared/registry/execution-record';
import { recentExecutionsKey } from '../shared/registry/redis-keys';
import { RecentExecutionsReader } from '../history/recent-executions-reader';
import { decodeRecentEntry } from '../history/recent-entry';
import { PgTraceReader } from '../history/trace-reader';
import type { TracedExecution } from '../history/traced-execution';
import type { LastExecution } from './routes-jobs';

/** How often the last outcomes are read again while someone looks at the job list. */
const LAST_REFRESH_MS = 2_000;
/** The last outcomes stop being refreshed when nobody asked for them for this long. */
const LAST_IDLE_MS = 30_000;

/** A traced execution as the contract's record: the trace's own ids dropped, `attempts` 1 when the row has none (another tool's). */
function asRecord(traced: TracedExecution): ExecutionRecord {
  const { taskId: _taskId, hostname: _hostname, ip: _ip, attempts, ...record } = traced;
  return { ...record, attempts: attempts ?? 1 };
}

/** Options of {@link ExecutionHistory}. */
export interface ExecutionHistoryOptions {
  redis: Redis | Cluster;
  namespace: string;
  /** PostgreSQL of the traces (SHARDCRON_TRACING_PG_URL): older records come from there. */
  tracingPgUrl?: string;
  logger: Logger;
}

/** Recent executions (Redis, then PostgreSQL) and the last outcome of each job. */
export class ExecutionHistory {
  private readonly recentReader: RecentExecutionsReader;
  private readonly traces: PgTraceReader | undefined;
  private readonly log: Logger;
  private last = new Map<string, LastExecution>();
  private lastJobs: readonly string[] = [];
  private lastAskedAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private refreshing: Promise<void> | undefined;
  private closing: Promise<void> | undefined;

  constructor(private readonly options: ExecutionHistoryOptions) {
    this.log = options.logger.child({ component: 'console-history' });
    this.recentReader = new RecentExecutionsReader({ redis: options.redis, namespace: options.namespace, logger: options.logger });
    this.traces = options.tracingPgUrl === undefined ? undefined : new PgTraceReader({ connectionString: options.tracingPgUrl, logger: options.logger });
  }

  /**
   * The newest `limit` records of `job` (of item `item` only), newest first: the recent list's, then
   * the traces' finished before the oldest of those. A trace query that fails is logged and the
   * recent records are answered alone (the list is the console's first source).
   */
  async recent(job: string, query: { limit: number; item?: number }): Promise<ExecutionRecord[]> {
    const found = await this.recentReader.recent(job, query);
    if (!this.traces || found.length >= query.limit) return found;
    const oldest = found.length === 0 ? undefined : Math.min(...found.map((r) => r.finishedAt));
    try {
      const older = await this.traces.executions(job, {
        limit: query.limit - found.length,
        ...(query.item !== undefined && { item: query.item }),
        ...(oldest !== undefined && { before: oldest }),
      });
      return [...found, ...older.map(asRecord)];
    } catch (err) {
      this.log.warn({ err, job }, 'could not read older executions from PostgreSQL; answering the recent list only');
      return found;
    }
  }

  /**
   * The newest record of each of `jobs` as last read, and a refresh of them started when they are
   * older than {@link LAST_REFRESH_MS} (the caller never waits for Redis).
   */
  lastOf(jobs: readonly string[]): ReadonlyMap<string, LastExecution> {
    this.lastJobs = jobs;
    this.lastAskedAt = Date.now();
    if (!this.timer && !this.closing) {
      void this.refresh();
      this.timer = setInterval(() => {
        if (Date.now() - this.lastAskedAt > LAST_IDLE_MS) {
          clearInterval(this.timer);
          this.timer = undefined;
          return;
        }
        void this.refresh();
      }, LAST_REFRESH_MS);
      this.timer.unref();
    }
    return this.last;
  }

  /** Reads the head of every listed job's recent list in one pipeline (one refresh at a time). */
  refresh(): Promise<void> {
    return (this.refreshing ??= this.doRefresh().finally(() => (this.refreshing = undefined)));
  }

  close(): Promise<void> {
    return (this.closing ??= (async () => {
      clearInterval(this.timer);
      this.timer = undefined;
      await this.refreshing?.catch(() => undefined);
      await this.traces?.close();
    })());
  }

  private async doRefresh(): Promise<void> {
    const jobs = this.lastJobs;
    if (jobs.length === 0) return;
    const pipeline = this.options.redis.pipeline();
    for (const job of jobs) pipeline.lindex(recentExecutionsKey(this.options.namespace, job), 0);
    let replies: Array<[Error | null, unknown]> | null;
    try {
      replies = await pipeline.exec();
    } catch (err) {
      this.log.debug({ err }, 'could not read the last executions');
      return;
    }
    const next = new Map<string, LastExecution>();
    jobs.forEach((job, i) => {
      const [err, entry] = replies?.[i] ?? [null, null];
      if (err || typeof entry !== 'string') return;
      try {
        const { status, finishedAt, item, error } = decodeRecentEntry(entry, job);
        next.set(job, { status, finishedAt, item, ...(error && { error }) });
      } catch {
        // A corrupt head entry: the recent reader reports it when the job's executions are read.
      }
    });
    this.last = next;
  }
}
