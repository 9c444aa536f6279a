import { z } from 'zod';
import { ExecutionSources } from './execution-request';

/** How one execution ended, as the history and the console report it. */
export const ExecutionRecordStatuses = ['completed', 'failed', 'aborted', 'skipped', 'timeout'] as const;
export type ExecutionRecordStatus = (typeof ExecutionRecordStatuses)[number];

/** Most bytes (UTF-8) of an error's name and message together kept in a record: 4 KB, as DESIGN.md says. */
export const RECORD_ERROR_MAX_BYTES = 4_096;
/** Most characters of an error's name kept (the rest of the 4 KB is the message's). */
const RECORD_ERROR_NAME_MAX_CHARS = 200;

/**
 * One execution of one item of one fire on one instance, as kept in the history (the recent list in
 * Redis, ElasticJob's traces in PostgreSQL) and answered by `GET /api/jobs/:name/executions`
 * (DESIGN.md "Console contract": keep these field names).
 */
export const executionRecordSchema = z.object({
  job: z.string().min(1),
  item: z.number().int().nonnegative(),
  fireTime: z.number().int().nonnegative(),
  source: z.enum(ExecutionSources),
  instanceId: z.string().min(1),
  status: z.enum(ExecutionRecordStatuses),
  /** Attempts made (retry policy); 1 without retries, 0 for a skipped execution. */
  attempts: z.number().int().nonnegative(),
  startedAt: z.number().int().nonnegative(),
  finishedAt: z.number().int().nonnegative(),
  durationMs: z.number().int().nonnegative(),
  error: z.object({ name: z.string(), message: z.string() }).optional(),
  /** Why it ended so when it is not the handler's doing (skipped, aborted). */
  reason: z.string().optional(),
  /** DATAFLOW: records processed and failed. */
  processed: z.number().int().nonnegative().optional(),
  failed: z.number().int().nonnegative().optional(),
  /** SCRIPT: the exit code; HTTP: the status code. */
  exitCode: z.number().int().optional(),
  httpStatus: z.number().int().optional(),
});

export type ExecutionRecord = z.output<typeof executionRecordSchema>;

/**
 * `{ name, message }` of what a handler threw, bounded to {@link RECORD_ERROR_MAX_BYTES} of UTF-8 in
 * all (a message of non-ASCII text counted in characters could take three times that). A message
 * cut short ends with `...`, cut on a character's boundary.
 */
export function recordError(error: unknown): { name: string; message: string } {
  const name = (error instanceof Error ? error.name : typeof error).slice(0, RECORD_ERROR_NAME_MAX_CHARS);
  const message = error instanceof Error ? error.message : String(error);
  const room = RECORD_ERROR_MAX_BYTES - Buffer.byteLength(name);
  // At most 4 bytes per character: a message this short fits without measuring it.
  if (message.length * 4 <= room) return { name, message };
  const bytes = Buffer.from(message);
  if (bytes.length <= room) return { name, message };
  let end = room - 3;
  // Back to the first byte of a character (UTF-8 continuation bytes are 10xxxxxx).
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end -= 1;
  return { name, message: `${bytes.subarray(0, end).toString('utf8')}...` };
}
