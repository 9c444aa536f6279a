/**
 * The job's code for one attempt: the executor of the job's type, handed that type's part of the
 * definition. The settings a stored config can change at run time (a SCRIPT's command, an HTTP
 * request, DATAFLOW's streaming and processConcurrency) come from `config`, the job's current
 * config; the functions (SIMPLE's execute, DATAFLOW's fetchData and processData) from the code.
 */
import type { JobConfig } from '../shared/config/job-config';
import type { ResolvedJobDefinition, ShardingContext } from '../shared/config/job-definition';
import { DATAFLOW_DEFAULTS, type HttpSpec } from '../shared/config/job-type-specs';
import { ErrorCodes, ShardcronError } from '../shared/errors';
import { executorForType } from './executors/executor-for-type';
import type { ExecutorEnvironment, ExecutorReport } from './executors/job-executor';

/** Runs one attempt of the item `ctx` names, by the job's type. */
export function runJobCode(definition: ResolvedJobDefinition, config: JobConfig, ctx: ShardingContext, env: ExecutorEnvironment): Promise<ExecutorReport | void> {
  switch (config.type) {
    case 'SIMPLE':
      return executorForType('SIMPLE').run({ execute: required(definition.execute, config, 'execute') }, ctx, env);
    case 'DATAFLOW':
      return executorForType('DATAFLOW').run(
        {
          fetchData: required(definition.fetchData, config, 'fetchData'),
          processData: required(definition.processData, config, 'processData'),
          streaming: config.streaming ?? DATAFLOW_DEFAULTS.streaming,
          processConcurrency: config.processConcurrency ?? DATAFLOW_DEFAULTS.processConcurrency,
        },
        ctx,
        env,
      );
    case 'SCRIPT':
      return executorForType('SCRIPT').run(required(config.script, config, 'script'), ctx, env);
    case 'HTTP':
      return executorForType('HTTP').run(required(config.http as HttpSpec | undefined, config, 'http'), ctx, env);
  }
}

/**
 * A field the job's type needs. Missing only when the stored config's type changed under code
 * written for another type (`jobs update` of a code-defined job): the run fails, naming the field.
 */
function required<T>(value: T | undefined, config: JobConfig, field: string): T {
  if (value === undefined) {
    throw new ShardcronError(ErrorCodes.INVALID_CONFIG, `job ${config.name} is ${config.type} but has no ${field}: its stored config's type does not match its code`, {
      job: config.name,
      field,
    });
  }
  return value;
}
