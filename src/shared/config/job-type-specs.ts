/**
 * The parts of a job definition that belong to one job type (DESIGN.md "Job types contract"):
 * SCRIPT's `script` and HTTP's `http` (pure data: stored in ZooKeeper, creatable by API), DATAFLOW's
 * code fields, and the JSON of a ShardingContext that SCRIPT and HTTP jobs receive.
 *
 * Each schema names every bad field (`script.command.1: is empty ...`) and rejects unknown fields
 * with a did-you-mean, as defineJob does: a misspelt `timeoutMS` would otherwise run a script with
 * no timeout at all. A stored config read back by an older version may want to drop unknown fields
 * instead; the shapes are exported for that (`z.object(scriptSpecShape)`).
 */
import { validateHeaderName, validateHeaderValue } from 'node:http';
import { z } from 'zod';
import type { ShardingContext } from './job-definition';
import { expectedValue, withUnknownFieldsRejected } from './job-config-fields';

/** Longest delay a Node timer honours (2^31-1 ms, about 24.8 days); a longer one fires at once. */
export const MAX_TIMER_MS = 2_147_483_647;

/** Environment variable that carries the ShardingContext JSON to a SCRIPT job. */
export const SHARDING_CONTEXT_ENV = 'SHARDCRON_SHARDING_CONTEXT';

/** Request header that carries the ShardingContext JSON to an HTTP job (ElasticJob's name). */
export const SHARDING_CONTEXT_HEADER = 'shardingContext';

const quote = (value: string): string => JSON.stringify(value.length > 140 ? `${value.slice(0, 140)}...` : value);

const NUL_MESSAGE = 'contains a NUL character, which no argument, path or environment value can carry';

function wholeMs(expected: string) {
  return z.number({ error: expectedValue(expected) }).superRefine((n, ctx) => {
    if (!Number.isInteger(n)) ctx.addIssue({ code: 'custom', message: `${n} is not a whole number of ms; expected ${expected}` });
    else if (n < 1 || n > MAX_TIMER_MS) ctx.addIssue({ code: 'custom', message: `${n} is out of range; expected ${expected}` });
  });
}

const positiveMs = `a positive integer of milliseconds, at most ${MAX_TIMER_MS}`;

/**
 * An object of string values whose keys pass `checkKey` (which returns a problem or undefined).
 * Each bad key or value is reported under its own name.
 */
function stringMap(expected: string, checkKey: (key: string) => string | undefined, checkValue: (key: string, value: string) => string | undefined) {
  return z.record(z.string(), z.string({ error: expectedValue('a string') }), { error: expectedValue(expected) }).superRefine(
    (map, ctx) => {
      for (const [key, value] of Object.entries(map)) {
        const problem = checkKey(key) ?? (typeof value === 'string' ? checkValue(key, value) : undefined);
        if (problem) ctx.addIssue({ code: 'custom', path: [key], message: problem });
      }
    },
    // Also when a value is not a string (reported by the record itself), so every bad key is listed at once.
    { when: (payload) => typeof payload.value === 'object' && payload.value !== null && !Array.isArray(payload.value) },
  );
}

// -------------------------------------------------------------------------------------------------
// SCRIPT

/** SCRIPT's `script` field as given: a program and its arguments, run without a shell. */
export interface ScriptSpecInput {
  /** `[program, ...args]`; the ShardingContext JSON is appended as the last argument. Non-empty, no empty string. */
  readonly command: readonly string[];
  /** Added to the worker's environment (with {@link SHARDING_CONTEXT_ENV}, which it may not set). */
  readonly env?: Readonly<Record<string, string>>;
  /** Working directory; default the worker's. */
  readonly cwd?: string;
  /** Kill the script's whole process group after this many ms. Default: none (the job's own timeoutMs still applies). */
  readonly timeoutMs?: number;
}

/** A validated `script` field. */
export type ScriptSpec = ScriptSpecInput;

const commandArgument = z
  .string({ error: expectedValue('a string') })
  .min(1, { error: 'is empty: give the program (command[0]) or an argument, or leave it out' })
  .refine((arg) => !arg.includes('\0'), { error: NUL_MESSAGE });

/** Field schemas of {@link ScriptSpecInput}. */
export const scriptSpecShape = {
  command: z
    .array(commandArgument, { error: expectedValue('an array such as ["/usr/local/bin/backup", "--full"]: the program, then its arguments') })
    .min(1, { error: 'is empty: expected the program to run, then its arguments, such as ["/usr/local/bin/backup", "--full"]' }),
  env: stringMap(
    'an object of NAME: "value" strings',
    (key) => {
      if (key === '' || key.includes('=') || key.includes('\0')) return `${quote(key)} is not an environment variable name: it must be non-empty, without "=" or NUL`;
      if (key === SHARDING_CONTEXT_ENV) return `is set by shardcron to the ShardingContext JSON; use another name`;
      return undefined;
    },
    (_key, value) => (value.includes('\0') ? NUL_MESSAGE : undefined),
  ).optional(),
  cwd: z
    .string({ error: expectedValue('a directory path') })
    .min(1, { error: 'is empty: give a directory, or leave cwd out to run in the worker\'s directory' })
    .refine((dir) => !dir.includes('\0'), { error: NUL_MESSAGE })
    .optional(),
  timeoutMs: wholeMs(positiveMs).optional(),
};

/** Schema of SCRIPT's `script` field; unknown fields are refused by name. */
export const scriptSpecSchema = withUnknownFieldsRejected(
  z.looseObject(scriptSpecShape, { error: expectedValue('an object { command: string[], env?, cwd?, timeoutMs? }') }),
  Object.keys(scriptSpecShape),
) as unknown as z.ZodType<ScriptSpec, ScriptSpecInput>;

// -------------------------------------------------------------------------------------------------
// HTTP

/** Methods an HTTP job may use. */
export const HTTP_METHODS = Object.freeze(['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const);
/** One of {@link HTTP_METHODS}. */
export type HttpMethod = (typeof HTTP_METHODS)[number];

/** Defaults of HTTP's timeouts, in ms. */
export const HTTP_DEFAULTS = Object.freeze({ method: 'GET' as HttpMethod, connectTimeoutMs: 3000, readTimeoutMs: 5000 });

/** HTTP's `http` field as given: one request per item; a 2xx status is success. */
export interface HttpSpecInput {
  /** An `http:` or `https:` URL. */
  readonly url: string;
  /** Default `'GET'`. */
  readonly method?: HttpMethod;
  /** Request headers; `shardingContext` and `content-length` are set by shardcron. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Request body, sent as UTF-8. */
  readonly body?: string;
  /** Longest wait for the connection (name lookup included). Default 3000. */
  readonly connectTimeoutMs?: number;
  /** Longest wait for the response, and between two pieces of it, once connected. Default 5000. */
  readonly readTimeoutMs?: number;
}

/** A validated `http` field, defaults applied. */
export interface HttpSpec extends HttpSpecInput {
  readonly method: HttpMethod;
  readonly connectTimeoutMs: number;
  readonly readTimeoutMs: number;
}

/** Headers shardcron sets itself (lower case). */
const RESERVED_HEADERS = new Map([
  [SHARDING_CONTEXT_HEADER.toLowerCase(), 'is set by shardcron to the ShardingContext JSON; use another name'],
  ['content-length', 'is set by shardcron from the body'],
  ['transfer-encoding', 'is set by shardcron: the body is sent with a content-length'],
]);

/** Node's own check of a header name or value, as a problem text (what request() would refuse at run time). */
function headerProblem(check: () => void, what: string): string | undefined {
  try {
    check();
    return undefined;
  } catch {
    return what;
  }
}

/** Field schemas of {@link HttpSpecInput}. */
export const httpSpecShape = {
  url: z.string({ error: expectedValue('an http: or https: URL such as "https://example.org/jobs/run"') }).superRefine((url, ctx) => {
    let protocol: string;
    try {
      protocol = new URL(url).protocol;
    } catch {
      ctx.addIssue({ code: 'custom', message: `${quote(url)} is not a URL; expected an absolute http: or https: URL such as "https://example.org/jobs/run"` });
      return;
    }
    if (protocol !== 'http:' && protocol !== 'https:') {
      ctx.addIssue({ code: 'custom', message: `${quote(url)} uses ${protocol}; expected an http: or https: URL` });
    }
  }),
  method: z.enum(HTTP_METHODS, { error: expectedValue(HTTP_METHODS.join(', ')) }).default(HTTP_DEFAULTS.method),
  headers: stringMap(
    'an object of name: "value" strings',
    (name) =>
      headerProblem(() => validateHeaderName(name), `${quote(name)} is not a valid header name: expected letters, digits and !#$%&'*+-.^_\`|~`) ??
      RESERVED_HEADERS.get(name.toLowerCase()),
    (name, value) => headerProblem(() => validateHeaderValue(name, value), 'is not a valid header value: no line breaks or control characters, no character above \\u00ff'),
  ).optional(),
  body: z.string({ error: expectedValue('a string (send JSON as JSON.stringify(value))') }).optional(),
  connectTimeoutMs: wholeMs(positiveMs).default(HTTP_DEFAULTS.connectTimeoutMs),
  readTimeoutMs: wholeMs(positiveMs).default(HTTP_DEFAULTS.readTimeoutMs),
};

/** Schema of HTTP's `http` field; unknown fields are refused by name. */
export const httpSpecSchema = withUnknownFieldsRejected(
  z.looseObject(httpSpecShape, { error: expectedValue('an object { url, method?, headers?, body?, connectTimeoutMs?, readTimeoutMs? }') }),
  Object.keys(httpSpecShape),
) as unknown as z.ZodType<HttpSpec, HttpSpecInput>;

// -------------------------------------------------------------------------------------------------
// DATAFLOW

/** Fetches the next records of the item; nothing (an empty array, null or undefined) ends a streaming run. */
export type FetchDataFunction<T = unknown> = (ctx: ShardingContext) => readonly T[] | null | undefined | Promise<readonly T[] | null | undefined>;

/** Processes some of the records fetched; throwing or rejecting counts all of them as failed. */
export type ProcessDataFunction<T = unknown> = (ctx: ShardingContext, items: T[]) => void | Promise<void>;

/** Upper limit of `processConcurrency`. */
export const MAX_PROCESS_CONCURRENCY = 64;

/** Defaults of DATAFLOW's settings. */
export const DATAFLOW_DEFAULTS = Object.freeze({ streaming: false, processConcurrency: 1 });

/** DATAFLOW's fields of a job definition. */
export interface DataflowSpec<T = unknown> {
  /** Fetches records for the item. */
  fetchData(ctx: ShardingContext): ReturnType<FetchDataFunction<T>>;
  // Method syntax on purpose: its parameters are compared bivariantly, so a DataflowSpec<Order>
  // is a DataflowSpec<unknown> the executor registry can hold.
  /** Processes a chunk of the records fetched. */
  processData(ctx: ShardingContext, items: T[]): void | Promise<void>;
  /** `false` (default): fetch once. `true`: fetch again after each batch until nothing comes, a reshard is pending, or the run is aborted. */
  readonly streaming?: boolean;
  /** Chunks a fetched batch is split into, processed at once: 1..{@link MAX_PROCESS_CONCURRENCY}. Default 1. */
  readonly processConcurrency?: number;
}

const isFunction = (value: unknown): value is (...args: never[]) => unknown => typeof value === 'function';

/**
 * Field schemas of {@link DataflowSpec}, for the job definition's schema: each check runs on its own
 * (`abort: false`), so every bad field is listed at once.
 */
export const dataflowSpecShape = {
  fetchData: z.custom<FetchDataFunction>(isFunction, { abort: false, error: expectedValue('a function (ctx) => records[] | Promise<records[]>') }),
  processData: z.custom<ProcessDataFunction>(isFunction, { abort: false, error: expectedValue('a function (ctx, records) => void | Promise<void>') }),
  streaming: z.boolean({ error: expectedValue('true or false') }).default(DATAFLOW_DEFAULTS.streaming),
  processConcurrency: z
    .number({ error: expectedValue(`an integer from 1 to ${MAX_PROCESS_CONCURRENCY}`) })
    .refine((n) => Number.isInteger(n) && n >= 1 && n <= MAX_PROCESS_CONCURRENCY, {
      error: (issue) => `${String(issue.input)} is not an integer from 1 to ${MAX_PROCESS_CONCURRENCY} (MAX_PROCESS_CONCURRENCY)`,
    })
    .default(DATAFLOW_DEFAULTS.processConcurrency),
};

// -------------------------------------------------------------------------------------------------
// ShardingContext as JSON

/** The serializable fields of a ShardingContext, in the order {@link shardingContextJson} writes them. */
export const SHARDING_CONTEXT_JSON_FIELDS = Object.freeze([
  'jobName',
  'taskId',
  'shardingTotalCount',
  'jobParameter',
  'shardingItem',
  'shardingParameter',
  'fireTime',
  'source',
  'instanceId',
] as const);

/** What {@link shardingContextJson} reads of a ShardingContext. */
export type ShardingContextData = Pick<ShardingContext, (typeof SHARDING_CONTEXT_JSON_FIELDS)[number]>;

/** Options of {@link shardingContextJson}. */
export interface ShardingContextJsonOptions {
  /**
   * Escape every character outside printable ASCII as `\uXXXX` (the JSON value is the same): what
   * an HTTP header value can carry, where Node refuses characters above U+00FF and a server may read
   * the others as Latin-1.
   */
  readonly ascii?: boolean;
}

/**
 * The serializable fields of `ctx` as one JSON object (signal, log and assertOwnership left out),
 * in a fixed order: what SCRIPT jobs get as their last argument and in {@link SHARDING_CONTEXT_ENV},
 * and HTTP jobs in the {@link SHARDING_CONTEXT_HEADER} header (with `ascii: true`).
 */
export function shardingContextJson(ctx: ShardingContextData, options: ShardingContextJsonOptions = {}): string {
  const data: Record<string, unknown> = {};
  for (const field of SHARDING_CONTEXT_JSON_FIELDS) data[field] = ctx[field];
  const json = JSON.stringify(data);
  // JSON.stringify already escapes control characters and lone surrogates; DEL and up remain.
  return options.ascii ? json.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) : json;
}
