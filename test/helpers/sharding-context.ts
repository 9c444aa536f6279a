/**
 * A ShardingContext for executor tests, as the item runner builds one: every serializable field
 * set, a signal the test controls, a logger that drops everything (or the one given).
 */
import type { ShardingContext } from '../../src/shared/config/job-definition';
import { silentLogger } from '../../src/shared/logger';
import type { ExecutorEnvironment } from '../../src/worker/executors/job-executor';

/** A context of item 1 of job `exec-test`; `overrides` replace any field, `signal` included. */
export function testContext(overrides: Partial<ShardingContext> = {}): ShardingContext {
  return {
    jobName: 'exec-test',
    taskId: 'exec-test@-@1767225600000@-@1@-@127.0.0.1@-@4242',
    shardingTotalCount: 3,
    jobParameter: 'region=eu',
    shardingItem: 1,
    shardingParameter: 'Beijing',
    fireTime: 1767225600000,
    source: 'NORMAL',
    instanceId: '127.0.0.1@-@4242',
    attempt: 1,
    signal: new AbortController().signal,
    assertOwnership: () => {},
    log: silentLogger,
    ...overrides,
  };
}

/** An environment whose job is never flagged for resharding. */
export const noResharding: ExecutorEnvironment = Object.freeze({ reshardingPending: () => false });
