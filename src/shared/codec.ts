import type { z } from 'zod';
import { ConfigError, ErrorCodes, ShardcronError } from './errors';
import { toFieldIssues } from './validation';

/** Encodes values to ZooKeeper bytes and decodes them back, validating with a zod schema. */
export interface JsonCodec<T> {
  encode(value: T): Buffer;
  /** Throws CORRUPT_DATA naming `where` (a ZooKeeper path) and every bad field. */
  decode(data: Buffer, where: string): T;
}

/**
 * Data read back from ZooKeeper may have been written by hand, by another tool or by another
 * version, so every read goes through a schema (STYLE.md: validate every value read back).
 */
export function jsonCodec<S extends z.ZodType>(schema: S, what: string): JsonCodec<z.output<S>> {
  return {
    encode: (value) => Buffer.from(JSON.stringify(value), 'utf8'),
    decode(data, where) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(data.toString('utf8'));
      } catch (err) {
        throw new ShardcronError(
          ErrorCodes.CORRUPT_DATA,
          `Corrupt ${what} at ${where}: not valid JSON (${(err as Error).message})`,
          { path: where },
        );
      }
      const result = schema.safeParse(parsed);
      if (!result.success) {
        throw new ConfigError(ErrorCodes.CORRUPT_DATA, `Corrupt ${what} at ${where}`, toFieldIssues(result.error), { path: where });
      }
      return result.data;
    },
  };
}
