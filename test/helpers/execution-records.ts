import type { ExecutionRecord } from '../../src/shared/registry/execution-record';

/** Reference time of the history tests: 2026-01-02T03:04:05.000Z. */
export const T0 = Date.UTC(2026, 0, 2, 3, 4, 5);

/**
 * A valid ExecutionRecord: item 0 of job `billing`, fired at T0 and completed in 120 ms on
 * instance `10.0.0.7@-@4242`; `overrides` replace fields.
 */
export function executionRecord(overrides: Partial<ExecutionRecord> = {}): ExecutionRecord {
  const fireTime = overrides.fireTime ?? T0;
  const startedAt = overrides.startedAt ?? fireTime + 5;
  const durationMs = overrides.durationMs ?? 120;
  return {
    job: 'billing',
    item: 0,
    fireTime,
    source: 'NORMAL',
    instanceId: '10.0.0.7@-@4242',
    status: 'completed',
    attempts: 1,
    startedAt,
    finishedAt: startedAt + durationMs,
    durationMs,
    ...overrides,
  };
}

/** `count` records of `job`, one a second from T0, items cycling through 0..items-1; the oldest first. */
export function executionSeries(count: number, options: { job?: string; items?: number; from?: number } = {}): ExecutionRecord[] {
  const items = options.items ?? 1;
  return Array.from({ length: count }, (_, i) =>
    executionRecord({ job: options.job ?? 'billing', item: i % items, fireTime: (options.from ?? T0) + i * 1_000 }),
  );
}
