/**
 * ElasticJob's two trace tables in PostgreSQL, with ElasticJob's column names. Types differ where
 * PostgreSQL has a better one: `text` for names and ids (a task id here holds a 128-character job
 * name and instance id), `boolean` for is_success, `timestamptz(3)` for times (epoch ms, no zone
 * guessing). ElasticJob's JOB_STATUS_TRACE_LOG also has a `source` column (CLOUD or LITE_EXECUTOR);
 * it says nothing here and is left out.
 */

/** Table names, lower case as PostgreSQL folds ElasticJob's unquoted upper-case names. */
export const EXECUTION_LOG_TABLE = 'job_execution_log';
export const STATUS_TRACE_TABLE = 'job_status_trace_log';

/** Key of the advisory lock that serialises schema creation across instances starting together. */
const SCHEMA_LOCK_KEY = 0x73686372; // 'shcr'

/**
 * Creates both tables and their indexes if they do not exist. One simple-protocol query: its
 * statements run in one implicit transaction, after an advisory lock, because concurrent
 * `CREATE TABLE IF NOT EXISTS` of one table can still fail on PostgreSQL's catalog unique indexes.
 */
export const CREATE_TRACE_TABLES = `
SELECT pg_advisory_xact_lock(${SCHEMA_LOCK_KEY});
CREATE TABLE IF NOT EXISTS ${EXECUTION_LOG_TABLE} (
  id               varchar(40)    PRIMARY KEY,
  job_name         text           NOT NULL,
  task_id          text           NOT NULL,
  hostname         text           NOT NULL,
  ip               text           NOT NULL,
  sharding_item    integer        NOT NULL,
  execution_source varchar(20)    NOT NULL,
  failure_cause    text,
  is_success       boolean        NOT NULL,
  start_time       timestamptz(3) NOT NULL,
  complete_time    timestamptz(3)
);
CREATE INDEX IF NOT EXISTS ${EXECUTION_LOG_TABLE}_job_complete_idx
  ON ${EXECUTION_LOG_TABLE} (job_name, complete_time DESC);
CREATE INDEX IF NOT EXISTS ${EXECUTION_LOG_TABLE}_job_item_complete_idx
  ON ${EXECUTION_LOG_TABLE} (job_name, sharding_item, complete_time DESC);
CREATE TABLE IF NOT EXISTS ${STATUS_TRACE_TABLE} (
  id               varchar(40)    PRIMARY KEY,
  job_name         text           NOT NULL,
  original_task_id text           NOT NULL DEFAULT '',
  task_id          text           NOT NULL,
  slave_id         text           NOT NULL,
  execution_type   varchar(20)    NOT NULL,
  sharding_item    text           NOT NULL,
  state            varchar(20)    NOT NULL,
  message          text           NOT NULL DEFAULT '',
  creation_time    timestamptz(3) NOT NULL
);
CREATE INDEX IF NOT EXISTS ${STATUS_TRACE_TABLE}_task_state_idx
  ON ${STATUS_TRACE_TABLE} (task_id, state);
CREATE INDEX IF NOT EXISTS ${STATUS_TRACE_TABLE}_job_creation_idx
  ON ${STATUS_TRACE_TABLE} (job_name, creation_time DESC);
`;
