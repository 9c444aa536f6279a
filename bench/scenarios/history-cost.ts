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
import { shardcronContender, JOBS, type Contender, type ThroughputRound } from './throughput';

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
}

/** The result; pairs are consecutive rounds (with, then without), every round right after the other cluster's. */
export interface HistoryCostResult {
  jobs: number;
  itemsPerJob: number;
  workers: number;
  pairs: HistoryCostPair[];
  /** Median of the pairs' ratios, and its quartiles. */
  ratio: { p25: number; median: number; p75: number };
  /** Medians of the pairs' summed CPU per item, µs, and of the workers' alone. */
  cpuPerItem: { with: number; without: number; workersWith: number; workersWithout: number };
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

export async function runHistoryCost(ctx: BenchContext): Promise<HistoryCostResult> {
  const quick = ctx.mode === 'quick';
  const pairs = quick ? 6 : 20;
  const items = quick ? 100 : 200;
  ctx.log(`history cost: ${WORKERS} worker processes, ${JOBS} x ${items} no-op items, ${pairs} pairs of alternating rounds after a warm-up each`);
  const services = await startServices(2_000);
  const contenders: Contender[] = [];
  try {
    const withList = await shardcronContender(ctx, services, { workers: WORKERS, items, monitorExecution: false, history: true });
    contenders.push(withList);
    const withoutList = await shardcronContender(ctx, services, { workers: WORKERS, items, monitorExecution: false, history: false });
    contenders.push(withoutList);
    // Warm-up: the first fire after the workers joined reshards; not measured.
    await withList.round();
    await withoutList.round();
    const measured: HistoryCostPair[] = [];
    const workerCpu: { with: number[]; without: number[] } = { with: [], without: [] };
    for (let k = 0; k < pairs; k += 1) {
      const w = await withList.round();
      const wo = await withoutList.round();
      workerCpu.with.push(w.cpuUsPerItem.workers);
      workerCpu.without.push(wo.cpuUsPerItem.workers);
      const pair = { withList: w.perSecond, withoutList: wo.perSecond, ratio: round(w.perSecond / wo.perSecond, 4), cpuWith: cpuSum(w), cpuWithout: cpuSum(wo), cpuPartsWith: w.cpuUsPerItem, cpuPartsWithout: wo.cpuUsPerItem };
      measured.push(pair);
      ctx.log(`  pair ${k + 1}: with ${w.perSecond}/s, without ${wo.perSecond}/s, ratio ${pair.ratio}; CPU per item ${pair.cpuWith} vs ${pair.cpuWithout} µs ` +
        `(${JSON.stringify(w.cpuUsPerItem)} vs ${JSON.stringify(wo.cpuUsPerItem)})`);
    }
    const ratios = measured.map((p) => p.ratio);
    return {
      jobs: JOBS,
      itemsPerJob: items,
      workers: WORKERS,
      pairs: measured,
      ratio: { p25: quantile(ratios, 0.25), median: quantile(ratios, 0.5), p75: quantile(ratios, 0.75) },
      cpuPerItem: {
        with: quantile(measured.map((p) => p.cpuWith), 0.5),
        without: quantile(measured.map((p) => p.cpuWithout), 0.5),
        workersWith: quantile(workerCpu.with, 0.5),
        workersWithout: quantile(workerCpu.without, 0.5),
      },
    };
  } finally {
    for (const c of contenders) await c.close();
    await services.close();
  }
}
