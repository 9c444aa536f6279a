import { z } from 'zod';
import { jsonCodec } from './codec';
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

/** The durable failover intent `/{job}/leader/failover/items/{i}`. */
export const failoverIntentSchema = z.object({
  fireTime: z.number().int().nonnegative(),
  /** The lost instance the item is taken from. */
  from: z.string().min(1),
  source: z.enum(ExecutionSources),
});

export type FailoverIntent = z.output<typeof failoverIntentSchema>;

export const failoverIntentCodec = jsonCodec(failoverIntentSchema, 'failover intent');
