import type { ShardingContext } from '../../src/shared/config/job-definition';
import type { DataflowSpec } from '../../src/shared/config/job-type-specs';
import { hasCode, ErrorCodes } from '../../src/shared/errors';
import { dataflowExecutor, splitIntoChunks } from '../../src/worker/executors/dataflow-executor';
import { ExecutionFailure, type ExecutorEnvironment } from '../../src/worker/executors/job-executor';
import { noResharding, testContext } from '../helpers/sharding-context';

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);
const tick = () => new Promise((resolve) => setImmediate(resolve));

/** A record source that hands out `batches` one per fetch, then nothing; counts its fetches. */
function source(batches: number[][]) {
  const state = { fetches: 0 };
  const fetchData = async () => batches[state.fetches++] ?? [];
  return { state, fetchData };
}

/** The ExecutionFailure `run` must reject with. */
async function failureOf(run: Promise<unknown>): Promise<ExecutionFailure> {
  const err = await run.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ExecutionFailure);
  expect(hasCode(err, ErrorCodes.EXECUTION_FAILED)).toBe(true);
  return err as ExecutionFailure;
}

describe('splitIntoChunks', () => {
  it('splits into contiguous chunks in order, sizes differing by at most one, larger first', () => {
    expect(splitIntoChunks(range(0, 10), 3)).toEqual([[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]);
    expect(splitIntoChunks(range(0, 4), 2)).toEqual([[0, 1], [2, 3]]);
    expect(splitIntoChunks(range(0, 4), 1)).toEqual([[0, 1, 2, 3]]);
  });

  it('never makes an empty chunk: fewer records than chunks gives one record each', () => {
    expect(splitIntoChunks(range(0, 2), 5)).toEqual([[0], [1]]);
    expect(splitIntoChunks([], 4)).toEqual([[]]);
  });
});

describe('dataflowExecutor: one-shot', () => {
  it('fetches once and processes every record, reporting the count', async () => {
    const { state, fetchData } = source([range(0, 5), range(5, 9)]);
    const seen: number[] = [];
    const spec: DataflowSpec<number> = { fetchData, processData: (_ctx, items) => void seen.push(...items) };
    await expect(dataflowExecutor.run(spec, testContext(), noResharding)).resolves.toEqual({ processed: 5, failed: 0 });
    expect(state.fetches).toBe(1);
    expect(seen).toEqual(range(0, 5));
  });

  it('processes the chunks of a batch at once, each in fetch order', async () => {
    let running = 0;
    let peak = 0;
    const chunks: number[][] = [];
    const spec: DataflowSpec<number> = {
      fetchData: () => range(0, 7),
      processConcurrency: 3,
      async processData(_ctx, items) {
        running += 1;
        peak = Math.max(peak, running);
        await tick();
        chunks.push(items);
        running -= 1;
      },
    };
    await expect(dataflowExecutor.run(spec, testContext(), noResharding)).resolves.toEqual({ processed: 7, failed: 0 });
    expect(peak).toBe(3);
    expect(chunks.sort((a, b) => a[0]! - b[0]!)).toEqual([[0, 1, 2], [3, 4], [5, 6]]);
  });

  it('counts a throwing chunk\'s records as failed, finishes the other chunks, and fails with both counts', async () => {
    const done: number[] = [];
    const spec: DataflowSpec<number> = {
      fetchData: () => range(0, 10),
      processConcurrency: 3,
      async processData(_ctx, items) {
        await tick();
        if (items.includes(4)) throw new Error('record 4 is malformed');
        done.push(...items);
      },
    };
    const failure = await failureOf(dataflowExecutor.run(spec, testContext(), noResharding));
    expect(failure.report).toEqual({ processed: 7, failed: 3 });
    expect(failure.message).toBe('dataflow: 3 of 10 records failed; first error: record 4 is malformed');
    expect((failure.cause as Error).message).toBe('record 4 is malformed');
    expect(done.sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 7, 8, 9]);
  });

  it('completes with nothing processed when fetch returns nothing (empty, null or undefined)', async () => {
    for (const nothing of [[], null, undefined]) {
      const spec: DataflowSpec<number> = { fetchData: () => nothing, processData: () => { throw new Error('not called'); } };
      await expect(dataflowExecutor.run(spec, testContext(), noResharding)).resolves.toEqual({ processed: 0, failed: 0 });
    }
  });

  it('fails naming fetchData when it throws or returns something other than an array', async () => {
    const threw = await failureOf(dataflowExecutor.run({ fetchData: () => { throw new Error('db down'); }, processData: () => {} }, testContext(), noResharding));
    expect(threw.message).toBe('dataflow fetchData failed (0 records processed before): db down');
    expect(threw.report).toEqual({ processed: 0, failed: 0 });
    const notArray = await failureOf(dataflowExecutor.run({ fetchData: () => ({ rows: [1] }) as never, processData: () => {} }, testContext(), noResharding));
    expect(notArray.message).toContain('dataflow fetchData returned an object ([object Object]); expected an array of records');
  });
});

describe('dataflowExecutor: streaming', () => {
  it('fetches again until a fetch returns nothing', async () => {
    const { state, fetchData } = source([range(0, 3), range(3, 5), range(5, 9)]);
    const spec: DataflowSpec<number> = { fetchData, processData: () => {}, streaming: true, processConcurrency: 2 };
    await expect(dataflowExecutor.run(spec, testContext(), noResharding)).resolves.toEqual({ processed: 9, failed: 0 });
    expect(state.fetches).toBe(4);
  });

  it('stops fetching once resharding is pending for the job, after the batch in hand', async () => {
    const { state, fetchData } = source([range(0, 3), range(3, 6), range(6, 9), range(9, 12)]);
    let pending = false;
    const asked: string[] = [];
    const env: ExecutorEnvironment = { reshardingPending: (job) => (asked.push(job), pending) };
    const spec: DataflowSpec<number> = {
      fetchData,
      streaming: true,
      processData: (_ctx, items) => {
        if (items.includes(4)) pending = true;
      },
    };
    await expect(dataflowExecutor.run(spec, testContext(), env)).resolves.toEqual({ processed: 6, failed: 0 });
    expect(state.fetches).toBe(2);
    expect(asked).toEqual(['exec-test', 'exec-test']);
  });

  it('stops on abort before the next fetch and fails as aborted, with the counts so far', async () => {
    const controller = new AbortController();
    const ctx: ShardingContext = testContext({ signal: controller.signal });
    const { state, fetchData } = source([range(0, 3), range(3, 6), range(6, 9)]);
    const spec: DataflowSpec<number> = {
      fetchData,
      streaming: true,
      processData: (_ctx, items) => {
        if (items.includes(4)) controller.abort(new Error('session lost'));
      },
    };
    const failure = await failureOf(dataflowExecutor.run(spec, ctx, noResharding));
    expect(failure.message).toBe('dataflow (6 records processed) stopped: aborted (session lost)');
    expect(failure.report).toEqual({ processed: 6, failed: 0 });
    expect(failure.details.aborted).toBe(true);
    expect(state.fetches).toBe(2);
  });

  it('does not fetch at all when already aborted', async () => {
    const controller = new AbortController();
    controller.abort();
    const { state, fetchData } = source([range(0, 3)]);
    await failureOf(dataflowExecutor.run({ fetchData, processData: () => {}, streaming: true }, testContext({ signal: controller.signal }), noResharding));
    expect(state.fetches).toBe(0);
  });

  it('stops fetching after a batch with failed records (they would be fetched again and again)', async () => {
    const { state, fetchData } = source([range(0, 4), range(4, 8), range(8, 12)]);
    const spec: DataflowSpec<number> = {
      fetchData,
      streaming: true,
      processConcurrency: 2,
      processData: (_ctx, items) => {
        if (items.includes(6)) throw new Error('poison');
      },
    };
    const failure = await failureOf(dataflowExecutor.run(spec, testContext(), noResharding));
    expect(failure.report).toEqual({ processed: 6, failed: 2 });
    expect(state.fetches).toBe(2);
  });
});
