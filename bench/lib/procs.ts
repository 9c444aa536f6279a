import fs from 'node:fs';
/**
 * Benchmark nodes as child processes (tsx, IPC channel): shardcron nodes (bench/fixtures/shardcron-node.ts)
 * and BullMQ workers (bench/fixtures/bullmq-node.ts). Each one reports through IPC messages and answers
 * `report` requests with what it measured in-process, so no per-item line crosses a pipe.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { nowMs, waitUntil } from './stats';

export interface BenchMessage {
  type: string;
  [key: string]: unknown;
}

/** What every fixture answers to a `report` request. */
export interface NodeReport {
  /** Fire-to-start latencies (ms) of starts whose nominal fire time is in the requested window. */
  lat: number[];
  /** [nominal fire time, latency of its first start] for each fire in the window. */
  firstByFire: Array<[number, number]>;
  /** [nominal fire time, latency of its last start] for each fire in the window. */
  lastByFire: Array<[number, number]>;
  /** Starts in the window per source (NORMAL, MISFIRE, FAILOVER...). */
  sources: Record<string, number>;
  /** Nominal fire times seen in the window (distinct). */
  fires: number;
  started: number;
  finished: number;
  firstStart: number;
  lastFinish: number;
  /** Leader only: dispatch time minus nominal fire time of each `fire:dispatched` in the window. */
  dispatchLag: number[];
  dispatchedFires: number;
  /** Every `fire:dispatched` since the process started, whatever its fire time. */
  dispatchedTotal: number;
  rssMb: number;
  /** V8 heap in use (process.memoryUsage().heapUsed). */
  heapMb: number;
  /** process.memoryUsage() and V8's heap space sizes, MB (see memoryMb in the recorder). */
  memory?: Record<string, number>;
}

const FIXTURES = path.join(__dirname, '..', 'fixtures');
const ROOT = path.join(__dirname, '..', '..');

/**
 * Where the bench's shardcron processes load shardcron from: `dist` (compiled by tsc, as
 * bin/shardcron.js runs it; bench/run.ts builds it first) unless BENCH_SHARDCRON_CODE=src, which
 * runs the TypeScript sources through tsx (its transform adds a call per function definition).
 */
export const SHARDCRON_CODE: 'dist' | 'src' = process.env.BENCH_SHARDCRON_CODE === 'src' ? 'src' : 'dist';

/**
 * Node flags of every worker process, shardcron's and raw BullMQ's alike (BENCH_WORKER_NODE_ARGS,
 * e.g. '--max-semi-space-size=64', the option docs/deployment.md describes); none by default.
 */
export const WORKER_NODE_ARGS: readonly string[] = (process.env.BENCH_WORKER_NODE_ARGS ?? '').split(' ').filter(Boolean);

export class BenchProcess {
  readonly messages: BenchMessage[] = [];
  readonly exited: Promise<number | null>;
  killedAt: number | undefined;
  private stderr = '';
  private nextId = 0;
  private readonly pending = new Map<number, (body: unknown) => void>();

  private constructor(
    readonly name: string,
    private readonly child: ChildProcess,
  ) {
    this.exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
    child.stderr!.on('data', (chunk: Buffer) => (this.stderr = (this.stderr + chunk.toString()).slice(-4000)));
    // BENCH_STDOUT_DIR=dir keeps each process's stdout (e.g. --trace-gc output) in dir/<name>.log.
    if (process.env.BENCH_STDOUT_DIR) child.stdout!.pipe(fs.createWriteStream(path.join(process.env.BENCH_STDOUT_DIR, `${name}.log`)));
    else child.stdout!.resume();
    child.on('message', (raw) => {
      const message = raw as BenchMessage;
      if (message.type === 'reply') {
        this.pending.get(message.id as number)?.(message.body);
        this.pending.delete(message.id as number);
      } else this.messages.push(message);
    });
  }

  /** Starts `fixture` (a file in bench/fixtures) and waits for its `ready` message. */
  static async spawn(name: string, fixture: string, env: Record<string, string>, readyTimeoutMs = 60_000, nodeArgs: readonly string[] = []): Promise<BenchProcess> {
    // BENCH_NODE_ARGS_<NAME> (e.g. BENCH_NODE_ARGS_LEADER_1='--cpu-prof') adds node flags to one process.
    const extra = (process.env[`BENCH_NODE_ARGS_${name.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`] ?? '').split(' ').filter(Boolean);
    const child = spawn(process.execPath, [...nodeArgs, ...extra, '--require', 'tsx/cjs', path.join(FIXTURES, fixture)], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, NODE_ENV: 'production', ...env },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    const proc = new BenchProcess(name, child);
    try {
      await waitUntil(async () => {
        if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}: ${proc.stderr}`);
        return proc.messages.some((m) => m.type === 'ready');
      }, readyTimeoutMs, `${name} ready`, 100);
    } catch (err) {
      proc.kill('SIGKILL');
      throw new Error(`${(err as Error).message} (stderr: ${proc.stderr.slice(-1500)})`);
    }
    return proc;
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  events(type: string): BenchMessage[] {
    return this.messages.filter((m) => m.type === type);
  }

  /** Sends a request and resolves with the fixture's reply body. */
  request<T>(body: Record<string, unknown>, timeoutMs = 60_000): Promise<T> {
    const id = ++this.nextId;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${this.name}: no reply to ${String(body.type)} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, (reply) => {
        clearTimeout(timer);
        resolve(reply as T);
      });
      this.child.send({ ...body, id });
    });
  }

  /** Measurements for nominal fire times in [from, to). */
  report(from = 0, to = Number.MAX_SAFE_INTEGER): Promise<NodeReport> {
    return this.request<NodeReport>({ type: 'report', from, to });
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): number {
    const at = nowMs();
    if (signal === 'SIGKILL') this.killedAt = at;
    if (this.alive) this.child.kill(signal);
    return at;
  }
}

/** Every process a scenario started; `close()` SIGKILLs those still running and waits for them. */
export class ProcessGroup {
  private readonly procs: BenchProcess[] = [];

  async spawn(name: string, fixture: string, env: Record<string, string>, readyTimeoutMs?: number, nodeArgs?: readonly string[]): Promise<BenchProcess> {
    const proc = await BenchProcess.spawn(name, fixture, env, readyTimeoutMs, nodeArgs);
    this.procs.push(proc);
    return proc;
  }

  /** SIGTERM (fixtures exit at once, writing --cpu-prof output if asked), SIGKILL after 3 s. */
  async close(): Promise<void> {
    for (const p of this.procs) p.kill('SIGTERM');
    const timer = setTimeout(() => this.procs.forEach((p) => p.kill('SIGKILL')), 3_000);
    await Promise.all(this.procs.map((p) => p.exited));
    clearTimeout(timer);
    this.procs.length = 0;
  }
}

export interface ShardcronJobGroup {
  /** Job names are `${prefix}${i}`, i in 0..count-1. */
  prefix: string;
  count: number;
  cron: string;
  items?: number;
  failover?: boolean;
  misfire?: boolean;
  monitorExecution?: boolean;
  sleepMs?: number;
}

export function jobNames(groups: readonly ShardcronJobGroup[]): string[] {
  return groups.flatMap((g) => Array.from({ length: g.count }, (_, i) => `${g.prefix}${i}`));
}

export interface ShardcronNodeOptions {
  zk: string;
  redisUrl: string;
  namespace: string;
  instanceId: string;
  roles: 'scheduler' | 'worker' | 'scheduler,worker';
  sessionTimeoutMs?: number;
  concurrency?: number;
  jobs?: readonly ShardcronJobGroup[];
  /** Messages to send per occurrence: `start` (item starts), `fire` (dispatches). */
  events?: readonly ('start' | 'fire')[];
  /** false: no recent list in Redis (SHARDCRON_HISTORY_RECENT=0), to measure what writing it costs. */
  history?: boolean;
  /** Another build's dist/ to run instead of this one (an absolute path; see BENCH_BASELINE_CODE). */
  code?: string;
  /** More environment variables (they win over the ones above). */
  env?: Record<string, string>;
}

export function spawnShardcron(group: ProcessGroup, o: ShardcronNodeOptions, readyTimeoutMs?: number): Promise<BenchProcess> {
  return group.spawn(o.instanceId, 'shardcron-node.ts', {
    SHARDCRON_ZK: o.zk,
    SHARDCRON_REDIS_URL: o.redisUrl,
    SHARDCRON_NAMESPACE: o.namespace,
    SHARDCRON_INSTANCE_ID: o.instanceId,
    SHARDCRON_ROLES: o.roles,
    SHARDCRON_ZK_SESSION_TIMEOUT_MS: String(o.sessionTimeoutMs ?? 10_000),
    SHARDCRON_ZK_CONNECT_TIMEOUT_MS: '15000',
    SHARDCRON_CONCURRENCY: String(o.concurrency ?? 10),
    SHARDCRON_LOG_LEVEL: process.env.BENCH_NODE_LOG ?? 'silent',
    SHARDCRON_SHUTDOWN_GRACE_MS: '1000',
    BENCH_SHARDCRON_CODE: o.code ?? SHARDCRON_CODE,
    BENCH_JOBS: JSON.stringify(o.jobs ?? []),
    BENCH_EVENTS: (o.events ?? []).join(','),
    ...(o.history === false && { SHARDCRON_HISTORY_RECENT: '0' }),
    ...(process.env.BENCH_HEAP_GROWTH_PERCENT !== undefined && { SHARDCRON_HEAP_GROWTH_PERCENT: process.env.BENCH_HEAP_GROWTH_PERCENT }),
    ...(process.env.BENCH_PREFETCH !== undefined && { SHARDCRON_PREFETCH: process.env.BENCH_PREFETCH }),
    ...(process.env.BENCH_CONSUMERS !== undefined && { SHARDCRON_CONSUMERS: process.env.BENCH_CONSUMERS }),
    ...(process.env.BENCH_ITEM_LEASE !== undefined && { SHARDCRON_ITEM_LEASE: process.env.BENCH_ITEM_LEASE }),
    // Completed requests are removed as they complete: the "where the time goes" tables read them, so they need this.
    ...(process.env.BENCH_COMPLETED_KEPT !== undefined && { SHARDCRON_COMPLETED_KEPT: process.env.BENCH_COMPLETED_KEPT }),
    // As the Docker image runs shardcron (see the Dockerfile); BENCH_MALLOC_ARENA_MAX=glibc leaves glibc's default.
    ...(process.env.BENCH_MALLOC_ARENA_MAX !== 'glibc' && { MALLOC_ARENA_MAX: process.env.BENCH_MALLOC_ARENA_MAX ?? '2' }),
    ...o.env,
  }, readyTimeoutMs, o.roles.split(',').includes('worker') ? WORKER_NODE_ARGS : []);
}

export interface BullmqNodeOptions {
  redisUrl: string;
  queue: string;
  name: string;
  concurrency: number;
  sleepMs?: number;
  events?: readonly 'start'[];
}

export function spawnBullmq(group: ProcessGroup, o: BullmqNodeOptions): Promise<BenchProcess> {
  return group.spawn(o.name, 'bullmq-node.ts', {
    BENCH_REDIS_URL: o.redisUrl,
    BENCH_QUEUE: o.queue,
    BENCH_CONCURRENCY: String(o.concurrency),
    BENCH_SLEEP_MS: String(o.sleepMs ?? 0),
    BENCH_EVENTS: (o.events ?? []).join(','),
  }, undefined, WORKER_NODE_ARGS);
}

/** Merges the reports of several processes (e.g. all workers of a run). */
export function mergeReports(reports: readonly NodeReport[]): NodeReport {
  const sources: Record<string, number> = {};
  for (const r of reports) for (const [k, v] of Object.entries(r.sources)) sources[k] = (sources[k] ?? 0) + v;
  const first = new Map<number, number>();
  for (const r of reports) for (const [fire, v] of r.firstByFire) if (!(first.get(fire)! <= v)) first.set(fire, v);
  const last = new Map<number, number>();
  for (const r of reports) for (const [fire, v] of r.lastByFire) if (!(last.get(fire)! >= v)) last.set(fire, v);
  return {
    lat: reports.flatMap((r) => r.lat),
    firstByFire: [...first],
    lastByFire: [...last],
    sources,
    fires: Math.max(0, ...reports.map((r) => r.fires)),
    started: reports.reduce((n, r) => n + r.started, 0),
    finished: reports.reduce((n, r) => n + r.finished, 0),
    firstStart: Math.min(...reports.map((r) => r.firstStart)),
    lastFinish: Math.max(...reports.map((r) => r.lastFinish)),
    dispatchLag: reports.flatMap((r) => r.dispatchLag),
    dispatchedFires: reports.reduce((n, r) => n + r.dispatchedFires, 0),
    dispatchedTotal: reports.reduce((n, r) => n + r.dispatchedTotal, 0),
    rssMb: Math.max(...reports.map((r) => r.rssMb)),
    heapMb: Math.max(...reports.map((r) => r.heapMb)),
  };
}
