import { executionRecordSchema, recordError, RECORD_ERROR_MAX_BYTES } from '../../src/shared/registry/execution-record';
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

describe('recordError', () => {
  const bytes = (e: { name: string; message: string }) => Buffer.byteLength(e.name) + Buffer.byteLength(e.message);

  it('keeps a short error as it is', () => {
    expect(recordError(new TypeError('bad input'))).toEqual({ name: 'TypeError', message: 'bad input' });
    expect(recordError('plain')).toEqual({ name: 'string', message: 'plain' });
  });

  it('bounds name and message to 4 KB of UTF-8 together, cut on a character boundary', () => {
    for (const char of ['x', 'é', '語', '😀']) {
      const error = recordError(new Error(char.repeat(5_000)));
      expect(bytes(error)).toBeLessThanOrEqual(RECORD_ERROR_MAX_BYTES);
      expect(bytes(error)).toBeGreaterThan(RECORD_ERROR_MAX_BYTES - 8);
      expect(error.message.endsWith('...')).toBe(true);
      // No broken character at the cut: the text before the dots is whole characters.
      expect(error.message.slice(0, -3)).toBe(char.repeat([...error.message.slice(0, -3)].length));
    }
  });

  it('keeps a message that fits in bytes, however many characters it has', () => {
    const message = 'é'.repeat(2_000); // 4,000 bytes
    expect(recordError(new Error(message)).message).toBe(message);
  });
});
