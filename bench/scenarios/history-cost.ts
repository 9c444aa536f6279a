/**
 * Scenario 9, history cost: what the recent list in Redis costs the no-op throughput. The same
 * workload as the throughput scenario (100 jobs x N items, one fire, 2 worker processes,
 * monitorExecution off) on two shardcron clusters side by side, one with the list and one without
 * (SHARDCRON_HISTORY_RECENT=0), and nothing else.
 *
 * Why a scenario of its own: the throughput scenario's medians of 7 rounds drift 10% between runs an
 * hour apart, twice the 5% being judged. Here the two clusters' rounds alternate strictly (with,
 * without, with, ...), each round seconds after the other cluster's, and the cost is the median of
 * the pairs' ratios rather than a ratio of two medians taken at different moments. Strictly, because
 * a cluster's round that came right after its own previous round was slower: in ABBA order (with,
 * without, without, with, ...) the pairs where the list's cluster ran twice in a row had a median
 * ratio of 0.87 and the others 1.0 (20 pairs, 100 jobs x 200 items), most likely the garbage the
 * previous round left in the same processes, which an idle pause lets V8 collect.
 */
import type { BenchContext } from '../lib/context';
import { startServices } from '../lib/services';
import { round } from '../lib/stats';
import { shardcronContender, JOBS, type Contender, type ShardcronSetup, type ThroughputRound } from './throughput';

/** One pair of rounds; "with" is cluster A (the list's, in history-cost) and "without" cluster B. */
export interface HistoryCostPair {
  /** items/s of the round with the list and of the round without it. */
  withList: number;
  withoutList: number;
  /** withList / withoutList. */
  ratio: number;
  /** CPU per item of every process (workers, leader, Redis, ZooKeeper), µs, with and without. */
  cpuWith: number;
  cpuWithout: number;
  /** The same by process kind (workers, leader, redis, zookeeper), µs per item. */
  cpuPartsWith: ThroughputRound['cpuUsPerItem'];
  cpuPartsWithout: ThroughputRound['cpuUsPerItem'];
  /** The largest worker RSS at the round's end, MB, with and without. */
  rssWith?: number;
  rssWithout?: number;
}

/** The result; pairs are consecutive rounds (with, then without), every round right after the other cluster's. */
export interface HistoryCostResult extends PairedResult {
  jobs: number;
  itemsPerJob: number;
  workers: number;
}

/** Paired rounds of two clusters (A = "with", B = "without"). */
export interface PairedResult {
  pairs: HistoryCostPair[];
  /** Median of the pairs' ratios (A / B), and its quartiles. */
  ratio: { p25: number; median: number; p75: number };
  /** Medians of the pairs' summed CPU per item, µs, and of the workers' alone. */
  cpuPerItem: { with: number; without: number; workersWith: number; workersWithout: number };
  /** Medians of the largest worker RSS at a round's end, MB. */
  workerRssMb: { with: number; without: number };
}

const WORKERS = 2;

/** The q-quantile of `xs`, interpolated between the two nearest ranks (the median of an even count is the mean of the middle two). */
const quantile = (xs: readonly number[], q: number): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  const at = q * (sorted.length - 1);
  const lo = Math.floor(at);
  return round(sorted[lo] + (sorted[Math.min(lo + 1, sorted.length - 1)] - sorted[lo]) * (at - lo), 4);
};

const cpuSum = (r: ThroughputRound): number => Object.values(r.cpuUsPerItem).reduce((t: number, v) => t + (v ?? 0), 0);

/**
 * Runs `pairs` pairs of strictly alternating rounds of two shardcron clusters, A then B, on shared
 * services, after one unmeasured warm-up round each (the first fire after the workers joined reshards).
 */
export async function runPaired(ctx: BenchContext, a: ShardcronSetup, b: ShardcronSetup, pairs: number): Promise<PairedResult> {
  const services = await startServices(2_000);
  const contenders: Contender[] = [];
  try {
    const first = await shardcronContender(ctx, services, a);
    contenders.push(first);
    const second = await shardcronContender(ctx, services, b);
    contenders.push(second);
    await first.round();
    await second.round();
    const measured: HistoryCostPair[] = [];
    for (let k = 0; k < pairs; k += 1) {
      const w = await first.round();
      const wo = await second.round();
      const pair = { withList: w.perSecond, withoutList: wo.perSecond, ratio: round(w.perSecond / wo.perSecond, 4), cpuWith: cpuSum(w), cpuWithout: cpuSum(wo), cpuPartsWith: w.cpuUsPerItem, cpuPartsWithout: wo.cpuUsPerItem, rssWith: w.workerRssMb, rssWithout: wo.workerRssMb };
      measured.push(pair);
      ctx.log(`  pair ${k + 1}: A ${w.perSecond}/s, B ${wo.perSecond}/s, ratio ${pair.ratio}; CPU per item ${pair.cpuWith} vs ${pair.cpuWithout} µs ` +
        `(${JSON.stringify(w.cpuUsPerItem)} vs ${JSON.stringify(wo.cpuUsPerItem)})`);
    }
    const ratios = measured.map((p) => p.ratio);
    return {
      pairs: measured,
      ratio: { p25: quantile(ratios, 0.25), median: quantile(ratios, 0.5), p75: quantile(ratios, 0.75) },
      cpuPerItem: {
        with: quantile(measured.map((p) => p.cpuWith), 0.5),
        without: quantile(measured.map((p) => p.cpuWithout), 0.5),
        workersWith: quantile(measured.map((p) => p.cpuPartsWith.workers), 0.5),
        workersWithout: quantile(measured.map((p) => p.cpuPartsWithout.workers), 0.5),
      },
      workerRssMb: { with: quantile(measured.map((p) => p.rssWith ?? 0), 0.5), without: quantile(measured.map((p) => p.rssWithout ?? 0), 0.5) },
    };
  } finally {
    for (const c of contenders) await c.close();
    await services.close();
  }
}

/** Full: 20 pairs of 100 jobs x 200 items; quick: 6 pairs of 100 x 100. */
const pairsAndItems = (ctx: BenchContext) => (ctx.mode === 'quick' ? { pairs: 6, items: 100 } : { pairs: 20, items: 200 });

export async function runHistoryCost(ctx: BenchContext): Promise<HistoryCostResult> {
  const { pairs, items } = pairsAndItems(ctx);
  ctx.log(`history cost: ${WORKERS} worker processes, ${JOBS} x ${items} no-op items, ${pairs} pairs of alternating rounds (A: the recent list, B: none)`);
  const base = { workers: WORKERS, items, monitorExecution: false };
  const result = await runPaired(ctx, { ...base, history: true }, { ...base, history: false }, pairs);
  return { jobs: JOBS, itemsPerJob: items, workers: WORKERS, ...result };
}

/** A paired comparison of two configurations: what BENCH_AB_A and BENCH_AB_B say. */
export interface AbResult extends PairedResult {
  jobs: number;
  itemsPerJob: number;
  workers: number;
  monitorExecution: boolean;
  a: Record<string, string>;
  b: Record<string, string>;
  /** The builds' dist/ when not this checkout's (BENCH_AB_A_CODE, BENCH_AB_B_CODE). */
  codeA?: string;
  codeB?: string;
}

/** One of BENCH_AB_A / BENCH_AB_B: a JSON object of environment variables for that cluster's processes. */
function abEnv(name: string): Record<string, string> {
  const text = process.env[name] ?? '{}';
  const value: unknown = JSON.parse(text);
  if (typeof value !== 'object' || value === null || Array.isArray(value) || Object.values(value).some((v) => typeof v !== 'string')) {
    throw new Error(`${name} must be a JSON object of strings (environment variables), got ${text}`);
  }
  return value as Record<string, string>;
}

/**
 * Scenario `ab`: the history-cost pairing for any two configurations, e.g.
 * `BENCH_AB_A='{"SHARDCRON_CONSUMERS":"2"}' BENCH_AB_B='{}' npx tsx bench/run.ts --only ab`;
 * BENCH_AB_MONITOR=on measures with monitorExecution. BENCH_AB_A_CODE / BENCH_AB_B_CODE run that
 * side on another build's dist/ (two commits side by side: `git worktree add`, `npm run build`
 * there). For looking, not judged.
 */
export async function runAb(ctx: BenchContext): Promise<AbResult> {
  const { pairs, items } = pairsAndItems(ctx);
  const a = abEnv('BENCH_AB_A');
  const b = abEnv('BENCH_AB_B');
  const monitorExecution = process.env.BENCH_AB_MONITOR === 'on';
  const codeA = process.env.BENCH_AB_A_CODE || undefined;
  const codeB = process.env.BENCH_AB_B_CODE || undefined;
  const code = (dist: string | undefined) => (dist ? `, code ${dist}` : '');
  ctx.log(`ab: ${WORKERS} worker processes, ${JOBS} x ${items} no-op items, monitorExecution ${monitorExecution ? 'on' : 'off'}, ${pairs} pairs; A ${JSON.stringify(a)}${code(codeA)}, B ${JSON.stringify(b)}${code(codeB)}`);
  const base = { workers: WORKERS, items, monitorExecution };
  const result = await runPaired(ctx, { ...base, env: a, baseline: codeA }, { ...base, env: b, baseline: codeB }, pairs);
  return { jobs: JOBS, itemsPerJob: items, workers: WORKERS, monitorExecution, a, b, ...(codeA && { codeA }), ...(codeB && { codeB }), ...result };
}
