/**
 * The console's error answers (DESIGN.md "Console contract"): `{ error: { code, message, details } }`
 * with 400 for a bad body or query (`details.fields` names every bad field), 401 without a valid
 * token, 403 for a read-only token on a write, 404 for an unknown job, item or instance, 409 for a
 * conflict; anything unexpected is a 500 whose message does not leak internals.
 */
import type { FastifyReply } from 'fastify';
import type { z } from 'zod';
import { ConfigError, ErrorCodes, ShardcronError, type FieldIssue } from '../shared/errors';
import type { Logger } from '../shared/logger';
import { toFieldIssues } from '../shared/validation';

/** Codes of answers the console makes itself (the admin layer's come as ShardcronError codes). */
export const HttpCodes = Object.freeze({
  UNAUTHORIZED: 'SHARDCRON_UNAUTHORIZED',
  FORBIDDEN: 'SHARDCRON_FORBIDDEN',
  BAD_REQUEST: 'SHARDCRON_BAD_REQUEST',
  NOT_FOUND: 'SHARDCRON_NOT_FOUND',
  UNAVAILABLE: 'SHARDCRON_UNAVAILABLE',
  INTERNAL: 'SHARDCRON_INTERNAL',
} as const);

/** An error with the HTTP status the console answers it with. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

/** A 400 naming every bad field of `what` (a body, a query, a path parameter). */
export function badRequest(what: string, fields: FieldIssue[]): HttpError {
  return new HttpError(400, HttpCodes.BAD_REQUEST, `Invalid ${what}: ${fields.map((f) => `${f.field}: ${f.message}`).join('; ')}`, { fields });
}

/** Parses `value` with `schema`, or throws a 400 naming every bad field. */
export function parseInput<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw badRequest(what, toFieldIssues(result.error));
  return result.data;
}

const STATUS_BY_CODE: Readonly<Record<string, number>> = {
  [ErrorCodes.INVALID_CONFIG]: 400,
  [ErrorCodes.INVALID_CRON]: 400,
  [ErrorCodes.INVALID_ITEM_PARAMETERS]: 400,
  [ErrorCodes.UNKNOWN_STRATEGY]: 400,
  SHARDCRON_JOB_NOT_FOUND: 404,
  SHARDCRON_NOT_FOUND: 404,
  SHARDCRON_JOB_DISABLED: 409,
  SHARDCRON_CONFLICT: 409,
  SHARDCRON_JOB_EXISTS: 409,
  // Data read back from ZooKeeper or Redis that fails its check: the server's state, not the
  // request, is at fault; the message (and a config's fields) say what is wrong, as at start.
  [ErrorCodes.CORRUPT_DATA]: 500,
};

/** The status and body an error is answered with. */
export function errorAnswer(err: unknown): { status: number; body: { error: { code: string; message: string; details?: Record<string, unknown> } } } {
  if (err instanceof HttpError) return { status: err.status, body: { error: { code: err.code, message: err.message, ...(err.details && { details: err.details }) } } };
  if (err instanceof ConfigError) {
    const status = STATUS_BY_CODE[err.code] ?? 400;
    return { status, body: { error: { code: err.code, message: err.message, details: { fields: err.issues } } } };
  }
  if (err instanceof ShardcronError && STATUS_BY_CODE[err.code] !== undefined) {
    const { issues: _issues, ...details } = err.details as Record<string, unknown>;
    return { status: STATUS_BY_CODE[err.code], body: { error: { code: err.code, message: err.message, ...(Object.keys(details).length > 0 && { details }) } } };
  }
  // fastify's own: a body that is not JSON, a body too large, a content type it cannot read.
  const fastifyError = err as { statusCode?: number; code?: string; message?: string };
  if (typeof fastifyError.statusCode === 'number' && fastifyError.statusCode >= 400 && fastifyError.statusCode < 500) {
    return { status: fastifyError.statusCode, body: { error: { code: HttpCodes.BAD_REQUEST, message: fastifyError.message ?? 'bad request', details: { fields: [{ field: '(body)', message: fastifyError.message ?? '' }] } } } };
  }
  return { status: 500, body: { error: { code: HttpCodes.INTERNAL, message: 'internal error (see the console\'s log)' } } };
}

/** Answers `err` on `reply`; 5xx are logged with the error. */
export function sendError(reply: FastifyReply, err: unknown, log: Logger): FastifyReply {
  const { status, body } = errorAnswer(err);
  if (status >= 500) log.error({ err, url: reply.request.url, method: reply.request.method }, 'console request failed');
  return reply.code(status).type('application/json').send(body);
}
