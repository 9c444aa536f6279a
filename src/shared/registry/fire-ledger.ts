import { z } from 'zod';
import { jsonCodec } from '../codec';
import { ExecutionSources } from './execution-request';

/**
 * The dispatch ledger `/{job}/leader/fire`: what the leader decided for a job's latest fire,
 * written (fenced) before the requests are enqueued. A new leader replays it to the same queues;
 * deterministic job ids make the replay a no-op for requests that were already enqueued.
 */
export const fireLedgerSchema = z.object({
  fireTime: z.number().int().nonnegative(),
  epoch: z.number().int().nonnegative(),
  source: z.enum(ExecutionSources),
  /** instanceId -> items it runs for this fire (disabled items excluded). */
  assignment: z.record(z.string(), z.array(z.number().int().nonnegative())),
  /** instanceId -> its queue at dispatch time. */
  queues: z.record(z.string(), z.string()),
});

export type FireLedger = z.output<typeof fireLedgerSchema>;

export const fireLedgerCodec = jsonCodec(fireLedgerSchema, 'fire ledger');

/**
 * The durable failover intent `/{job}/leader/failover/items/{i}`, written (fenced) before the
 * item's requests are moved and deleted once they are enqueued. It names the chosen target, so a
 * new leader that finds it replays to the same queue, where the deterministic job id dedupes it.
 */
export const failoverIntentSchema = z.object({
  /** The lost (or draining) instance the item is taken from. */
  from: z.string().min(1),
  /** Latest fire time among the moves (what the console shows). */
  fireTime: z.number().int().nonnegative(),
  moves: z
    .array(
      z.object({
        fireTime: z.number().int().nonnegative(),
        /** Source of the original request. */
        source: z.enum(ExecutionSources),
        target: z.string().min(1),
        queue: z.string().min(1),
        /** The original request's {@link ExecutionRequest.fireItems} (once-per-fire listeners). */
        fireItems: z.number().int().positive().optional(),
      }),
    )
    .min(1),
});

export type FailoverIntent = z.output<typeof failoverIntentSchema>;

export const failoverIntentCodec = jsonCodec(failoverIntentSchema, 'failover intent');
