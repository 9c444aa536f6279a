/**
 * Execution policies every job type has (DESIGN.md "Job types contract"): a timeout per attempt, a
 * retry policy (attempts of one execution on the same instance, the item's lock kept throughout),
 * and an error handler given as data (a function lives in the job's code, see job-definition.ts).
 */
import { z } from 'zod';
import { expectedValue, integerField, isRecord, withUnknownFieldsRejected } from './job-config-fields';

/** Longest delay a Node timer honours (2^31-1 ms); a longer one would fire at once. */
const MAX_TIMER_MS = 2_147_483_647;
/** Most attempts of one execution. */
export const MAX_RETRY_ATTEMPTS = 100;

/** Attempts of one execution and the back-off between them: `backoffMs`, then times `backoffFactor` each time. */
export interface RetryPolicy {
  /** All attempts, the first included: 1 (no retry) to 100. */
  readonly attempts: number;
  /** Wait before the second attempt, in ms (0 to 2^31-1). Default 1000. */
  readonly backoffMs: number;
  /** Each next wait is the previous one times this, 1 to 10. Default 1 (constant back-off). */
  readonly backoffFactor: number;
}

/** A retry policy as given: `attempts` required, the back-off defaulted. */
export type RetryPolicyInput = Pick<RetryPolicy, 'attempts'> & Partial<Omit<RetryPolicy, 'attempts'>>;

/** An error handler as data: log it (the default), throw it, drop it, or POST it to a webhook. */
export type StoredErrorHandler = 'LOG' | 'THROW' | 'IGNORE' | { readonly webhook: string; readonly timeoutMs?: number };

export const ERROR_HANDLER_NAMES = Object.freeze(['LOG', 'THROW', 'IGNORE'] as const);

export const timeoutField = integerField(`a positive integer of milliseconds, at most ${MAX_TIMER_MS}`, (n) => n >= 1 && n <= MAX_TIMER_MS);

const retryShape = {
  attempts: integerField(`an integer from 1 (no retry) to ${MAX_RETRY_ATTEMPTS}: every attempt, the first included`, (n) => n >= 1 && n <= MAX_RETRY_ATTEMPTS),
  backoffMs: integerField(`a whole number of milliseconds from 0 to ${MAX_TIMER_MS}`, (n) => n >= 0 && n <= MAX_TIMER_MS).default(1_000),
  backoffFactor: z
    .number({ error: expectedValue('a number from 1 to 10') })
    .superRefine((n, ctx) => {
      if (!(n >= 1 && n <= 10)) ctx.addIssue({ code: 'custom', message: `${n} is out of range; expected a number from 1 to 10` });
    })
    .default(1),
};

export const retryField = withUnknownFieldsRejected(
  z.looseObject(retryShape, { error: expectedValue('an object { attempts, backoffMs?, backoffFactor? }') }),
  Object.keys(retryShape),
);

/** A webhook URL: http or https. */
const webhookUrl = z.string({ error: expectedValue('an http(s) URL') }).superRefine((url, ctx) => {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    // reported below
  }
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) ctx.addIssue({ code: 'custom', message: 'is not an http(s) URL' });
});

const webhookShape = { webhook: webhookUrl, timeoutMs: timeoutField.optional() };

export const storedErrorHandlerField = z.union(
  [z.enum(ERROR_HANDLER_NAMES), withUnknownFieldsRejected(z.looseObject(webhookShape), Object.keys(webhookShape))],
  {
    error: (issue) =>
      isRecord(issue.input) ? 'expected { webhook: "https://..." , timeoutMs? }' : `expected 'LOG', 'THROW', 'IGNORE' or { webhook: url }`,
  },
);

/** The wait before attempt `attempt` (2, 3, ...) of `retry`. */
export function backoffBefore(retry: RetryPolicy, attempt: number): number {
  return Math.min(MAX_TIMER_MS, Math.round(retry.backoffMs * retry.backoffFactor ** (attempt - 2)));
}
