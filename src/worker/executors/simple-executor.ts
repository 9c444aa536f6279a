/**
 * SIMPLE jobs: the definition's `execute(ctx)` runs the item. Its resolved value is ignored and a
 * rejection is the run's failure, as is, so a handler's own error reaches the error handler unchanged.
 */
import type { ExecuteFunction, ShardingContext } from '../../shared/config/job-definition';
import type { JobExecutor } from './job-executor';

/** SIMPLE's part of a job definition. */
export interface SimpleSpec {
  /** Runs one sharding item. */
  readonly execute: ExecuteFunction;
}

/** Runs a SIMPLE job's item: `await spec.execute(ctx)`. */
export const simpleExecutor: JobExecutor<SimpleSpec> = Object.freeze({
  async run(spec: SimpleSpec, ctx: ShardingContext): Promise<void> {
    await spec.execute(ctx);
  },
});
