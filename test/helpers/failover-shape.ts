/**
 * The 3-node failover shape of issue 22, as an outside acceptance test runs it: three processes with
 * both roles (scheduler and worker), a ZooKeeper ticking every 500 ms, 2 s sessions, one job with 9
 * items every second (failover on, 400 ms handlers that honour their signal), and a kill -9 of one
 * process while it runs items: the leader or another one. Used by the chaos test (each shape twice)
 * and by `npm run failover-shapes` (each shape ten times, with the figures).
 */
import { ProcessCluster, type ExecLine } from './process-cluster';
import { waitFor } from './services';

/** The shape's ZooKeeper tick and session, and the bound failover must meet. */
export const SHAPE_TICK_MS = 500;
export const SHAPE_SESSION_MS = 2_000;
/** Session timeout + one server tick + 1 s (issue 22). */
export const FAILOVER_BOUND_MS = SHAPE_SESSION_MS + SHAPE_TICK_MS + 1_000;
const JOB = 'nine';
const ITEMS = 9;
const PERIOD_MS = 1_000;
const NODES = ['p1', 'p2', 'p3'];

export interface ShapeOptions {
  zk: string;
  redisUrl: string;
  /** The process killed: the leader, or one that is not. */
  victim: 'leader' | 'non-leader';
  misfire: boolean;
  /** How long after the kill fires are watched (default 10 s); the last 3 s of it only to let them finish. */
  settleMs?: number;
}

/** What one run of the shape showed. */
export interface ShapeResult {
  victim: string;
  killedAt: number;
  /** Fires checked: from the one running on the victim at the kill to the last that had time to end. */
  fires: number[];
  /** (fire, item) pairs that never started. */
  neverStarted: string[];
  /** (fire, item) pairs that never completed (and were not folded into a MISFIRE run, with misfire on). */
  neverCompleted: string[];
  /** (fire, item) pairs completed more than once. */
  doubled: string[];
  /** Same-item runs that overlapped on two instances. */
  overlaps: number;
  /** Per (fire, item) run late because of the kill: first completed start - max(kill, fire time). */
  delaysMs: number[];
  /** The largest of `delaysMs` (0 when none). */
  maxDelayMs: number;
  /** Items of the victim running at the kill, and how long after the kill each restarted. */
  inFlightRestartMs: number[];
  /** MISFIRE runs over the checked fires, and the most of them any one item had. */
  misfireRuns: number;
  misfireRunsPerItem: number;
  /** Per process, how long after it reported ready its first item started. */
  joinMs: Record<string, number>;
  /** Lines about the (fire, item) pairs that went wrong, for failure messages. */
  stories: string[];
}

const key = (fireTime: number, item: number) => `${fireTime}|${item}`;

/** Runs the shape once on a fresh namespace; the processes are killed before it returns. */
export async function runFailoverShape(options: ShapeOptions): Promise<ShapeResult> {
  const cluster = new ProcessCluster({ zk: options.zk, redisUrl: options.redisUrl, sessionTimeoutMs: SHAPE_SESSION_MS });
  const job = { name: JOB, cron: '* * * * * ?', shardingTotalCount: ITEMS, failover: true, misfire: options.misfire, sleepMs: 400 };
  const settleMs = options.settleMs ?? 10_000;
  try {
    const readyAt: Record<string, number> = {};
    await Promise.all(
      NODES.map(async (name) => {
        await cluster.start(name, 'scheduler,worker', [job]);
        readyAt[name] = Date.now();
      }),
    );
    // Steady state: two consecutive fires with all 9 items started, every process running some.
    await waitFor(
      () => {
        const starts = cluster.starts(JOB).filter((s) => s.source === 'NORMAL');
        const fires = [...new Set(starts.map((s) => s.fireTime))].sort((a, b) => a - b);
        const full = fires.filter((f) => new Set(starts.filter((s) => s.fireTime === f).map((s) => s.item)).size === ITEMS);
        const everyone = NODES.every((n) => starts.some((s) => s.instanceId === n));
        return everyone && full.some((f) => full.includes(f - PERIOD_MS));
      },
      { timeoutMs: 30_000, message: 'steady state: full fires on all three processes' },
    );
    const joinMs = Object.fromEntries(NODES.map((n) => [n, Math.min(...cluster.starts(JOB).filter((s) => s.instanceId === n).map((s) => s.at)) - readyAt[n]]));
    const leader = [...cluster.lines].reverse().find((l) => l.kind === 'leader')?.node as string;
    const victim = options.victim === 'leader' ? leader : NODES.find((n) => n !== leader)!;
    // Kill while it runs items: an item of the victim started and not finished.
    const open = () => {
      const runs = cluster.execs(JOB).filter((l) => l.instanceId === victim);
      return runs.filter((s) => s.event === 'start' && !runs.some((f) => f.event === 'finish' && f.fireTime === s.fireTime && f.item === s.item && f.source === s.source));
    };
    await waitFor(() => open().length > 0 && Date.now() % PERIOD_MS > 50, { timeoutMs: 10_000, intervalMs: 5, message: `${victim} running items` });
    const inFlight = open();
    cluster.signal(victim, 'SIGKILL');
    const killedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, settleMs));
    return judge(cluster, victim, killedAt, inFlight, settleMs, options.misfire, joinMs);
  } finally {
    await cluster.close();
  }
}

function judge(cluster: ProcessCluster, victim: string, killedAt: number, inFlight: ExecLine[], settleMs: number, misfire: boolean, joinMs: Record<string, number>): ShapeResult {
  const execs = cluster.execs(JOB);
  const first = Math.min(...inFlight.map((s) => s.fireTime));
  const last = Math.floor((killedAt + settleMs - 3_000) / PERIOD_MS) * PERIOD_MS;
  const fires: number[] = [];
  for (let f = first; f <= last; f += PERIOD_MS) fires.push(f);
  const starts = new Map<string, ExecLine[]>();
  const completions = new Map<string, ExecLine[]>();
  const startOf = new Map<string, ExecLine>();
  for (const l of execs) {
    const k = key(l.fireTime, l.item);
    if (l.event === 'start') {
      starts.set(k, [...(starts.get(k) ?? []), l]);
      startOf.set(`${k}|${l.instanceId}|${l.source}`, l);
    } else if (l.status === 'completed') completions.set(k, [...(completions.get(k) ?? []), l]);
  }
  const neverStarted: string[] = [];
  const neverCompleted: string[] = [];
  const delaysMs: number[] = [];
  let misfireRuns = 0;
  for (const f of fires) {
    for (let item = 0; item < ITEMS; item += 1) {
      const k = key(f, item);
      if (!starts.has(k)) neverStarted.push(k);
      const done = completions.get(k) ?? [];
      if (done.length === 0) {
        // With misfire on, a fire that found its item running may be folded into a later MISFIRE run.
        const folded = misfire && execs.some((l) => l.fireTime === f && l.item === item && l.status === 'skipped' && String(l.reason).includes('misfire recorded')) &&
          execs.some((l) => l.event === 'start' && l.item === item && l.source === 'MISFIRE' && l.fireTime > f);
        if (!folded) neverCompleted.push(k);
        continue;
      }
      const run = startOf.get(`${k}|${done[0].instanceId}|${done[0].source}`);
      const delay = (run?.at ?? done[0].at) - Math.max(killedAt, f);
      if (delay > 100) delaysMs.push(delay);
    }
  }
  const misfiresOf = new Map<number, number>();
  for (const l of execs) {
    if (l.event !== 'start' || l.source !== 'MISFIRE' || l.fireTime < first || l.fireTime > last) continue;
    misfireRuns += 1;
    misfiresOf.set(l.item, (misfiresOf.get(l.item) ?? 0) + 1);
  }
  const inFlightRestartMs = inFlight.map((s) => {
    const restart = (starts.get(key(s.fireTime, s.item)) ?? []).filter((r) => r.instanceId !== victim).sort((a, b) => a.at - b.at)[0];
    return restart ? restart.at - killedAt : Number.POSITIVE_INFINITY;
  });
  const counts = [...completions].filter(([, list]) => list.length > 1).map(([k]) => k);
  const wrong = [...new Set([...neverStarted, ...neverCompleted, ...counts])];
  const stories = wrong.slice(0, 6).map((k) => {
    const [fireTime, item] = k.split('|').map(Number);
    const lines = cluster.lines.filter((l) => l.fireTime === fireTime && (l.item === item || l.kind === 'fire'));
    return `${k} (kill at ${fireTime - killedAt >= 0 ? '-' : '+'}${Math.abs(fireTime - killedAt)} ms from the fire): ${lines.map(({ pid: _p, job: _j, fireTime: _f, ...rest }) => JSON.stringify({ ...rest, at: typeof rest.at === 'number' ? rest.at - killedAt : undefined })).join(' ')}`;
  });
  return {
    victim,
    killedAt,
    fires,
    neverStarted,
    neverCompleted,
    doubled: counts,
    overlaps: cluster.overlaps(JOB).length,
    delaysMs,
    maxDelayMs: Math.max(0, ...delaysMs),
    inFlightRestartMs,
    misfireRuns,
    misfireRunsPerItem: Math.max(0, ...misfiresOf.values()),
    joinMs,
    stories,
  };
}
