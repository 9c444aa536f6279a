import type { z } from 'zod';
import { ConfigError, ErrorCodes, type ErrorCode, type FieldIssue } from './errors';

/** Turns zod issues into field issues; `fieldPrefix` is prepended to every path (e.g. `job "billing"`). */
export function toFieldIssues(error: z.ZodError, fieldPrefix?: string): FieldIssue[] {
  return error.issues.map((issue) => {
    const path = issue.path.map(String).join('.');
    const field = [fieldPrefix, path].filter((s) => s !== undefined && s !== '').join('.') || '(root)';
    return { field, message: issue.message };
  });
}

/**
 * Parses `value` with `schema` and returns the frozen output, or throws one {@link ConfigError}
 * that lists every invalid field. `subject` says what was being validated ("job billing").
 */
export function parseOrThrow<S extends z.ZodType>(
  schema: S,
  value: unknown,
  subject: string,
  code: ErrorCode = ErrorCodes.INVALID_CONFIG,
  details: Record<string, unknown> = {},
): Readonly<z.output<S>> {
  const result = schema.safeParse(value);
  if (!result.success) throw new ConfigError(code, `Invalid ${subject}`, toFieldIssues(result.error), details);
  const out = result.data;
  return (typeof out === 'object' && out !== null ? Object.freeze(out) : out) as Readonly<z.output<S>>;
}
