import { ConfigError, ErrorCodes, ShardcronError } from '../../src/shared/errors';
import {
  JOB_CONFIG_FIELDS,
  MAX_SHARDING_TOTAL_COUNT,
  jobConfigCodec,
  jobConfigSchema,
  parseJobConfig,
  toJobConfig,
  type JobConfig,
} from '../../src/shared/config/job-config';
import {
  defineJob,
  formatTaskId,
  isResolvedJobDefinition,
  type JobDefinition,
  type ShardingContext,
} from '../../src/shared/config/job-definition';
import { registerShardingStrategy, shardingStrategies, unregisterShardingStrategy } from '../../src/shared/sharding/sharding-strategies';

const execute = async (_ctx: ShardingContext): Promise<void> => {};

/** Every default, as DESIGN.md and ElasticJob 3.x give them, for a job named `j`. */
const DEFAULTS: JobConfig = {
  name: 'j',
  type: 'SIMPLE',
  timeZone: 'UTC',
  shardingTotalCount: 1,
  shardingItemParameters: '',
  jobParameter: '',
  failover: false,
  misfire: true,
  monitorExecution: true,
  shardingStrategy: 'AVG_ALLOCATION',
  description: '',
  disabled: false,
  overwrite: false,
  maxTimeDiffSeconds: -1,
  reconcileIntervalMinutes: 10,
};

/** Runs `fn` and returns the ConfigError it must throw, with the given code. */
function configError(fn: () => unknown, code: string = ErrorCodes.INVALID_CONFIG): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).code).toBe(code);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

/** defineJob on a partial definition of job `j` (JS users can pass anything). */
const define = (fields: Record<string, unknown>) => defineJob({ name: 'j', execute, ...fields } as JobDefinition);
const defineError = (fields: Record<string, unknown>) => configError(() => define(fields));
const fieldsOf = (err: ConfigError) => err.issues.map((i) => i.field);
const messageFor = (err: ConfigError, field: string) => err.issues.find((i) => i.field === field)?.message ?? '';

describe('defineJob: the DESIGN.md example', () => {
  it('is accepted verbatim and resolves with the exact defaults', () => {
    const job = defineJob({
      name: 'billing', cron: '0/5 * * * * ?', timeZone: 'Europe/Berlin',
      shardingTotalCount: 3, shardingItemParameters: '0=A,1=B,2=C', jobParameter: 'x',
      failover: true, misfire: true, monitorExecution: true, shardingStrategy: 'AVG_ALLOCATION',
      async execute(ctx) { void ctx.shardingItem; void ctx.shardingParameter; void ctx.signal; },
    });
    const expected: JobConfig = {
      name: 'billing',
      type: 'SIMPLE',
      cron: '0/5 * * * * ?',
      timeZone: 'Europe/Berlin',
      shardingTotalCount: 3,
      shardingItemParameters: '0=A,1=B,2=C',
      jobParameter: 'x',
      failover: true,
      misfire: true,
      monitorExecution: true,
      shardingStrategy: 'AVG_ALLOCATION',
      description: '',
      disabled: false,
      overwrite: false,
      maxTimeDiffSeconds: -1,
      reconcileIntervalMinutes: 10,
    };
    expect(job.config).toEqual(expected);
    expect(job).toMatchObject(expected);
    expect(job.errorHandler).toBe('LOG');
    expect(job.listeners).toEqual({});
    expect(typeof job.execute).toBe('function');
  });

  it('applies every default to a minimal job', () => {
    expect(define({}).config).toEqual(DEFAULTS);
  });
});

interface FieldCase {
  field: keyof JobConfig;
  valid: unknown[];
  invalid: Array<[value: unknown, messagePart: string]>;
}

const fieldCases: FieldCase[] = [
  { field: 'type', valid: ['SIMPLE'], invalid: [['FOO', 'not a job type'], [1, 'not a job type']] },
  { field: 'timeZone', valid: ['Europe/Berlin', 'America/New_York', 'Etc/GMT-2'], invalid: [['Mars/Olympus', 'not an IANA time zone'], ['+02:00', 'IANA'], [1, 'expected an IANA time zone']] },
  { field: 'shardingTotalCount', valid: [1, 7, MAX_SHARDING_TOTAL_COUNT], invalid: [[0, '1 to 1000'], [1001, '1 to 1000'], [2.5, 'not a whole number'], ['3', 'got "3"'], [null, 'got null']] },
  { field: 'shardingItemParameters', valid: ['0=A,1=B', '', '0=A,'], invalid: [['0=A,,1=B', 'entry 2'], ['x', 'item=value'], [{}, 'got an object']] },
  { field: 'jobParameter', valid: ['x', '{"a":1}'], invalid: [[1, 'expected a string']] },
  { field: 'failover', valid: [true, false], invalid: [['yes', 'true or false']] },
  { field: 'misfire', valid: [true, false], invalid: [[1, 'true or false']] },
  { field: 'monitorExecution', valid: [true, false], invalid: [['false', 'true or false']] },
  { field: 'shardingStrategy', valid: ['ODEVITY', 'ROUND_ROBIN', 'AVG_ALLOCATION'], invalid: [['RANDOM', 'unknown sharding strategy "RANDOM"'], ['avg_allocation', 'unknown'], [3, 'expected a sharding strategy name']] },
  { field: 'description', valid: ['nightly billing'], invalid: [[false, 'expected a string']] },
  { field: 'disabled', valid: [true], invalid: [[0, 'true or false']] },
  { field: 'overwrite', valid: [true], invalid: [['true', 'true or false']] },
  { field: 'maxTimeDiffSeconds', valid: [-1, 1, 60, 3600], invalid: [[0, '-1 (no check)'], [-2, 'out of range'], [3601, '1 to 3600'], [1.5, 'whole number']] },
  { field: 'reconcileIntervalMinutes', valid: [0, 1, 1440], invalid: [[-1, '0 (off)'], [1441, '1 to 1440'], [0.5, 'whole number']] },
];

describe.each(fieldCases)('defineJob field $field', ({ field, valid, invalid }) => {
  it('has its default', () => {
    expect(define({})[field]).toBe(DEFAULTS[field]);
  });

  it.each(valid.map((v) => [v]))('accepts %p', (value) => {
    const job = define({ [field]: value });
    expect(job[field]).toBe(value);
    expect(job.config[field]).toBe(value);
  });

  it.each(invalid)('rejects %p, naming the field', (value, messagePart) => {
    const err = defineError({ [field]: value });
    expect(fieldsOf(err)).toEqual([field]);
    expect(messageFor(err, field)).toContain(messagePart);
    expect(err.message).toMatch(/^Invalid job "j":\n/);
    expect(err.message).toContain(`  - ${field}: `);
  });
});

describe('defineJob: name', () => {
  it('accepts names of the registry pattern', () => {
    for (const name of ['a', 'Billing_2', 'x-y', '9'.repeat(128)]) expect(defineJob({ name, execute }).name).toBe(name);
  });

  it.each([[''], ['.cluster'], ['a/b'], ['a b'], ['-a'], ['x'.repeat(129)]])('rejects %p, quoting it', (name) => {
    const err = configError(() => defineJob({ name, execute }));
    expect(fieldsOf(err)).toEqual(['name']);
    expect(messageFor(err, 'name')).toContain('not a valid job name');
  });

  it('reports a missing name as required', () => {
    const err = configError(() => defineJob({ execute } as unknown as JobDefinition));
    expect(err.message).toMatch(/^Invalid job \(no valid name\):/);
    expect(messageFor(err, 'name')).toContain('is required');
  });

  it('refuses a definition that is not an object', () => {
    const err = configError(() => defineJob(42 as unknown as JobDefinition));
    expect(fieldsOf(err)).toEqual(['(root)']);
  });
});

describe('defineJob: cron and timeZone', () => {
  it.each([['0/5 * * * * ?'], ['0 0 12 ? * MON-FRI'], ['0 15 10 L * ? 2030'], ['*/10 * * * *']])('accepts %p', (cron) => {
    expect(define({ cron }).cron).toBe(cron);
  });

  it('evaluates cron in its time zone', () => {
    expect(define({ cron: '0 30 2 * * ?', timeZone: 'Europe/Berlin' }).timeZone).toBe('Europe/Berlin');
  });

  it.each([['garbage'], ['0 0 0 31 2 ?'], ['0 0 12 1 * MON'], ['@daily'], [' ']])('rejects %p naming cron, with the parser message', (cron) => {
    const err = defineError({ cron });
    expect(fieldsOf(err)).toEqual(['cron']);
    expect(messageFor(err, 'cron')).toMatch(cron.trim() === '' ? /is empty: omit cron/ : /Invalid cron expression/);
  });

  it('rejects a non-string cron', () => {
    expect(messageFor(defineError({ cron: 5 }), 'cron')).toContain('expected a cron expression');
  });

  it('still checks the cron expression when the time zone is invalid', () => {
    expect(fieldsOf(defineError({ cron: 'garbage', timeZone: 'Nowhere/Land' }))).toEqual(['timeZone', 'cron']);
    expect(fieldsOf(defineError({ cron: '0/5 * * * * ?', timeZone: 'Nowhere/Land' }))).toEqual(['timeZone']);
  });

  it('makes a trigger-only job when cron is absent', () => {
    const job = define({});
    expect(job.cron).toBeUndefined();
    expect('cron' in job.config).toBe(false);
    expect(JSON.parse(jobConfigCodec.encode(job.config).toString())).not.toHaveProperty('cron');
  });
});

describe('defineJob: shardingTotalCount and shardingItemParameters', () => {
  it('says the limit when the total is out of range', () => {
    for (const total of [0, 1001]) {
      const err = defineError({ shardingTotalCount: total });
      expect(messageFor(err, 'shardingTotalCount')).toContain(`from 1 to ${MAX_SHARDING_TOTAL_COUNT}`);
    }
  });

  it('includes the parser message for malformed item parameters', () => {
    const message = messageFor(defineError({ shardingItemParameters: '0=A=B' }), 'shardingItemParameters');
    expect(message).toContain("more than one '='");
    expect(message).toContain('0=Beijing,1=Shanghai');
  });

  it('accepts item keys beyond the total and keeps them (changing the total must not invalidate a config)', () => {
    expect(define({ shardingTotalCount: 2, shardingItemParameters: '0=A,1=B,5=F' }).shardingItemParameters).toBe('0=A,1=B,5=F');
  });
});

describe('defineJob: shardingStrategy', () => {
  afterEach(() => unregisterShardingStrategy('EVERYTHING_FIRST'));

  it('lists the known strategies when the name is unknown', () => {
    registerShardingStrategy('EVERYTHING_FIRST', shardingStrategies.AVG_ALLOCATION);
    const message = messageFor(defineError({ shardingStrategy: 'NOPE' }), 'shardingStrategy');
    expect(message).toContain('AVG_ALLOCATION, ODEVITY, ROUND_ROBIN, EVERYTHING_FIRST');
    expect(message).toContain('registerShardingStrategy()');
  });

  it('accepts a custom strategy registered before defineJob, and refuses it before registration', () => {
    expect(fieldsOf(defineError({ shardingStrategy: 'EVERYTHING_FIRST' }))).toEqual(['shardingStrategy']);
    registerShardingStrategy('EVERYTHING_FIRST', (ids, _job, total) => ({ [ids[0]!]: Array.from({ length: total }, (_, i) => i) }));
    expect(define({ shardingStrategy: 'EVERYTHING_FIRST' }).shardingStrategy).toBe('EVERYTHING_FIRST');
  });

  it('reads an empty name as the default, as ElasticJob does', () => {
    expect(define({ shardingStrategy: '' }).shardingStrategy).toBe('AVG_ALLOCATION');
  });
});

describe('defineJob: type', () => {
  it.each([
    ['DATAFLOW', ['fetchData', 'processData']],
    ['SCRIPT', ['script']],
    ['HTTP', ['http']],
  ])('requires the fields of a %s job, naming each', (type, fields) => {
    const err = configError(() => defineJob({ name: 'j', type } as unknown as JobDefinition));
    expect(fieldsOf(err)).toEqual(fields);
    for (const field of fields) expect(messageFor(err, field)).toContain(`is required for a ${type} job`);
  });

  it('refuses a field of another type, naming the type it belongs to', () => {
    const err = configError(() => defineJob({ name: 'j', type: 'SCRIPT', script: { command: ['true'] }, execute, http: { url: 'http://x/' } } as unknown as JobDefinition));
    expect(fieldsOf(err).sort()).toEqual(['execute', 'http']);
    expect(messageFor(err, 'http')).toContain('is a HTTP field; this job is SCRIPT');
  });

  it('refuses an unknown type, listing the four', () => {
    const err = configError(() => defineJob({ name: 'j', type: 'BATCH', execute } as unknown as JobDefinition));
    expect(fieldsOf(err)).toEqual(['type']);
    expect(messageFor(err, 'type')).toMatch(/SIMPLE.*DATAFLOW.*SCRIPT.*HTTP/);
  });
});

describe('defineJob: execute, errorHandler, listeners', () => {
  it('requires execute for a SIMPLE job', () => {
    const err = configError(() => defineJob({ name: 'j' } as unknown as JobDefinition));
    expect(fieldsOf(err)).toEqual(['execute']);
    expect(messageFor(err, 'execute')).toContain('is required for a SIMPLE job');
  });

  it('rejects an execute that is not a function', () => {
    expect(messageFor(defineError({ execute: 'run' }), 'execute')).toContain('expected a function');
  });

  it.each([['LOG'], ['IGNORE']])('accepts the %s error handler', (errorHandler) => {
    expect(define({ errorHandler }).errorHandler).toBe(errorHandler);
  });

  it('accepts an error handler function and rejects anything else', () => {
    const handler = () => {};
    expect(define({ errorHandler: handler }).errorHandler).toBe(handler);
    expect(define({ errorHandler: 'THROW' }).errorHandler).toBe('THROW');
    expect(fieldsOf(defineError({ errorHandler: 'PANIC' }))).toEqual(['errorHandler']);
    expect(fieldsOf(defineError({ errorHandler: 42 }))).toEqual(['errorHandler']);
  });

  it('keeps listeners, bound to their object so class-based ones keep `this`', async () => {
    class Counter {
      count = 0;
      beforeExecute(): void {
        this.count++;
      }
    }
    const counter = new Counter();
    const job = define({ listeners: counter });
    await job.listeners.beforeExecute?.({} as ShardingContext);
    expect(counter.count).toBe(1);
    expect(job.listeners.afterExecute).toBeUndefined();
  });

  it('names bad and unknown listeners', () => {
    const err = defineError({ listeners: { beforeExecute: 1, afterExecution: () => {} } });
    expect(fieldsOf(err)).toEqual(['listeners.beforeExecute', 'listeners.afterExecution']);
    expect(fieldsOf(defineError({ listeners: 'log' }))).toEqual(['listeners']);
  });
});

describe('defineJob: several problems', () => {
  it('lists every bad field at once', () => {
    const err = configError(() =>
      defineJob({
        name: 'bad name', cron: 'garbage', shardingTotalCount: 0, shardingItemParameters: 'x', shardingStrategy: 'NOPE',
        failover: 'yes', maxTimeDiffSeconds: 0, errorHandler: 'WARN', shardingTotalcount: 3,
      } as unknown as JobDefinition),
    );
    expect(err.message).toMatch(/^Invalid job "bad name":\n/);
    expect(fieldsOf(err).sort()).toEqual(
      ['name', 'cron', 'shardingTotalCount', 'shardingItemParameters', 'shardingStrategy', 'failover', 'maxTimeDiffSeconds', 'errorHandler', 'execute', 'shardingTotalcount'].sort(),
    );
    for (const field of fieldsOf(err)) expect(err.message).toContain(`  - ${field}: `);
  });

  it('rejects unknown fields by name, with a hint', () => {
    const err = defineError({ shardingTotalcount: 3, jobParam: 'x', zzz: 1 });
    expect(fieldsOf(err)).toEqual(['jobParam', 'shardingTotalcount', 'zzz']);
    expect(messageFor(err, 'shardingTotalcount')).toContain('did you mean shardingTotalCount?');
    expect(messageFor(err, 'jobParam')).toContain('did you mean jobParameter?');
    expect(messageFor(err, 'zzz')).toContain('unknown field; known fields: name, type, cron');
  });
});

describe('defineJob: result', () => {
  it('is frozen, as are its config and listeners', () => {
    const job = define({ listeners: { afterExecute: () => {} } });
    expect(Object.isFrozen(job)).toBe(true);
    expect(Object.isFrozen(job.config)).toBe(true);
    expect(Object.isFrozen(job.listeners)).toBe(true);
    expect(() => {
      (job as { shardingTotalCount: number }).shardingTotalCount = 5;
    }).toThrow(TypeError);
  });

  it('is recognised as a resolved definition; look-alikes are not', () => {
    const job = define({});
    expect(isResolvedJobDefinition(job)).toBe(true);
    expect(isResolvedJobDefinition({ ...job })).toBe(false);
    expect(isResolvedJobDefinition(null)).toBe(false);
  });

  it('holds the stored config, which toJobConfig reproduces', () => {
    const job = define({ cron: '0 * * * * ?', description: 'd' });
    expect(toJobConfig(job.config)).toEqual(job.config);
    expect(Object.keys(job.config)).toEqual(JOB_CONFIG_FIELDS.filter((f) => f in job.config));
    expect(job.config).not.toHaveProperty('execute');
  });
});

describe('formatTaskId', () => {
  it('joins job, fire time, item and instance with @-@', () => {
    expect(formatTaskId({ jobName: 'billing', fireTime: 1700000000000, shardingItem: 2, instanceId: '10.0.0.1@-@42' })).toBe(
      'billing@-@1700000000000@-@2@-@10.0.0.1@-@42',
    );
  });
});

describe('jobConfigCodec', () => {
  const path = '/billing/config';
  const bytes = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value), 'utf8');

  function corruptError(data: Buffer, where = path): ShardcronError {
    try {
      jobConfigCodec.decode(data, where);
    } catch (err) {
      expect(err).toBeInstanceOf(ShardcronError);
      expect((err as ShardcronError).code).toBe(ErrorCodes.CORRUPT_DATA);
      return err as ShardcronError;
    }
    throw new Error('expected decode to fail');
  }

  it('round-trips a config, frozen, with fields in canonical order', () => {
    const config = defineJob({ name: 'billing', cron: '0/5 * * * * ?', shardingTotalCount: 3, failover: true, execute }).config;
    const encoded = jobConfigCodec.encode(config);
    expect(Object.keys(JSON.parse(encoded.toString()))).toEqual(JOB_CONFIG_FIELDS.filter((f) => (config as unknown as Record<string, unknown>)[f] !== undefined));
    const decoded = jobConfigCodec.decode(encoded, path);
    expect(decoded).toEqual(config);
    expect(Object.isFrozen(decoded)).toBe(true);
  });

  it('refuses to encode an invalid config', () => {
    const err = configError(() => jobConfigCodec.encode({ ...DEFAULTS, name: 'billing', shardingTotalCount: 0 }));
    expect(fieldsOf(err)).toEqual(['shardingTotalCount']);
  });

  it('names the job and the path for corrupt JSON', () => {
    const err = corruptError(bytes('{"name": "billing",'));
    expect(err).not.toBeInstanceOf(ConfigError);
    expect(err.message).toMatch(/^Invalid job "billing": corrupt config at \/billing\/config: not valid JSON/);
    expect(err.details).toMatchObject({ path, job: 'billing' });
  });

  it('names the job, the path and every bad field of valid JSON', () => {
    const err = corruptError(bytes({ name: 'billing', cron: 'garbage', shardingTotalCount: 1001, failover: 'yes' })) as ConfigError;
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.message).toMatch(/^Invalid job "billing": corrupt config at \/billing\/config/);
    expect(fieldsOf(err).sort()).toEqual(['cron', 'failover', 'shardingTotalCount']);
    expect(messageFor(err, 'shardingTotalCount')).toContain('1 to 1000');
  });

  it('takes the job name from the data when the path does not name one', () => {
    const err = corruptError(bytes({ name: 'billing', shardingTotalCount: 0 }), '/somewhere');
    expect(err.message).toMatch(/^Invalid job "billing": corrupt config at \/somewhere/);
  });

  it('refuses JSON that is not an object, and a missing name', () => {
    expect(fieldsOf(corruptError(bytes('null')) as ConfigError)).toEqual(['(root)']);
    expect(fieldsOf(corruptError(bytes({ shardingTotalCount: 2 })) as ConfigError)).toEqual(['name']);
  });

  it('refuses a config stored under another job', () => {
    const err = corruptError(bytes({ name: 'payroll' })) as ConfigError;
    expect(fieldsOf(err)).toEqual(['name']);
    expect(messageFor(err, 'name')).toContain('"payroll" does not match the job node "billing"');
    expect(jobConfigCodec.decode(bytes({ name: 'billing' }), '/ns/billing/config').name).toBe('billing');
  });

  it('applies the defaults to a config missing optional fields', () => {
    expect(jobConfigCodec.decode(bytes({ name: 'billing' }), path)).toEqual({ ...DEFAULTS, name: 'billing' });
  });

  it('ignores unknown fields (a newer version may have written them)', () => {
    const decoded = jobConfigCodec.decode(bytes({ name: 'billing', shardingTotalCount: 2, retryPolicy: { max: 3 }, jobExtraConfigurations: [] }), path);
    expect(decoded).toEqual({ ...DEFAULTS, name: 'billing', shardingTotalCount: 2 });
    expect(decoded).not.toHaveProperty('retryPolicy');
  });

  it('refuses an unknown type and an unregistered strategy', () => {
    const err = corruptError(bytes({ name: 'billing', type: 'BATCH', shardingStrategy: 'MINE' })) as ConfigError;
    expect(fieldsOf(err)).toEqual(['type', 'shardingStrategy']);
  });

  it('refuses a SCRIPT config without its script, and a script with a bad command', () => {
    expect(fieldsOf(corruptError(bytes({ name: 'billing', type: 'SCRIPT' })) as ConfigError)).toEqual(['script']);
    expect(fieldsOf(corruptError(bytes({ name: 'billing', type: 'SCRIPT', script: { command: [] } })) as ConfigError)).toEqual(['script.command']);
  });

  it('round-trips the type fields and the policies', () => {
    const config = jobConfigCodec.decode(
      bytes({ name: 'billing', type: 'HTTP', http: { url: 'http://127.0.0.1:1/run', method: 'POST' }, timeoutMs: 2000, retry: { attempts: 3, backoffMs: 10 }, errorHandler: 'IGNORE' }),
      path,
    );
    expect(config.http).toMatchObject({ url: 'http://127.0.0.1:1/run', method: 'POST', connectTimeoutMs: 3000 });
    expect(config.retry).toMatchObject({ attempts: 3, backoffMs: 10 });
    expect(jobConfigCodec.decode(jobConfigCodec.encode(config), path)).toEqual(config);
  });
});

describe('parseJobConfig and jobConfigSchema', () => {
  it('returns a frozen config with defaults, ignoring unknown fields', () => {
    const config = parseJobConfig({ name: 'j', extra: 1 }, 'test');
    expect(config).toEqual(DEFAULTS);
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('names the subject and every bad field', () => {
    const err = configError(() => parseJobConfig({ name: 'j', shardingTotalCount: -1, misfire: null }, 'PUT /api/jobs/j/config'));
    expect(err.message).toMatch(/^Invalid job "j" \(PUT \/api\/jobs\/j\/config\):\n/);
    expect(fieldsOf(err)).toEqual(['shardingTotalCount', 'misfire']);
  });

  it('can reject unknown fields', () => {
    const err = configError(() => parseJobConfig({ name: 'j', misfires: true }, 'body', { unknownFields: 'reject' }));
    expect(fieldsOf(err)).toEqual(['misfires']);
    expect(messageFor(err, 'misfires')).toContain('did you mean misfire?');
    expect(parseJobConfig({ name: 'j' }, 'body', { unknownFields: 'reject' })).toEqual(DEFAULTS);
  });

  it('is a zod schema with the same checks', () => {
    expect(jobConfigSchema.safeParse({ name: 'j', cron: '0/5 * * * * ?' }).success).toBe(true);
    expect(jobConfigSchema.safeParse({ name: 'j', cron: 'nope' }).success).toBe(false);
  });
});
