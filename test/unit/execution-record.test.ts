import { executionRecordSchema } from '../../src/shared/registry/execution-record';
import { executionRecord } from '../helpers/execution-records';

describe('executionRecordSchema (the history writers\' check of every record)', () => {
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

  it.each(valid.map((r) => [r]))('accepts %j', (record) => {
    expect(executionRecordSchema.safeParse(record).success).toBe(true);
  });

  it.each(invalid.map((r) => [r]))('refuses %j', (record) => {
    expect(executionRecordSchema.safeParse(record).success).toBe(false);
  });

  it('strips a field a record does not have', () => {
    const extra = { ...executionRecord(), note: 'x' };
    expect(executionRecordSchema.parse(extra)).toEqual(executionRecord());
  });
});
