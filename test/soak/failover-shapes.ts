/**
 * Issue 22's 3-node failover shapes, repeated on demand with their figures:
 * `npm run failover-shapes -- --runs 10` (every shape), `--shape non-leader/misfire-off` (one).
 * Each run kills -9 one of three processes with both roles while it runs items, and checks every
 * fire from the kill on: never started, never completed, completed twice, concurrent runs, and how
 * late the kill made each item (bound: session timeout + one ZooKeeper tick + 1 s).
 */
import { RedisServer } from '../../src/dev/redis-server';
import { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { FAILOVER_BOUND_MS, runFailoverShape, SHAPE_TICK_MS, type ShapeResult } from '../helpers/failover-shape';

const args = new Map(process.argv.slice(2).map((a, i, all) => [a, all[i + 1]] as const).filter(([a]) => a.startsWith('--')));
const runs = Number(args.get('--runs') ?? 10);
const only = args.get('--shape');
if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be a positive integer, got ${String(args.get('--runs'))}`);

const SHAPES = [
  { name: 'non-leader/misfire-off', victim: 'non-leader', misfire: false },
  { name: 'leader/misfire-off', victim: 'leader', misfire: false },
  { name: 'non-leader/misfire-on', victim: 'non-leader', misfire: true },
  { name: 'leader/misfire-on', victim: 'leader', misfire: true },
] as const;

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? 0 : sorted[Math.floor((sorted.length - 1) / 2)];
};
const range = (values: number[]) => (values.length === 0 ? '-' : `${Math.min(...values)}..${Math.max(...values)} (median ${median(values)})`);

function violations(r: ShapeResult): string[] {
  const out: string[] = [];
  if (r.neverStarted.length > 0) out.push(`never started: ${r.neverStarted.join(' ')}`);
  if (r.neverCompleted.length > 0) out.push(`never completed: ${r.neverCompleted.join(' ')}`);
  if (r.doubled.length > 0) out.push(`completed twice: ${r.doubled.join(' ')}`);
  if (r.overlaps > 0) out.push(`${r.overlaps} concurrent runs`);
  if (r.maxDelayMs > FAILOVER_BOUND_MS) out.push(`an item ran ${r.maxDelayMs} ms late (bound ${FAILOVER_BOUND_MS} ms)`);
  return out;
}

async function main(): Promise<void> {
  const [zk, redis] = await Promise.all([ZooKeeperServer.start({ tickTimeMs: SHAPE_TICK_MS }), RedisServer.start()]);
  let failed = 0;
  try {
    for (const shape of SHAPES.filter((s) => !only || s.name === only)) {
      const results: ShapeResult[] = [];
      for (let i = 1; i <= runs; i += 1) {
        const r = await runFailoverShape({ zk: zk.connectionString, redisUrl: redis.url, victim: shape.victim, misfire: shape.misfire });
        results.push(r);
        const bad = violations(r);
        failed += bad.length > 0 ? 1 : 0;
        process.stdout.write(
          `${shape.name} run ${i}/${runs}: killed ${r.victim}; in-flight restarts ${r.inFlightRestartMs.join(',')} ms; ` +
            `max lateness ${r.maxDelayMs} ms; ${r.fires.length} fires checked; misfire runs ${r.misfireRuns}; joined after ${Object.values(r.joinMs).join(',')} ms` +
            `${bad.length > 0 ? `\n  FAILED: ${bad.join('; ')}\n  ${r.stories.join('\n  ')}` : ''}\n`,
        );
      }
      process.stdout.write(
        `${shape.name}: ${results.filter((r) => violations(r).length === 0).length}/${runs} clean; ` +
          `in-flight restart ${range(results.flatMap((r) => r.inFlightRestartMs))} ms; max lateness per run ${range(results.map((r) => r.maxDelayMs))} ms; ` +
          `lost ${results.reduce((n, r) => n + r.neverStarted.length, 0)}, not completed ${results.reduce((n, r) => n + r.neverCompleted.length, 0)}, ` +
          `doubled ${results.reduce((n, r) => n + r.doubled.length, 0)}, concurrent ${results.reduce((n, r) => n + r.overlaps, 0)}; ` +
          `join ${range(results.flatMap((r) => Object.values(r.joinMs)))} ms\n\n`,
      );
    }
  } finally {
    await Promise.allSettled([zk.close(), redis.close()]);
  }
  if (failed > 0) {
    process.stdout.write(`FAILED: ${failed} run(s) broke the failover rule\n`);
    process.exitCode = 1;
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
