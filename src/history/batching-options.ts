import { z } from 'zod';
import type { BatchingOptions } from './batch-writer';

/**
 * The zod schema of a writer's `batching` options with that writer's defaults: every field is
 * optional, and a batch may not be larger than the buffer it is taken from.
 */
export function batchingSchema(defaults: Omit<BatchingOptions, 'retryBaseMs'> & { retryBaseMs?: number }) {
  const { retryBaseMs = 100 } = defaults;
  return z
    .object({
      maxBuffered: z.number().int().min(1).max(10_000_000).default(defaults.maxBuffered),
      batchSize: z.number().int().min(1).max(100_000).default(defaults.batchSize),
      flushIntervalMs: z.number().int().min(0).max(60_000).default(defaults.flushIntervalMs),
      retryBaseMs: z.number().int().min(1).max(60_000).default(retryBaseMs),
      retryMaxMs: z.number().int().min(1).max(600_000).default(defaults.retryMaxMs),
      closeTimeoutMs: z.number().int().min(0).max(600_000).default(defaults.closeTimeoutMs),
    })
    .refine((o) => o.batchSize <= o.maxBuffered, { path: ['batchSize'], message: 'must not exceed maxBuffered' })
    .refine((o) => o.retryBaseMs <= o.retryMaxMs, { path: ['retryMaxMs'], message: 'must not be less than retryBaseMs' })
    .prefault({});
}
