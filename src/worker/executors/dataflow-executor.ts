/**
 * DATAFLOW jobs: `fetchData(ctx)` returns records, `processData(ctx, records)` handles them.
 *
 * Decisions (ElasticJob 3's DataflowJobExecutor, with its 2.x record counts):
 * - One-shot (`streaming: false`): fetch once, process, done. Streaming: fetch again after each
 *   batch until a fetch returns nothing (empty, null or undefined), the job is flagged for
 *   resharding (checked after each batch, as ElasticJob's `isEligibleForJobRunning`), or `ctx.signal`
 *   aborts (checked before each fetch). A fetch or a process call in progress is awaited, never
 *   raced: the run ends once the user's code has, and that code stops early by honouring ctx.signal.
 * - `processConcurrency` splits a batch into that many contiguous chunks of near-equal size
 *   (ElasticJob 2.x: with two threads, the first half and the second half), processed at once.
 *   ElasticJob 3 hands the whole batch to one call; the split is ours, so records of one chunk
 *   stay in fetch order and one slow record holds back only its chunk.
 * - A chunk whose processData throws counts all its records as failed (ElasticJob 2.x counted a
 *   record failed when processData threw for it); the batch's other chunks still run to the end.
 *   A streaming run then stops fetching: the failed records were not marked done, so the next fetch
 *   would most likely return them again and loop on them until an abort. The next fire retries.
 * - The run fails (an {@link ExecutionFailure} carrying `{processed, failed}`) when any record failed,
 *   and completes with `{processed, failed: 0}` otherwise. A fetchData that throws or returns
 *   something other than an array fails the run with the counts so far.
 */
import type { ShardingContext } from '../../shared/config/job-definition';
import { DATAFLOW_DEFAULTS, type DataflowSpec } from '../../shared/config/job-type-specs';
import { ExecutionFailure, abortedFailure, type ExecutorEnvironment, type ExecutorReport, type JobExecutor } from './job-executor';

/** Records processed and failed so far, and the first error a chunk threw. */
export interface DataflowTally {
  processed: number;
  failed: number;
  firstError?: unknown;
}

/**
 * Splits `records` into `min(count, records.length)` contiguous chunks, in order, whose sizes
 * differ by at most one (the first ones are the larger).
 */
export function splitIntoChunks<T>(records: readonly T[], count: number): T[][] {
  const chunks = Math.max(1, Math.min(count, records.length));
  const size = Math.floor(records.length / chunks);
  const larger = records.length % chunks;
  const out: T[][] = [];
  let start = 0;
  for (let i = 0; i < chunks; i++) {
    const end = start + size + (i < larger ? 1 : 0);
    out.push(records.slice(start, end));
    start = end;
  }
  return out;
}

/**
 * Processes one fetched batch: its chunks at once, each with its own processData call. Adds each
 * chunk's records to `tally.processed` or, when the call threw, to `tally.failed`.
 */
export async function processBatch<T>(spec: DataflowSpec<T>, ctx: ShardingContext, records: readonly T[], tally: DataflowTally): Promise<void> {
  const chunks = splitIntoChunks(records, spec.processConcurrency ?? DATAFLOW_DEFAULTS.processConcurrency);
  const outcomes = await Promise.allSettled(chunks.map(async (chunk) => spec.processData(ctx, chunk)));
  outcomes.forEach((outcome, i) => {
    const count = chunks[i]!.length;
    if (outcome.status === 'fulfilled') {
      tally.processed += count;
      return;
    }
    tally.failed += count;
    if (!('firstError' in tally)) tally.firstError = outcome.reason;
    ctx.log.warn({ err: outcome.reason, records: count, chunk: i }, 'dataflow processData failed; its records count as failed');
  });
}

const counts = (tally: DataflowTally): ExecutorReport => ({ processed: tally.processed, failed: tally.failed });

const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

function describe(value: unknown): string {
  return value === null ? 'null' : typeof value === 'object' ? `an object (${Object.prototype.toString.call(value)})` : `a ${typeof value}`;
}

/** Calls fetchData; undefined when it returned nothing. Throws an ExecutionFailure when it threw or returned a non-array. */
async function fetchBatch<T>(spec: DataflowSpec<T>, ctx: ShardingContext, tally: DataflowTally): Promise<readonly T[] | undefined> {
  let records: unknown;
  try {
    records = await spec.fetchData(ctx);
  } catch (err) {
    throw new ExecutionFailure(`dataflow fetchData failed (${tally.processed} records processed before): ${messageOf(err)}`, counts(tally), {}, { cause: err });
  }
  if (records === null || records === undefined) return undefined;
  if (!Array.isArray(records)) {
    throw new ExecutionFailure(`dataflow fetchData returned ${describe(records)}; expected an array of records (empty, null or undefined for none)`, counts(tally));
  }
  return records.length === 0 ? undefined : (records as readonly T[]);
}

/** Runs a DATAFLOW job's item; see the module comment for the loop and the counts. */
export const dataflowExecutor: JobExecutor<DataflowSpec<unknown>> = Object.freeze({
  async run(spec: DataflowSpec<unknown>, ctx: ShardingContext, env: ExecutorEnvironment): Promise<ExecutorReport> {
    const streaming = spec.streaming ?? DATAFLOW_DEFAULTS.streaming;
    const tally: DataflowTally = { processed: 0, failed: 0 };
    for (;;) {
      if (ctx.signal.aborted) throw abortedFailure(`dataflow (${tally.processed} records processed)`, ctx.signal, counts(tally));
      const records = await fetchBatch(spec, ctx, tally);
      if (records === undefined) break;
      await processBatch(spec, ctx, records, tally);
      if (!streaming || tally.failed > 0 || env.reshardingPending(ctx.jobName)) break;
    }
    if (tally.failed > 0) {
      const total = tally.processed + tally.failed;
      throw new ExecutionFailure(`dataflow: ${tally.failed} of ${total} records failed; first error: ${messageOf(tally.firstError)}`, counts(tally), {}, { cause: tally.firstError });
    }
    return counts(tally);
  },
});
