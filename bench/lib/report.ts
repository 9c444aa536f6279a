/** Targets (met / missed and by how much) and the markdown tables of a bench run. */
import type { ConsoleBenchResult } from '../scenarios/console';
import type { FailoverResult } from '../scenarios/failover';
import type { FloorResult } from '../scenarios/floor';
import type { AbResult, HistoryCostResult, PairedResult } from '../scenarios/history-cost';
import type { LatencyCaseResult } from '../scenarios/latency';
import type { LeaderFailoverRun } from '../scenarios/leader-failover';
import type { ScaleResult } from '../scenarios/scale';
import type { RedisMemoryRun } from '../scenarios/redis-memory';
import type { ThroughputResult } from '../scenarios/throughput';
import type { MachineInfo } from './services';
import type { WindowResult } from './measure';
import { fmt, round, triple } from './stats';

export interface BenchResults {
  mode: string;
  machine: MachineInfo;
  /** How the processes ran: shardcron's code (dist/ or src/ through tsx) and the worker processes' Node flags. */
  setup?: { shardcronCode: 'dist' | 'src'; workerNodeArgs: readonly string[] };
  startedAt: string;
  durationS: number;
  scenarios: {
    floor?: FloorResult;
    latency?: LatencyCaseResult[];
    throughput?: ThroughputResult;
    failover?: FailoverResult;
    leaderFailover?: LeaderFailoverRun[];
    scale?: ScaleResult[];
    console?: ConsoleBenchResult;
    redisMemory?: RedisMemoryRun[];
    historyCost?: HistoryCostResult;
    ab?: AbResult;
  };
  /** Per scenario: wall time and the machine's 1-minute load average before and after (the box may be shared). */
  runs: Record<string, { seconds: number; loadBefore: number; loadAfter: number; error?: string }>;
  targets: Target[];
}

export interface Target {
  name: string;
  bound: string;
  measured: string;
  met: boolean | undefined;
  /** How far from the bound: "+12.3 ms (2.1x the bound)" or "within, 40% headroom". */
  margin: string;
}

function check(name: string, value: number | undefined, bound: number | undefined, unit: string, boundText?: string, lowerIsBetter = true): Target {
  if (value === undefined || bound === undefined || !Number.isFinite(value) || !Number.isFinite(bound)) {
    return { name, bound: boundText ?? (bound === undefined ? 'n/a' : `${fmt(bound)} ${unit}`), measured: value === undefined ? 'not measured' : `${fmt(value)} ${unit}`, met: undefined, margin: 'n/a' };
  }
  const met = lowerIsBetter ? value <= bound : value >= bound;
  const ratio = bound === 0 ? Number.POSITIVE_INFINITY : value / bound;
  const diff = Math.abs(value - bound);
  const margin = met
    ? `met with ${fmt(diff)} ${unit} to spare`
    : `missed by ${fmt(diff)} ${unit} (${fmt(lowerIsBetter ? ratio : 1 / ratio, 2)}x the bound)`;
  return { name, bound: boundText ?? `${lowerIsBetter ? '<=' : '>='} ${fmt(bound)} ${unit}`, measured: `${fmt(value)} ${unit}`, met, margin };
}

export function evaluateTargets(s: BenchResults['scenarios']): Target[] {
  const out: Target[] = [];
  const light = s.latency?.find((c) => c.name === 'light: 10 jobs x 10 items');
  const lightRaw = light?.raw?.latency.p99;
  out.push(check('Light load (10 jobs x 10 items) fire-to-start p99', light?.shardcron.latency.p99, 10, 'ms',
    lightRaw === undefined ? undefined : `<= 10 ms (raw BullMQ, the same 100 jobs added at once each second: p99 ${fmt(lightRaw)} ms)`));
  const burst = s.latency?.find((c) => c.name === 'burst: 1,000 jobs x 1 item');
  const raw1 = s.throughput?.runs.find((r) => r.system === 'bullmq' && r.workers === 1)?.perSecond;
  const burstBound = raw1 ? 1.5 * ((1000 * 1000) / raw1) + 10 : undefined;
  out.push(check('Burst (1,000 jobs same second) p99 vs raw BullMQ drain time', burst?.shardcron.latency.p99, burstBound, 'ms',
    burstBound ? `<= 1.5 x 1000/${fmt(raw1)} s + 10 ms = ${fmt(burstBound)} ms` : undefined));
  const peerP99 = burst?.bullmq?.latency.p99;
  out.push(check('Burst p99 >= 3x better than BullMQ Job Schedulers', burst?.shardcron.latency.p99, peerP99 === undefined ? undefined : peerP99 / 3, 'ms',
    peerP99 === undefined ? undefined : `<= ${fmt(peerP99)} / 3 = ${fmt(peerP99 / 3)} ms`));
  for (const workers of [1, 2, 4]) {
    const raw = s.throughput?.runs.find((r) => r.system === 'bullmq' && r.workers === workers)?.perSecond;
    const ours = s.throughput?.runs.find((r) => r.system === 'shardcron' && r.workers === workers && r.monitorExecution === false && r.history !== false && !r.baseline)?.perSecond;
    out.push(check(`No-op throughput, ${workers} worker process(es), monitorExecution off`, ours, raw === undefined ? undefined : 0.8 * raw, 'items/s',
      raw === undefined ? undefined : `>= 80% of raw BullMQ ${fmt(raw)} = ${fmt(0.8 * raw)} items/s`, false));
  }
  // The default (monitorExecution on) pays for the item lock in ZooKeeper: reported against the same bound.
  for (const workers of [1, 2, 4]) {
    const raw = s.throughput?.runs.find((r) => r.system === 'bullmq' && r.workers === workers)?.perSecond;
    const ours = s.throughput?.runs.find((r) => r.system === 'shardcron' && r.workers === workers && r.monitorExecution === true && !r.baseline)?.perSecond;
    out.push(check(`No-op throughput, ${workers} worker process(es), monitorExecution on (default)`, ours, raw === undefined ? undefined : 0.8 * raw, 'items/s',
      raw === undefined ? undefined : `>= 80% of raw BullMQ ${fmt(raw)} = ${fmt(0.8 * raw)} items/s`, false));
  }
  // The recent list in Redis, written in batches off the execution path, costs under 5%: judged on the
  // history-cost scenario's paired rounds when it ran (the throughput scenario's two medians come from
  // different moments of a machine whose speed drifts by more than 5%), else on the throughput scenario.
  const withoutHistory = s.throughput?.runs.find((r) => r.system === 'shardcron' && r.workers === 2 && r.history === false)?.perSecond;
  const hc = s.historyCost;
  if (hc) {
    out.push(check('No-op throughput with the recent list in Redis vs without (2 workers, monitorExecution off; median of paired rounds)', hc.ratio.median, 0.95, '',
      `>= 0.95 (${hc.pairs.length} pairs of alternating rounds; quartiles ${fmt(hc.ratio.p25)} / ${fmt(hc.ratio.p75)})`, false));
  } else {
    const withHistory = s.throughput?.runs.find((r) => r.system === 'shardcron' && r.workers === 2 && r.monitorExecution === false && r.history !== false && !r.baseline)?.perSecond;
    out.push(check('No-op throughput with the recent list in Redis vs without (2 workers, monitorExecution off)', withHistory, withoutHistory === undefined ? undefined : 0.95 * withoutHistory, 'items/s',
      withoutHistory === undefined ? undefined : `>= 95% of ${fmt(withoutHistory)} = ${fmt(0.95 * withoutHistory)} items/s`, false));
  }
  // BENCH_BASELINE_CODE: this build without its recent list against an earlier build (e.g. before the executor seam).
  const baseline = s.throughput?.runs.find((r) => r.system === 'shardcron' && r.workers === 2 && r.baseline);
  if (baseline) {
    out.push(check(`No-op throughput without the recent list vs the baseline build ${baseline.baseline} (2 workers, monitorExecution off)`, withoutHistory, 0.95 * baseline.perSecond, 'items/s',
      `>= 95% of ${fmt(baseline.perSecond)} = ${fmt(0.95 * baseline.perSecond)} items/s`, false));
  }
  for (const run of s.failover?.shardcron ?? []) {
    out.push(check(`Worker failover, session timeout ${run.sessionTimeoutMs / 1000} s (slowest item)`, run.maxMs, run.sessionTimeoutMs + 1000, 'ms'));
  }
  for (const run of s.failover?.shapes ?? []) {
    const who = run.leaderDies ? 'the leader dies with it' : 'the leader survives';
    out.push(check(`3-node failover, ${who} (latest item; session 2 s + tick 0.5 s + 1 s)`, run.maxLatenessMs, 3_500, 'ms'));
    out.push(check(`3-node failover, ${who}: items never started`, run.lost, 0, ''));
  }
  const scale = s.scale?.[s.scale.length - 1];
  const scaleName = scale ? `${scale.jobs.toLocaleString('en-US')} jobs` : 'scale';
  out.push(check(`${scaleName}: leader RSS (max over the window)`, scale?.leaderRssMb.max, 300, 'MB'));
  out.push(check(`${scaleName}: ZooKeeper writes per job per fire`, scale?.zkWritesPerJobPerFire, 1, 'writes'));
  const offRounds = (s.throughput?.runs ?? []).filter((r) => r.system === 'shardcron' && r.monitorExecution === false && r.history !== false && !r.baseline).flatMap((r) => r.rounds);
  const perItem = offRounds.length && s.throughput
    ? Math.max(...offRounds.map((r) => ((r.zkWriteOps ?? 0) - s.throughput!.jobs) / r.items))
    : undefined;
  out.push(check('monitorExecution off: ZooKeeper writes per item (beyond one ledger per job)', perItem, 0, 'writes/item',
    `0 (${s.throughput?.jobs ?? 100} jobs x ${s.throughput?.itemsPerJob ?? 100} items per fire)`));
  const c = s.console;
  out.push(check('Console GET /api/jobs, 1,000 jobs, while firing: p99', c?.listJobs.p99, 20, 'ms'));
  out.push(check('Console GET /api/jobs/:name, 1,000 jobs, while firing: p99', c?.getJob.p99, 20, 'ms'));
  // A notification reaches the two consoles' sessions a moment apart: a read or two either side of the
  // window's ends is that, not the requests (one read per request would be thousands). Judged to 2 decimals.
  out.push(check('Console: ZooKeeper reads per request (measured console minus an idle control)', c === undefined ? undefined : round(c.zkReads.perRequest, 2), 0, 'reads',
    c ? `0 to 2 decimals (${fmt(c.zkReads.measured)} reads against the control's ${fmt(c.zkReads.control)} over ${fmt(2 * c.listJobs.n)} requests)` : undefined));
  const memory = s.redisMemory?.find((m) => m.code === 'this build');
  out.push(check(`Redis RSS after ${memory?.minutes ?? 15} min at 400 items/s (200 jobs x 2 items every second, history on)`, memory?.end.rssMb, 60, 'MB'));
  return out;
}

const row = (cells: unknown[]) => `| ${cells.map((c) => String(c)).join(' | ')} |`;
const table = (head: string[], rows: unknown[][]) => [row(head), row(head.map(() => '---')), ...rows.map(row)].join('\n');
const pair = (x: { p50: number; p99: number; n: number } | undefined) => (x && x.n > 0 ? `${fmt(x.p50)} / ${fmt(x.p99)} ms` : 'n/a');
const mark = (met: boolean | undefined) => (met === undefined ? 'n/a' : met ? 'met' : '**missed**');

/** The line that sums up paired rounds (history-cost, ab): the ratio's median and quartiles, the CPU per item of each side. */
function pairedSummary(p: PairedResult, a: string, b: string): string {
  return `Ratio of items/s (${a} / ${b}), median of ${p.pairs.length} pairs: ${fmt(p.ratio.median, 4)} (quartiles ${fmt(p.ratio.p25, 4)} / ${fmt(p.ratio.p75, 4)}). ` +
    `CPU per item of every process, median: ${fmt(p.cpuPerItem.with)} µs ${a}, ${fmt(p.cpuPerItem.without)} µs ${b} (workers alone: ${fmt(p.cpuPerItem.workersWith)} / ${fmt(p.cpuPerItem.workersWithout)} µs).` +
    (p.workerRssMb ? ` Largest worker RSS at a round's end, median: ${fmt(p.workerRssMb.with)} MB ${a}, ${fmt(p.workerRssMb.without)} MB ${b}.` : '');
}

export function renderMarkdown(r: BenchResults): string {
  const m = r.machine;
  const s = r.scenarios;
  const out: string[] = [
    `# shardcron benchmarks (${r.mode})`,
    '',
    `${m.date}: ${m.cpus} x ${m.cpuModel}, ${m.memGiB} GiB, ${m.os}; Node ${m.node}, ZooKeeper ${m.zookeeper}, Redis ${m.redis}, BullMQ ${m.bullmq}. Run took ${fmt(r.durationS)} s.`,
    '',
    `Code: commit ${m.git?.commit ?? 'unknown'}${m.git?.dirtySrc.length ? ` plus uncommitted changes in ${m.git.dirtySrc.join(', ')}` : ''}.`,
    ...(r.setup
      ? ['', `shardcron ran from ${r.setup.shardcronCode === 'dist' ? 'dist/ (compiled by tsc, as bin/shardcron.js runs it)' : 'src/ through tsx'}; worker processes of both systems ran with ${r.setup.workerNodeArgs.length ? r.setup.workerNodeArgs.map((a) => `\`${a}\``).join(' ') : "Node's default flags"}.`]
      : []),
    '',
    '## Targets',
    '',
    table(['target', 'bound', 'measured', 'result', 'margin'], r.targets.map((t) => [t.name, t.bound, t.measured, mark(t.met), t.margin])),
  ];
  if (s.latency) {
    out.push('', '## 1. Fire-to-start latency (handler start - nominal fire time; p50 / p99 / max)', '');
    const rows: unknown[][] = [];
    for (const c of s.latency) {
      rows.push([c.name, 'shardcron', c.shardcron.latency.n, triple(c.shardcron.latency), triple(c.shardcron.firstStart), c.shardcron.missing, triple(c.shardcron.dispatchLag)]);
      if (c.bullmq) rows.push([c.name, `BullMQ Job Schedulers (${c.jobs * c.items})`, c.bullmq.latency.n, triple(c.bullmq.latency), triple(c.bullmq.firstStart), c.bullmq.missing, '']);
      if (c.raw) rows.push([c.name, `raw BullMQ (addBulk of ${c.jobs * c.items} each second)`, c.raw.latency.n, triple(c.raw.latency), triple(c.raw.firstStart), c.raw.missing, '']);
    }
    out.push(table(['case', 'system', 'starts', 'latency (all starts)', 'first start of each fire', 'missing', 'leader dispatch lag'], rows));
    out.push('', 'Where the time goes (cumulative from the nominal fire time, p50 / p99; from the BullMQ jobs\' `timestamp` and `processedOn`):', '');
    const stageRows: unknown[][] = [];
    for (const c of s.latency) {
      const sc = c.shardcron.stages;
      stageRows.push([c.name, 'shardcron', pair(sc?.enqueueBegins), pair(sc?.pickedUp), pair(c.shardcron.latency)]);
      if (c.bullmq) stageRows.push([c.name, 'BullMQ Job Schedulers', 'n/a (created a second earlier)', pair(c.bullmq.stages?.pickedUp), pair(c.bullmq.latency)]);
      if (c.raw) stageRows.push([c.name, 'raw BullMQ (addBulk each second)', 'at the second (timer)', pair(c.raw.stages?.pickedUp), pair(c.raw.latency)]);
    }
    out.push(table(['case', 'system', 'leader begins the enqueue', 'worker picks the job up', 'handler starts'], stageRows));
    out.push('', 'Slowest fires of each window (second of the window, 0 = first: first / last start; one slow fire and a steady tail look alike in a p99):', '');
    const slowRows: unknown[][] = [];
    // Reports written before the table existed have no `slowestFires`.
    const slowest = (w: Partial<Pick<WindowResult, 'slowestFires'>> | undefined) =>
      (w?.slowestFires ?? []).map((f) => `#${f.second}: ${fmt(f.firstMs)} / ${fmt(f.lastMs)} ms`).join('; ') || 'n/a';
    for (const c of s.latency) {
      slowRows.push([c.name, 'shardcron', slowest(c.shardcron)]);
      if (c.bullmq) slowRows.push([c.name, 'BullMQ Job Schedulers', slowest(c.bullmq)]);
      if (c.raw) slowRows.push([c.name, 'raw BullMQ', slowest(c.raw)]);
    }
    out.push(table(['case', 'system', 'slowest fires'], slowRows));
  }
  if (s.throughput) {
    const t = s.throughput;
    out.push('', `## 2. Throughput (${t.jobs} jobs x ${t.itemsPerJob} items, one fire; first start to last finish; median of rounds)`, '');
    const rows = [1, 2, 4].map((w) => {
      const raw = t.runs.find((x) => x.system === 'bullmq' && x.workers === w);
      const off = t.runs.find((x) => x.system === 'shardcron' && x.workers === w && !x.monitorExecution && x.history !== false && !x.baseline);
      const on = t.runs.find((x) => x.system === 'shardcron' && x.workers === w && x.monitorExecution);
      const ratio = (x: typeof off) => (x && raw ? `${fmt((100 * x.perSecond) / raw.perSecond)}%` : 'n/a');
      return [w, fmt(raw?.perSecond), fmt(off?.perSecond), ratio(off), on ? fmt(on.perSecond) : 'not run', on ? ratio(on) : '',
        off?.rounds[0]?.zkWriteOps ?? 'n/a', off ? `+${fmt(off.warmup.firstStartMs)} ms (${fmt(off.warmup.zkWriteOps)} ZK writes)` : 'n/a'];
    });
    out.push(table(['workers', 'raw BullMQ items/s', 'shardcron items/s (monitorExecution off)', 'ratio', 'shardcron items/s (on, default)', 'ratio',
      'ZK writes per fire (off)', 'first fire after the workers joined (reshard): first start'], rows));
    out.push('', 'CPU time per item, median round (µs; utime + stime of the processes; the BullMQ producer is the bench runner itself, an upper bound):', '');
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const system = (x: (typeof t.runs)[number]) => (x.system === 'bullmq' ? 'raw BullMQ' : `shardcron, monitorExecution ${x.monitorExecution ? 'on' : 'off'}${x.history === false ? ', no recent list' : ''}${x.baseline ? `, baseline build ${x.baseline}` : ''}`);
    const cpuRow = (x: (typeof t.runs)[number]) => {
      const m = (k: 'workers' | 'leader' | 'redis' | 'zookeeper') => {
        const v = x.rounds.map((r) => r.cpuUsPerItem?.[k]).filter((n): n is number => n !== undefined);
        return v.length ? fmt(med(v)) : 'n/a';
      };
      const rss = x.rounds.map((r) => r.workerRssMb).filter((n): n is number => n !== undefined);
      return [x.workers, system(x), m('workers'), m('leader'), m('redis'), m('zookeeper'), rss.length ? fmt(Math.max(...rss)) : 'n/a'];
    };
    out.push(table(['workers', 'system', 'worker processes', 'leader (BullMQ: producer)', 'Redis', 'ZooKeeper', 'largest worker RSS at a round\'s end (MB)'], t.runs.map(cpuRow)));
    const callRows = t.runs.flatMap((x) => {
      const rounds = x.rounds.filter((r) => r.redisCallsPerItem);
      if (rounds.length === 0) return [];
      const mid = [...rounds].sort((a, b) => a.redisCallsPerItem!.total - b.redisCallsPerItem!.total)[Math.floor(rounds.length / 2)].redisCallsPerItem!;
      return [[x.workers, system(x), mid.total, Object.entries(mid.top).map(([name, n]) => `${name} ${n}`).join(', ')]];
    });
    if (callRows.length > 0) {
      out.push('', 'Redis commands per item, median round (INFO commandstats; every client of the round\'s Redis, the leader or producer included):', '');
      out.push(table(['workers', 'system', 'commands per item', 'busiest commands (per item)'], callRows));
    }
  }
  if (s.failover) {
    out.push('', '## 3. Worker failover (kill -9 a worker running items; FAILOVER start - kill time)', '');
    out.push(table(['session timeout', 'items', 'restarted after (ms)', 'slowest', 'leader re-dispatched at'],
      s.failover.shardcron.map((f) => [`${f.sessionTimeoutMs / 1000} s`, f.items.join(', '), f.restartMs.map((x) => fmt(x)).join(', '), `${fmt(f.maxMs)} ms`, `${fmt(f.movedMs)} ms`])));
    out.push('', `BullMQ stalled-job recovery, default settings (kill -9 the worker running a job; other worker starts it): ${s.failover.bullmq.map((b) => `${fmt(b.recoveryMs)} ms`).join(', ')}.`);
    if (s.failover.shapes?.length) {
      out.push('', 'Three processes with both roles, ZooKeeper tick 500 ms, session 2 s, 9 items every second (400 ms each), misfire off; kill -9 100 ms after a fire:', '');
      out.push(table(['killed', 'in-flight items restarted after', 'latest item late by', 'never started (5 s after the kill)'],
        s.failover.shapes.map((r) => [r.leaderDies ? 'the leader' : 'not the leader', `${r.inFlightMs.map((x) => fmt(x)).join(', ')} ms`, `${fmt(r.maxLatenessMs)} ms`, String(r.lost)])));
    }
  }
  if (s.leaderFailover) {
    out.push('', '## 4. Leader failover (kill -9 the leader; 10 jobs x 2 items every second, misfire on)', '');
    out.push(table(['session timeout', 'standby elected', 'first dispatch (source)', 'fires missed per job', 'MISFIRE runs per job', 'missed fires run as NORMAL'],
      s.leaderFailover.map((l) => [`${l.sessionTimeoutMs / 1000} s`, `${fmt(l.electedMs)} ms`, `${fmt(l.firstDispatchMs)} ms (${l.firstDispatchSource})`, l.firesMissedPerJob, l.misfireRunsPerJob, l.normalRunsOfMissedFires])));
  }
  if (s.scale?.length) {
    const cs = s.scale;
    out.push('', `## 5. Scale (N jobs x 1 item every second, monitorExecution off, one leader, ${cs[0].workers} workers of concurrency ${cs[0].concurrency})`, '');
    const metric = (name: string, f: (c: ScaleResult) => string) => [name, ...cs.map(f)];
    out.push(table(['metric', ...cs.map((c) => `${c.jobs.toLocaleString('en-US')} jobs`)], [
      metric('worker registration (both workers, all jobs)', (c) => `${fmt(c.registrationMs)} ms`),
      metric('leader load (ready to elected, all job views)', (c) => `${fmt(c.leaderLoadMs)} ms`),
      metric('first fire after takeover, dispatch lag', (c) => `${fmt(c.firstFireDispatchMs)} ms`),
      metric('leader RSS start / max / end', (c) => `${fmt(c.leaderRssMb.start)} / ${fmt(c.leaderRssMb.max)} / ${fmt(c.leaderRssMb.end)} MB`),
      metric('leader live heap after full GC', (c) => `${fmt(c.leaderLiveHeapMb)} MB`),
      metric('leader at the RSS peak: V8 heap used / reserved (old space), outside V8', (c) => {
        const m = c.leaderMemoryMb?.peak;
        return m ? `${fmt(m.heapUsed)} / ${fmt(m.heapTotal)} (${fmt(m.old_space)}) MB, ${fmt(m.rss - m.heapTotal)} MB` : 'n/a';
      }),
      metric('leader CPU', (c) => `${fmt(c.leaderCpuPerSecond, 3)} s per s`),
      metric('job-fires dispatched per second', (c) => `${fmt(c.dispatchedPerSecond)} (needed ${fmt(c.jobs)})`),
      metric('ZooKeeper write ops per job per fire', (c) => fmt(c.zkWritesPerJobPerFire, 3)),
      metric('ZooKeeper transactions per job per fire', (c) => fmt(c.zkTxnsPerDispatchedJobFire, 4)),
      metric('ZooKeeper: znodes; data; RSS; heap in use', (c) => {
        const z = c.zookeeper;
        return z ? `${fmt(z.znodes)}; ${fmt(z.dataMb)} MB; ${fmt(z.rssMb)} MB; ${z.heapUsedMb === undefined ? 'n/a' : `${fmt(z.heapUsedMb)} MB`}` : 'n/a';
      }),
      metric('leader begins the enqueue (fire planned and ledgered ahead) p50 / p99', (c) => pair(c.stages?.enqueueBegins)),
      metric('leader dispatch lag (enqueue done) p50 / p99 / max', (c) => triple(c.dispatchLag)),
      metric('worker picks the request up p50 / p99', (c) => pair(c.stages?.pickedUp)),
      metric('fire-to-start latency p50 / p99 / max', (c) => triple(c.window.latency)),
      metric('starts missing after the drain', (c) => `${fmt(c.window.missing)} of ${fmt(c.window.expected)}`),
    ]));
  }
  if (s.floor) {
    const f = s.floor;
    out.push('', `## 6. Floor (${f.samples} sequential requests each; p50 / p99 / max)`, '');
    out.push(table(['operation', 'latency'], [
      ['ZooKeeper setData', triple(f.zkSetData)], ['ZooKeeper multi (1 setData)', triple(f.zkMulti1)],
      ['ZooKeeper fenced multi (check + setData)', triple(f.zkFencedMulti)], ['ZooKeeper getData', triple(f.zkGetData)], ['Redis PING', triple(f.redisPing)],
    ]));
    if (f.itemShapes) {
      out.push('', 'ZooKeeper work per item in bulk: 1,100 items in flight, each a lock transaction then a release transaction, merged per event-loop turn as a worker merges them (median of 3 passes; CPU per item of the ZooKeeper server and of the client process).', '');
      out.push(table(['transactions of one item', 'ops per item', 'items/s', 'ZooKeeper CPU per item', 'client CPU per item'],
        f.itemShapes.map((x) => [x.shape, fmt(x.opsPerItem), fmt(x.itemsPerSecond), `${fmt(x.zkServerUsPerItem)} µs`, `${fmt(x.clientUsPerItem)} µs`])));
    }
  }
  if (s.console) {
    const c = s.console;
    out.push('', `## 7. Console (${fmt(c.jobs)} jobs, ${c.firingJobs} of them x ${c.itemsPerFiringJob} items firing every second; requests one at a time; p50 / p99 / max)`, '');
    out.push(table(['figure', 'value'], [
      ['GET /api/jobs', `${triple(c.listJobs)} (${fmt(c.listJobs.n)} requests, ${fmt(c.listBytes / 1024)} KiB each)`],
      ['GET /api/jobs/:name', `${triple(c.getJob)} (${fmt(c.getJob.n)} requests over ${c.detailJobs} jobs)`],
      ['window; fires dispatched in it', `${fmt(c.windowS)} s; ${fmt(c.firesInWindow)}`],
      ['ZooKeeper reads in the window: measured console / idle control', `${fmt(c.zkReads.measured)} / ${fmt(c.zkReads.control)} (difference per request: ${c.zkReads.perRequest.toFixed(5)})`],
      ['ZooKeeper reads of the console\'s start; of the first GET /api/jobs/:name of each detail job', `${fmt(c.zkReads.start)}; ${fmt(c.zkReads.firstDetailReads)}`],
    ]));
  }
  if (s.redisMemory?.length) {
    out.push('', `## 8. Redis memory (1 scheduler, 2 workers, ${s.redisMemory[0].jobs} jobs x ${s.redisMemory[0].itemsPerJob} items every second, history on)`, '');
    out.push(table(['build', 'minutes', 'items/s', 'used / RSS at the end', 'recent lists (records)', 'completed requests kept', 'RSS every 30 s'],
      s.redisMemory.map((m) => [m.code, fmt(m.minutes), fmt(m.itemsPerSecond), `${fmt(m.end.usedMb)} / ${fmt(m.end.rssMb)} MB`, `${fmt(m.end.recentListsMb)} MB (${fmt(m.end.recentRecords)})`,
        fmt(m.end.completedKept), m.samples.map((x) => fmt(x.rssMb)).join(', ')])));
  }
  const hc = s.historyCost;
  if (hc) {
    out.push('', `## 9. History cost (${hc.workers} workers, ${hc.jobs} jobs x ${hc.itemsPerJob} items, monitorExecution off; with the recent list vs without, alternating rounds)`, '');
    out.push(pairedSummary(hc, 'with', 'without'), '');
    out.push(table(['pair', 'with (items/s)', 'without (items/s)', 'ratio', 'CPU per item with / without (µs)'],
      hc.pairs.map((p, i) => [i + 1, fmt(p.withList), fmt(p.withoutList), fmt(p.ratio, 4), `${fmt(p.cpuWith)} / ${fmt(p.cpuWithout)}`])));
  }
  const ab = s.ab;
  if (ab) {
    out.push('', `## 10. A/B (${ab.workers} workers, ${ab.jobs} jobs x ${ab.itemsPerJob} items, monitorExecution ${ab.monitorExecution ? 'on' : 'off'}; A ${JSON.stringify(ab.a)}, B ${JSON.stringify(ab.b)})`, '');
    out.push(pairedSummary(ab, 'A', 'B'));
  }
  out.push('', '## Runs', '', table(['scenario', 'seconds', 'load avg before / after', 'error'],
    Object.entries(r.runs).map(([k, v]) => [k, fmt(v.seconds), `${fmt(v.loadBefore, 2)} / ${fmt(v.loadAfter, 2)}`, v.error ?? ''])));
  return `${out.join('\n')}\n`;
}
