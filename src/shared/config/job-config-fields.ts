/**
 * The field schemas of a job config and the helpers that build schemas of job-shaped objects
 * (definitions, stored configs, API bodies, type specs): each field carries its own semantic check,
 * every message names what was expected and what was given, unknown fields get a did-you-mean.
 */
import { z } from 'zod';
import { isValidTimeZone } from '../cron/cron';
import { JOB_NAME_PATTERN } from '../registry/registry-paths';
import { parseShardingItemParameters } from '../sharding/sharding-item-parameters';
import { DEFAULT_SHARDING_STRATEGY, listShardingStrategies } from '../sharding/sharding-strategies';

/** Upper limit of `shardingTotalCount`: one leader tracks every item of every fire. */
export const MAX_SHARDING_TOTAL_COUNT = 1000;

/** Job types (ElasticJob's), each run by its executor (src/worker/executors). */
export const JOB_TYPES = Object.freeze(['SIMPLE', 'DATAFLOW', 'SCRIPT', 'HTTP'] as const);
/** One job type name. */
export type JobType = (typeof JOB_TYPES)[number];
/** Job types this version runs (all of them; kept for callers that list them). */
export const SUPPORTED_JOB_TYPES: readonly JobType[] = JOB_TYPES;


export const quote = (value: string): string => JSON.stringify(value.length > 140 ? `${value.slice(0, 140)}...` : value);

export function describeValue(value: unknown): string {
  if (typeof value === 'string') return quote(value);
  if (value === null || typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/** zod error map: "is required" for a missing value, else "expected X, got Y". */
export function expectedValue(what: string) {
  return (issue: { input?: unknown }): string =>
    issue.input === undefined ? `is required: expected ${what}` : `expected ${what}, got ${describeValue(issue.input)}`;
}

export function integerField(expected: string, accept: (n: number) => boolean) {
  return z.number({ error: expectedValue(expected) }).superRefine((n, ctx) => {
    if (!Number.isInteger(n)) ctx.addIssue({ code: 'custom', message: `${n} is not a whole number; expected ${expected}` });
    else if (!accept(n)) ctx.addIssue({ code: 'custom', message: `${n} is out of range; expected ${expected}` });
  });
}

export const booleanField = (fallback: boolean) => z.boolean({ error: expectedValue('true or false') }).default(fallback);
export const textField = () => z.string({ error: expectedValue('a string') }).default('');

export const nameField = z.string({ error: expectedValue('a job name') }).superRefine((name, ctx) => {
  if (!JOB_NAME_PATTERN.test(name)) {
    ctx.addIssue({
      code: 'custom',
      message: `${quote(name)} is not a valid job name: expected 1-128 characters from A-Z a-z 0-9 _ -, starting with a letter or digit`,
    });
  }
});

export const typeField = z
  .enum(JOB_TYPES, { error: (iss) => `${describeValue(iss.input)} is not a job type; expected ${JOB_TYPES.join(', ')}` })
  .default('SIMPLE');

// The expression itself is checked by the cross-field check below: it needs the time zone.
export const cronField = z
  .string({ error: expectedValue('a cron expression such as "0/5 * * * * ?", or no cron at all for a trigger-only job') })
  .superRefine((cron, ctx) => {
    if (cron.trim() === '') ctx.addIssue({ code: 'custom', message: 'is empty: omit cron for a trigger-only job, or give an expression such as "0/5 * * * * ?"' });
  })
  .optional();

export const timeZoneField = z
  .string({ error: expectedValue('an IANA time zone such as "UTC" or "Europe/Berlin"') })
  .superRefine((tz, ctx) => {
    if (!isValidTimeZone(tz)) {
      ctx.addIssue({
        code: 'custom',
        message: `${quote(tz)} is not an IANA time zone known to this runtime; expected a name such as "UTC", "Europe/Berlin" or "America/New_York" (fixed offsets: "Etc/GMT-2" is UTC+2)`,
      });
    }
  })
  .default('UTC');

export const itemParametersField = z
  .string({ error: expectedValue('a string of item=value pairs such as "0=A,1=B"') })
  .superRefine((params, ctx) => {
    try {
      parseShardingItemParameters(params);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
    }
  })
  .default('');

export const strategyField = z
  .string({ error: expectedValue('a sharding strategy name') })
  .superRefine((name, ctx) => {
    if (name === '' || listShardingStrategies().includes(name)) return;
    ctx.addIssue({
      code: 'custom',
      message: `unknown sharding strategy ${quote(name)}; known: ${listShardingStrategies().join(', ')}. Register a custom strategy with registerShardingStrategy() before defining the job or reading its config`,
    });
  })
  // ElasticJob reads an empty strategy type as its default.
  .transform((name) => (name === '' ? DEFAULT_SHARDING_STRATEGY : name))
  .default(DEFAULT_SHARDING_STRATEGY);

// Checks over a whole object run only when the fields they read are valid, so they never report a
// follow-on error, and regardless of other fields' errors, so every problem is listed at once.


export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** zod refinement options: run when the value is an object and none of `fields` has an issue. */
export function whenFieldsValid(...fields: string[]): { when: (payload: z.core.ParsePayload) => boolean } {
  return {
    when: (payload) => isRecord(payload.value) && !payload.issues.some((i) => fields.includes(String(i.path?.[0]))),
  };
}

/**
 * Did-you-mean for a mistyped field: a case-insensitive match, else the one field the key is a
 * prefix of (`jobParam`), else the closest within edit distance 2.
 */
function suggestField(key: string, known: readonly string[]): string {
  const lower = key.toLowerCase();
  const exact = known.find((k) => k.toLowerCase() === lower);
  if (exact) return ` (did you mean ${exact}?)`;
  const extensions = known.filter((k) => k.toLowerCase().startsWith(lower));
  if (lower.length >= 3 && extensions.length === 1) return ` (did you mean ${extensions[0]}?)`;
  let best: string | undefined;
  let bestDistance = 3;
  for (const k of known) {
    const d = editDistance(lower, k.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  return best ? ` (did you mean ${best}?)` : '';
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}

/**
 * Adds a check to a `z.looseObject` schema that reports every field not in `known`, by name, with
 * a did-you-mean hint (typo protection: a misspelt `shardingTotalcount` would otherwise silently
 * leave the default in place).
 */
export function withUnknownFieldsRejected<T extends z.ZodObject>(schema: T, known: readonly string[]): T {
  return schema.superRefine((value, ctx) => {
    for (const key of Object.keys(value as Record<string, unknown>).filter((k) => !known.includes(k)).sort()) {
      ctx.addIssue({ code: 'custom', path: [key], message: `unknown field${suggestField(key, known)}; known fields: ${known.join(', ')}` });
    }
  }, { when: (payload) => isRecord(payload.value) });
}
