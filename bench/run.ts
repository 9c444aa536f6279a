/**
 * shardcron benchmarks: `tsx bench/run.ts --mode quick|full [--only latency,throughput,...]`.
 * Every scenario starts its own ZooKeeper and Redis; the BullMQ peers run on the same Redis in the
 * same run. Writes bench/results/<timestamp>.json and bench/results/latest.md, and prints the
 * markdown to stdout (progress goes to stderr). See docs/benchmarks.md.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BenchContext, BenchMode } from './lib/context';
import { evaluateTargets, renderMarkdown, type BenchResults } from './lib/report';
import { SHARDCRON_CODE, WORKER_NODE_ARGS } from './lib/procs';
import { machineInfo, startServices } from './lib/services';
import { runConsole } from './scenarios/console';
import { runFailover } from './scenarios/failover';
import { runFloor } from './scenarios/floor';
import { runAb, runHistoryCost } from './scenarios/history-cost';
import { runLatency } from './scenarios/latency';
import { runLeaderFailover } from './scenarios/leader-failover';
import { runRedisMemory } from './scenarios/redis-memory';
import { runScaleAll } from './scenarios/scale';
import { runThroughput } from './scenarios/throughput';

const SCENARIOS = ['floor', 'latency', 'throughput', 'failover', 'leader-failover', 'scale', 'console', 'redis-memory', 'history-cost', 'ab'] as const;
type Scenario = (typeof SCENARIOS)[number];

function parseArgs(argv: string[]): { mode: BenchMode; only: Scenario[] } {
  let mode: BenchMode = 'quick';
  // `ab` compares two configurations given by environment variables: only when named.
  let only: Scenario[] = SCENARIOS.filter((s) => s !== 'ab');
  for (let i = 0; i < argv.length; i += 1) {
    const [flag, inline] = argv[i].split('=', 2);
    const value = () => inline ?? argv[++i];
    if (flag === '--mode') {
      const m = value();
      if (m !== 'quick' && m !== 'full') throw new Error(`--mode must be quick or full, got ${m}`);
      mode = m;
    } else if (flag === '--only') {
      const names = value().split(',').map((s) => s.trim()).filter(Boolean);
      const bad = names.filter((n) => !(SCENARIOS as readonly string[]).includes(n));
      if (bad.length > 0) throw new Error(`--only: unknown scenario(s) ${bad.join(', ')}; known: ${SCENARIOS.join(', ')}`);
      only = names as Scenario[];
    } else if (flag === '--help' || flag === '-h') {
      process.stdout.write(`usage: tsx bench/run.ts [--mode quick|full] [--only ${SCENARIOS.join(',')}]\n`);
      process.exit(0);
    } else throw new Error(`unknown argument ${argv[i]} (try --help)`);
  }
  return { mode, only };
}

async function main(): Promise<void> {
  const { mode, only } = parseArgs(process.argv.slice(2));
  const started = Date.now();
  let counter = 0;
  const ctx: BenchContext = {
    mode,
    log: (message) => process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${message}\n`),
    unique: (prefix) => `${prefix}${started.toString(36)}${(counter++).toString(36)}`,
  };
  if (SHARDCRON_CODE === 'dist') {
    // The bench measures what bin/shardcron.js runs: the compiled dist/, built from this checkout.
    ctx.log('building dist/ (npm run build)');
    execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', path.join(__dirname, '..', 'tsconfig.build.json')], { stdio: 'inherit' });
  }
  const probe = await startServices(2_000);
  const machine = await machineInfo(probe).finally(() => probe.close());
  ctx.log(`mode ${mode}: ${only.join(', ')} on ${machine.cpus} CPUs, Node ${machine.node}, ZooKeeper ${machine.zookeeper}, Redis ${machine.redis}`);
  const results: BenchResults = { mode, machine, setup: { shardcronCode: SHARDCRON_CODE, workerNodeArgs: WORKER_NODE_ARGS }, startedAt: new Date(started).toISOString(), durationS: 0, scenarios: {}, runs: {}, targets: [] };
  const runners: Record<Scenario, () => Promise<void>> = {
    floor: async () => void (results.scenarios.floor = await runFloor(ctx)),
    latency: async () => void (results.scenarios.latency = await runLatency(ctx)),
    throughput: async () => void (results.scenarios.throughput = await runThroughput(ctx)),
    failover: async () => void (results.scenarios.failover = await runFailover(ctx)),
    'leader-failover': async () => void (results.scenarios.leaderFailover = await runLeaderFailover(ctx)),
    scale: async () => void (results.scenarios.scale = await runScaleAll(ctx)),
    console: async () => void (results.scenarios.console = await runConsole(ctx)),
    'redis-memory': async () => void (results.scenarios.redisMemory = await runRedisMemory(ctx)),
    'history-cost': async () => void (results.scenarios.historyCost = await runHistoryCost(ctx)),
    ab: async () => void (results.scenarios.ab = await runAb(ctx)),
  };
  const dir = path.join(__dirname, 'results');
  fs.mkdirSync(dir, { recursive: true });
  const stamp = new Date(started).toISOString().replace(/[:.]/g, '-');
  // Written after every scenario, so an interrupted run keeps what it measured.
  const save = (): string => {
    results.durationS = Math.round((Date.now() - started) / 1000);
    results.targets = evaluateTargets(results.scenarios);
    const markdown = renderMarkdown(results);
    fs.writeFileSync(path.join(dir, `${stamp}.json`), `${JSON.stringify(results, null, 2)}\n`);
    fs.writeFileSync(path.join(dir, 'latest.md'), markdown);
    return markdown;
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      ctx.log(`${signal}: saving what was measured so far`);
      save();
      process.exit(130);
    });
  }
  for (const name of only) {
    const t0 = Date.now();
    const loadBefore = os.loadavg()[0];
    let error: string | undefined;
    try {
      await runners[name]();
    } catch (err) {
      error = (err as Error).message;
      ctx.log(`${name} FAILED: ${(err as Error).stack ?? error}`);
    }
    results.runs[name] = { seconds: Math.round((Date.now() - t0) / 1000), loadBefore, loadAfter: os.loadavg()[0], ...(error ? { error } : {}) };
    save();
  }
  process.stdout.write(save());
  ctx.log(`wrote bench/results/${stamp}.json and bench/results/latest.md`);
  if (Object.values(results.runs).some((r) => r.error)) process.exitCode = 1;
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(2);
});
