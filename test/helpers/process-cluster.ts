/**
 * shardcron nodes as real child processes (test/fixtures/node-process.ts), for fault injection:
 * kill -9, SIGSTOP/SIGCONT, SIGTERM. Collects every JSON line they print into one log.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ExecutionEvent } from '../../src/worker/item-executor';
import type { RedisTarget } from '../../src/shared/redis/redis-target';
import { waitFor } from './services';
import { uniqueNamespace } from './zk';

export interface ProcessLine {
  kind: 'exec' | 'leader' | 'fire' | 'failover' | 'missed' | 'ready' | 'reconciled' | 'registered' | 'consumers-replaced' | 'zk' | 'listener';
  pid: number;
  [key: string]: unknown;
}

export type ExecLine = ExecutionEvent & ProcessLine;

export interface JobSpec {
  name: string;
  cron: string;
  shardingTotalCount?: number;
  failover?: boolean;
  misfire?: boolean;
  sleepMs?: number;
  /** Items that sleep this long instead of sleepMs. */
  itemSleepMs?: Record<number, number>;
  /** Items whose handler throws. */
  failItems?: number[];
  /** Define beforeFire/afterFire listeners that print a `listener` line each (test/fixtures/node-process.ts). */
  fireListeners?: boolean;
}

/** A `listener` line: a beforeFire or afterFire call of a fixture job. */
export interface ListenerLine extends ProcessLine {
  kind: 'listener';
  event: 'beforeFire' | 'afterFire';
  job: string;
  fireTime: number;
  source: string;
  items: number;
  instanceId: string;
  at: number;
}

interface Member {
  name: string;
  child: ChildProcess;
  exited: Promise<number | null>;
  /** When it was killed with SIGKILL (its open executions end there). */
  killedAt?: number;
  /** When it was frozen with SIGSTOP (it runs nothing from then until SIGCONT). */
  stops: number[];
}

const FIXTURE = path.join(__dirname, '..', 'fixtures', 'node-process.ts');

export class ProcessCluster {
  readonly namespace = uniqueNamespace('chaos');
  readonly lines: ProcessLine[] = [];
  private readonly members = new Map<string, Member>();

  /** What the cluster did to one node: its stops (SIGSTOP times) and kill time. */
  member(name: string): Readonly<Pick<Member, 'stops' | 'killedAt'>> | undefined {
    return this.members.get(name);
  }

  /** `redis`, when given, replaces `redisUrl` with a whole target (a Sentinel group, a Cluster). */
  /** `env`: more variables for every process (e.g. `SHARDCRON_ITEM_LEASE`), before a start's own. */
  constructor(private readonly base: { zk: string; redisUrl: string; sessionTimeoutMs?: number; redis?: RedisTarget; env?: Record<string, string> }) {}

  /** Starts a node process named `name` (its instance id) and waits until it reports ready. */
  async start(name: string, roles: string, jobs: JobSpec[], extraEnv: Record<string, string> = {}): Promise<void> {
    const child = spawn(process.execPath, ['--require', 'tsx/cjs', FIXTURE], {
      cwd: path.join(__dirname, '..', '..'),
      env: {
        PATH: process.env.PATH,
        SHARDCRON_ZK: this.base.zk,
        SHARDCRON_REDIS_URL: this.base.redisUrl,
        ...(this.base.redis && redisTargetEnv(this.base.redis)),
        SHARDCRON_NAMESPACE: this.namespace,
        SHARDCRON_INSTANCE_ID: name,
        SHARDCRON_ROLES: roles,
        SHARDCRON_ZK_SESSION_TIMEOUT_MS: String(this.base.sessionTimeoutMs ?? 2_000),
        SHARDCRON_ZK_CONNECT_TIMEOUT_MS: '5000',
        SHARDCRON_ZK_BASE_SLEEP_MS: '100',
        SHARDCRON_ZK_MAX_SLEEP_MS: '1000',
        SHARDCRON_LOG_LEVEL: process.env.SHARDCRON_TEST_PROCESS_LOG ?? 'silent',
        SHARDCRON_SHUTDOWN_GRACE_MS: '5000',
        // The chaos tests and the soak run either item lock (`SHARDCRON_ITEM_LEASE=off npm run soak`); unset: the namespace's, a lease.
        ...(process.env.SHARDCRON_ITEM_LEASE !== undefined && { SHARDCRON_ITEM_LEASE: process.env.SHARDCRON_ITEM_LEASE }),
        FIXTURE_JOBS: JSON.stringify(jobs),
        ...this.base.env,
        ...extraEnv,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buffer = '';
    // SHARDCRON_TEST_PROCESS_DIR: keep each process's raw output (with SHARDCRON_TEST_PROCESS_LOG=debug).
    const raw = process.env.SHARDCRON_TEST_PROCESS_DIR
      ? fs.createWriteStream(path.join(process.env.SHARDCRON_TEST_PROCESS_DIR, `${this.namespace}-${name}.log`))
      : undefined;
    child.stdout!.on('data', (chunk: Buffer) => {
      raw?.write(chunk);
      buffer += chunk.toString('utf8');
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const text = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        try {
          const line = JSON.parse(text) as ProcessLine;
          if (line.kind) this.lines.push({ ...line, node: name });
        } catch {
          // pino logs (when enabled) and other output
        }
      }
    });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    this.members.set(name, { name, child, exited, stops: [] });
    await waitFor(() => this.lines.some((l) => l.kind === 'ready' && l.pid === child.pid), {
      timeoutMs: 30_000,
      message: `process ${name} ready (stderr: ${stderr})`,
    });
  }

  pid(name: string): number {
    return this.members.get(name)!.child.pid!;
  }

  signal(name: string, signal: NodeJS.Signals): void {
    const member = this.members.get(name)!;
    if (signal === 'SIGKILL') member.killedAt = Date.now();
    if (signal === 'SIGSTOP') member.stops.push(Date.now());
    member.child.kill(signal);
  }

  exited(name: string): Promise<number | null> {
    return this.members.get(name)!.exited;
  }

  execs(job?: string): ExecLine[] {
    return this.lines.filter((l): l is ExecLine => l.kind === 'exec' && (!job || (l as ExecLine).job === job));
  }

  /** The beforeFire/afterFire calls of fixture jobs, as printed when each listener began. */
  listenerCalls(job?: string): ListenerLine[] {
    return this.lines.filter((l): l is ListenerLine => l.kind === 'listener' && (!job || (l as ListenerLine).job === job));
  }

  starts(job?: string): ExecLine[] {
    return this.execs(job).filter((l) => l.event === 'start');
  }

  /** (fire, item) pairs of `job` that completed more than once (invariant I3: none). */
  doubleCompletions(job: string): string[] {
    const counts = new Map<string, number>();
    for (const l of this.execs(job)) {
      if (l.event !== 'finish' || l.status !== 'completed') continue;
      const key = `${l.fireTime}|${l.item}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    return [...counts].filter(([, n]) => n > 1).map(([k]) => k);
  }

  /**
   * The nominal fire times of an every-`periodMs` job from `from` to `to` (rounded up to a fire)
   * at which some of its `items` never started, with the items that did: fires missed whole or in part.
   */
  incompleteFires(job: string, items: number, from: number, to: number, periodMs = 1_000): Array<{ fireTime: number; started: number[] }> {
    const byFire = new Map<number, Set<number>>();
    for (const s of this.starts(job)) byFire.set(s.fireTime, (byFire.get(s.fireTime) ?? new Set()).add(s.item));
    const out: Array<{ fireTime: number; started: number[] }> = [];
    for (let fire = Math.ceil(from / periodMs) * periodMs; fire <= to; fire += periodMs) {
      const started = byFire.get(fire) ?? new Set<number>();
      if (started.size < items) out.push({ fireTime: fire, started: [...started].sort((a, b) => a - b) });
    }
    return out;
  }

  /**
   * Every line about one fire of a job, oldest first, for failure messages: its dispatch, the
   * executions of its items (any source), their moves and misses.
   */
  story(job: string, fireTime: number): string[] {
    return this.lines
      .filter((l) => l.job === job && l.fireTime === fireTime)
      .map(({ pid: _pid, job: _job, fireTime: _fire, ...rest }) => JSON.stringify(rest));
  }

  /**
   * Same-item executions on different instances whose [start, end] overlap, where an execution
   * never finished ends when its process was killed (or is still running).
   */
  overlaps(job: string): Array<[ExecLine, ExecLine]> {
    const ends = new Map<string, ExecLine>();
    const key = (l: ExecLine) => `${l.instanceId}|${l.fireTime}|${l.item}|${l.source}|${l.at}`;
    const open = new Map<string, ExecLine>();
    const keyOf = (l: ExecLine) => `${l.instanceId}|${l.fireTime}|${l.item}|${l.source}`;
    for (const l of this.execs(job)) {
      if (l.event === 'start') open.set(keyOf(l), l);
      else if (open.has(keyOf(l))) {
        ends.set(key(open.get(keyOf(l))!), l);
        open.delete(keyOf(l));
      }
    }
    const endOf = (s: ExecLine): number => {
      const member = this.members.get(s.instanceId);
      const finish = ends.get(key(s));
      let end = finish?.at ?? member?.killedAt ?? Number.POSITIVE_INFINITY;
      // An aborted run stopped executing when its process was frozen, whenever it reported.
      if (finish?.status === 'aborted') for (const stop of member?.stops ?? []) if (stop >= s.at && stop < end) end = stop;
      return end;
    };
    const runs = this.starts(job).map((s) => ({ s, end: endOf(s) }));
    const out: Array<[ExecLine, ExecLine]> = [];
    for (let i = 0; i < runs.length; i += 1) {
      for (let j = i + 1; j < runs.length; j += 1) {
        const a = runs[i];
        const b = runs[j];
        if (a.s.item === b.s.item && a.s.instanceId !== b.s.instanceId && a.s.at < b.end && b.s.at < a.end) out.push([a.s, b.s]);
      }
    }
    return out;
  }

  /** Kills every process still running. */
  async close(): Promise<void> {
    for (const member of this.members.values()) {
      if (member.child.exitCode === null && member.child.signalCode === null) {
        member.child.kill('SIGCONT');
        member.child.kill('SIGKILL');
      }
    }
    await Promise.all([...this.members.values()].map((m) => m.exited));
    this.members.clear();
  }
}

/** The SHARDCRON_REDIS_* variables that name `target`. */
export function redisTargetEnv(target: RedisTarget): Record<string, string> {
  const list = (nodes: ReadonlyArray<{ host: string; port: number }>) => nodes.map((n) => `${n.host}:${n.port}`).join(',');
  return {
    SHARDCRON_REDIS_URL: target.url,
    ...(target.clusterNodes && { SHARDCRON_REDIS_CLUSTER_NODES: list(target.clusterNodes) }),
    ...(target.sentinel && { SHARDCRON_REDIS_SENTINELS: list(target.sentinel.sentinels), SHARDCRON_REDIS_SENTINEL_NAME: target.sentinel.name }),
  };
}

/**
 * The remote ports of the established TCP connections process `pid` holds (Linux: its socket
 * inodes in /proc/PID/fd matched against /proc/PID/net/tcp): which server of an ensemble it talks to.
 */
export function tcpPeerPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match) inodes.add(match[1]);
    } catch {
      // closed meanwhile
    }
  }
  const ports: number[] = [];
  for (const table of ['tcp', 'tcp6']) {
    for (const row of fs.readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
      const cols = row.trim().split(/\s+/);
      // cols: sl, local, remote, state, ..., inode (index 9); state 01 = ESTABLISHED.
      if (cols.length > 9 && cols[3] === '01' && inodes.has(cols[9])) ports.push(parseInt(cols[2].split(':')[1], 16));
    }
  }
  return ports;
}
