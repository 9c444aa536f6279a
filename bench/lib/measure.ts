/** Steady-state measurement over a window of nominal fire times, shared by latency and scale. */
import { mergeReports, type BenchProcess, type NodeReport } from './procs';
import { sleep, summarize, type Summary } from './stats';

export interface WindowResult {
  /** Nominal fire times in [from, to). */
  from: number;
  to: number;
  seconds: number;
  /** Starts expected in the window (executions per fire x fires). */
  expected: number;
  /** Starts that had not happened when the measurement gave up waiting (backlog or loss). */
  missing: number;
  latency: Summary;
  /** Latency of the first start of each fire (the pipeline's own delay, without queueing behind the fire's other items). */
  firstStart: Summary;
  /**
   * The fires whose last start came latest, slowest first (at most 3): which second of the window
   * (0 = its first fire) and its first and last start, ms. Tells one slow fire from a steady tail.
   */
  slowestFires: Array<{ second: number; firstMs: number; lastMs: number }>;
  sources: Record<string, number>;
  report: NodeReport;
}

/** Waits until `at` (epoch ms). */
export async function sleepUntil(at: number): Promise<void> {
  const ms = at - Date.now();
  if (ms > 0) await sleep(ms);
}

/**
 * Measures every start whose nominal fire time falls in the next `seconds` whole seconds after a
 * warm-up of `warmupMs`, waiting up to `drainMs` after the window for late starts.
 */
export async function measureWindow(
  workers: readonly BenchProcess[],
  options: { seconds: number; perFire: number; warmupMs: number; drainMs: number; during?: (from: number, to: number) => Promise<void> },
): Promise<WindowResult> {
  const from = Math.ceil((Date.now() + options.warmupMs) / 1000) * 1000;
  const to = from + options.seconds * 1000;
  const expected = options.perFire * options.seconds;
  // Runs alongside the window (it may sleep until points inside it); awaited before returning.
  const during = options.during?.(from, to);
  await sleepUntil(to + 500);
  const deadline = Date.now() + options.drainMs;
  let report = mergeReports(await Promise.all(workers.map((w) => w.report(from, to))));
  while (report.lat.length < expected && Date.now() < deadline) {
    await sleep(500);
    report = mergeReports(await Promise.all(workers.map((w) => w.report(from, to))));
  }
  await during;
  return {
    from,
    to,
    seconds: options.seconds,
    expected,
    missing: Math.max(0, expected - report.lat.length),
    latency: summarize(report.lat),
    firstStart: summarize(report.firstByFire.map(([, v]) => v)),
    slowestFires: slowestFires(report, from),
    sources: report.sources,
    report: { ...report, lat: [], firstByFire: [], lastByFire: [], dispatchLag: [] },
  };
}

function slowestFires(report: NodeReport, from: number): WindowResult['slowestFires'] {
  const first = new Map(report.firstByFire);
  return [...report.lastByFire]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 3)
    .map(([fire, last]) => ({ second: Math.round((fire - from) / 1000), firstMs: first.get(fire) ?? last, lastMs: last }));
}
