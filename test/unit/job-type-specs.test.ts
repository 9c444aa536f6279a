import { z } from 'zod';
import {
  HTTP_DEFAULTS,
  SHARDING_CONTEXT_JSON_FIELDS,
  dataflowSpecShape,
  httpSpecSchema,
  scriptSpecSchema,
  shardingContextJson,
} from '../../src/shared/config/job-type-specs';
import { toFieldIssues } from '../../src/shared/validation';
import { testContext } from '../helpers/sharding-context';

/** The field issues of parsing `value` as the `prefix` field, by field name. */
function issuesOf(schema: z.ZodType, value: unknown, prefix: string): Record<string, string> {
  const result = schema.safeParse(value);
  if (result.success) throw new Error(`expected ${JSON.stringify(value)} to be refused`);
  return Object.fromEntries(toFieldIssues(result.error, prefix).map((i) => [i.field, i.message]));
}

describe('SCRIPT spec', () => {
  it('accepts a command with env, cwd and timeoutMs, unchanged', () => {
    const spec = { command: ['/usr/local/bin/backup', '--full'], env: { TARGET: 's3://b' }, cwd: '/srv', timeoutMs: 60_000 };
    expect(scriptSpecSchema.parse(spec)).toEqual(spec);
  });

  it('names every bad field at once', () => {
    const issues = issuesOf(
      scriptSpecSchema,
      { command: ['', 7, 'a\0b'], env: { '': 'x', 'A=B': 'y', SHARDCRON_SHARDING_CONTEXT: 'z', N: 4 }, cwd: '', timeoutMs: 0, timeoutMS: 5 },
      'script',
    );
    expect(issues).toEqual({
      'script.command.0': expect.stringContaining('is empty'),
      'script.command.1': 'expected a string, got 7',
      'script.command.2': expect.stringContaining('NUL'),
      'script.env.': expect.stringContaining('"" is not an environment variable name'),
      'script.env.A=B': expect.stringContaining('"A=B" is not an environment variable name'),
      'script.env.SHARDCRON_SHARDING_CONTEXT': expect.stringContaining('is set by shardcron'),
      'script.env.N': 'expected a string, got 4',
      'script.cwd': expect.stringContaining('is empty'),
      'script.timeoutMs': expect.stringContaining('0 is out of range; expected a positive integer of milliseconds'),
      'script.timeoutMS': expect.stringContaining('unknown field (did you mean timeoutMs?)'),
    });
  });

  it('refuses a missing or empty command, a non-object, a fractional or too long timeout', () => {
    expect(issuesOf(scriptSpecSchema, {}, 'script')).toEqual({ 'script.command': expect.stringMatching(/^is required: expected an array/) });
    expect(issuesOf(scriptSpecSchema, { command: [] }, 'script')).toEqual({ 'script.command': expect.stringMatching(/^is empty: expected the program/) });
    expect(issuesOf(scriptSpecSchema, 'backup.sh', 'script')).toEqual({ script: expect.stringContaining('expected an object { command: string[]') });
    expect(issuesOf(scriptSpecSchema, { command: ['x'], timeoutMs: 1.5 }, 'script')).toEqual({ 'script.timeoutMs': expect.stringContaining('1.5 is not a whole number') });
    // A longer Node timer fires at once: refused rather than turned into no timeout at all.
    expect(issuesOf(scriptSpecSchema, { command: ['x'], timeoutMs: 2 ** 31 }, 'script')).toEqual({ 'script.timeoutMs': expect.stringContaining('out of range') });
  });
});

describe('HTTP spec', () => {
  it('applies the defaults: GET, connect 3000 ms, read 5000 ms', () => {
    expect(httpSpecSchema.parse({ url: 'https://example.org/run' })).toEqual({ url: 'https://example.org/run', ...HTTP_DEFAULTS });
    expect(HTTP_DEFAULTS).toEqual({ method: 'GET', connectTimeoutMs: 3000, readTimeoutMs: 5000 });
  });

  it('names every bad field at once', () => {
    const issues = issuesOf(
      httpSpecSchema,
      {
        url: 'ftp://example.org/x',
        method: 'post',
        headers: { 'bad name': 'x', 'X-Two-Lines': 'a\r\nb', ShardingContext: 'mine', 'content-length': '3', 'X-Num': 5 },
        body: { a: 1 },
        connectTimeoutMs: -1,
        readTimeoutMs: 'soon',
        retries: 3,
      },
      'http',
    );
    expect(issues).toEqual({
      'http.url': '"ftp://example.org/x" uses ftp:; expected an http: or https: URL',
      'http.method': 'expected GET, POST, PUT, PATCH, DELETE, got "post"',
      'http.headers.bad name': expect.stringContaining('"bad name" is not a valid header name'),
      'http.headers.X-Two-Lines': expect.stringContaining('is not a valid header value'),
      'http.headers.ShardingContext': expect.stringContaining('is set by shardcron'),
      'http.headers.content-length': expect.stringContaining('is set by shardcron'),
      'http.headers.X-Num': 'expected a string, got 5',
      'http.body': expect.stringContaining('expected a string'),
      'http.connectTimeoutMs': expect.stringContaining('-1 is out of range'),
      'http.readTimeoutMs': expect.stringContaining('got "soon"'),
      'http.retries': expect.stringContaining('unknown field'),
    });
  });

  it('refuses a missing URL and one that does not parse', () => {
    expect(issuesOf(httpSpecSchema, {}, 'http')).toEqual({ 'http.url': expect.stringMatching(/^is required: expected an http: or https: URL/) });
    expect(issuesOf(httpSpecSchema, { url: 'example.org/run' }, 'http')).toEqual({ 'http.url': expect.stringContaining('"example.org/run" is not a URL') });
  });

  it('refuses a header value Node would refuse at run time (a character above U+00FF)', () => {
    expect(issuesOf(httpSpecSchema, { url: 'http://h/', headers: { 'X-City': '北京' } }, 'http')).toEqual({
      'http.headers.X-City': expect.stringContaining('is not a valid header value'),
    });
  });
});

describe('DATAFLOW fields', () => {
  const dataflow = z.object(dataflowSpecShape);
  const fetchData = () => [];
  const processData = () => {};

  it('defaults to one-shot with one chunk', () => {
    expect(dataflow.parse({ fetchData, processData })).toEqual({ fetchData, processData, streaming: false, processConcurrency: 1 });
  });

  it('names every bad field at once', () => {
    expect(issuesOf(dataflow, { fetchData: 'SELECT 1', streaming: 'yes', processConcurrency: 65 }, '')).toEqual({
      fetchData: 'expected a function (ctx) => records[] | Promise<records[]>, got "SELECT 1"',
      processData: 'is required: expected a function (ctx, records) => void | Promise<void>',
      streaming: 'expected true or false, got "yes"',
      processConcurrency: '65 is not an integer from 1 to 64 (MAX_PROCESS_CONCURRENCY)',
    });
    expect(issuesOf(dataflow, { fetchData, processData, processConcurrency: 0 }, '')).toEqual({ processConcurrency: expect.stringContaining('0 is not an integer from 1 to 64') });
    expect(issuesOf(dataflow, { fetchData, processData, processConcurrency: 2.5 }, '')).toEqual({ processConcurrency: expect.stringContaining('2.5 is not an integer') });
  });
});

describe('shardingContextJson', () => {
  it('holds exactly the serializable fields, in order', () => {
    const ctx = testContext();
    const json = shardingContextJson(ctx);
    expect(Object.keys(JSON.parse(json))).toEqual([...SHARDING_CONTEXT_JSON_FIELDS]);
    expect(JSON.parse(json)).toEqual({
      jobName: 'exec-test',
      taskId: 'exec-test@-@1767225600000@-@1@-@127.0.0.1@-@4242',
      shardingTotalCount: 3,
      jobParameter: 'region=eu',
      shardingItem: 1,
      shardingParameter: 'Beijing',
      fireTime: 1767225600000,
      source: 'NORMAL',
      instanceId: '127.0.0.1@-@4242',
    });
  });

  it('with ascii, escapes every character past printable ASCII and keeps the same JSON value', () => {
    const ctx = testContext({ shardingParameter: '北京 😀 "quoted"\n\u007f', jobParameter: 'café' });
    const ascii = shardingContextJson(ctx, { ascii: true });
    expect(ascii).toMatch(/^[\x20-\x7e]*$/);
    expect(ascii).toContain('\\u5317\\u4eac \\ud83d\\ude00 \\"quoted\\"\\n\\u007f');
    expect(JSON.parse(ascii)).toEqual(JSON.parse(shardingContextJson(ctx)));
    expect(JSON.parse(ascii).shardingParameter).toBe('北京 😀 "quoted"\n\u007f');
  });
});
