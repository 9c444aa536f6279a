/**
 * The executor of each job type: the item runner looks one up by the definition's `type` and hands
 * it that type's part of the definition (STYLE.md: one interface, one implementation per type).
 */
import type { JobType } from '../../shared/config/job-config';
import type { DataflowSpec, HttpSpec, ScriptSpec } from '../../shared/config/job-type-specs';
import { dataflowExecutor } from './dataflow-executor';
import { httpExecutor } from './http-executor';
import type { JobExecutor } from './job-executor';
import { scriptExecutor } from './script-executor';
import { simpleExecutor, type SimpleSpec } from './simple-executor';

/** The spec each job type's executor runs. */
export interface JobTypeSpecs {
  SIMPLE: SimpleSpec;
  DATAFLOW: DataflowSpec;
  SCRIPT: ScriptSpec;
  HTTP: HttpSpec;
}

const executors: { readonly [T in JobType]: JobExecutor<JobTypeSpecs[T]> } = Object.freeze({
  SIMPLE: simpleExecutor,
  DATAFLOW: dataflowExecutor,
  SCRIPT: scriptExecutor,
  HTTP: httpExecutor,
});

/** The executor of job type `type`. */
export function executorForType<T extends JobType>(type: T): JobExecutor<JobTypeSpecs[T]> {
  return executors[type];
}
