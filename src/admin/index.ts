/**
 * The admin layer: operations on a namespace and the read model, shared by the CLI and the console
 * (DESIGN.md "Code layout": depends on no role).
 */
export { Admin, type AdminOptions } from './admin';
export { openAdmin, type OpenAdminOptions } from './admin-connection';
export { parseItemNumber } from './admin-errors';
export { applyConfigUpdate } from './config-update';
export { createDataJob, DATA_JOB_TYPES } from './job-creation';
export type { DataProblem } from './data-problems';
export { summarizeInstances, type InstanceSummary } from './instance-summary';
export type { RemoveJobOptions, RemoveJobResult } from './job-removal';
export {
  describeJob,
  itemStatus,
  jobStatus,
  nextFireTime,
  summarizeJob,
  ItemStatuses,
  JobStatuses,
  type ItemDetail,
  type ItemSnapshot,
  type ItemStatus,
  type JobDetail,
  type JobSnapshot,
  type JobStatus,
  type JobSummary,
  type LiveInstanceEntry,
} from './job-status';
export type { SwitchResult } from './job-switches';
export { newTriggerRequestId } from './job-trigger';
export type { QueuedRequestRef } from './queued-requests';
export { ITEM_IDLE_MS, ReadModel, type ReadModelOptions } from './read-model';
export type { ServerSwitchResult } from './server-switches';
