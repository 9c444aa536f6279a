import { executionRecordSchema, isExecutionRecord } from '../../src/shared/registry/execution-record';
import { executionRecord } from '../helpers/execution-records';

describe('isExecutionRecord (the history writers\' check of every record)', () => {
  const valid = [
    executionRecord(),
    executionRecord({ status: 'failed', error: { name: 'Error', message: 'boom' }, attempts: 3 }),
    executionRecord({ status: 'skipped', attempts: 0, reason: 'running elsewhere' }),
    executionRecord({ processed: 10, failed: 2 }),
    executionRecord({ exitCode: -1 }),
    executionRecord({ httpStatus: 503, source: 'FAILOVER' }),
  ];
  const invalid: unknown[] = [
    null,
    'record',
    { ...executionRecord(), job: '' },
    { ...executionRecord(), item: -1 },
    { ...executionRecord(), item: 1.5 },
    { ...executionRecord(), fireTime: Number.MAX_SAFE_INTEGER + 2 },
    { ...executionRecord(), status: 'done' },
    { ...executionRecord(), source: 'CRON' },
    { ...executionRecord(), error: { name: 'Error' } },
    { ...executionRecord(), error: 'boom' },
    { ...executionRecord(), processed: -3 },
    { ...executionRecord(), exitCode: 1.2 },
    { ...executionRecord(), reason: 7 },
    (({ attempts: _a, ...rest }) => rest)(executionRecord()),
  ];

  it.each(valid.map((r) => [r]))('accepts %j, as the schema does', (record) => {
    expect(executionRecordSchema.safeParse(record).success).toBe(true);
    expect(isExecutionRecord(record)).toBe(true);
  });

  it.each(invalid.map((r) => [r]))('refuses %j, as the schema does', (record) => {
    expect(executionRecordSchema.safeParse(record).success).toBe(false);
    expect(isExecutionRecord(record)).toBe(false);
  });

  it('leaves a record with a field the schema would strip to the schema', () => {
    const extra = { ...executionRecord(), note: 'x' };
    expect(isExecutionRecord(extra)).toBe(false);
    expect(executionRecordSchema.parse(extra)).toEqual(executionRecord());
  });
});
