import { z } from 'zod';
import { jsonCodec } from '../codec';
import { ExecutionSources } from './execution-request';

/**
 * `/{job}/trigger/{requestId}` (persistent): a manual trigger (DESIGN.md flow 10), written by the
 * admin layer and read by the leader. It stays until the leader has dispatched it, so a trigger
 * written just before a leader change runs on the next leader, once. Before the leader enqueues
 * its requests it writes its decision into the node (`dispatch`, fenced): a new leader that finds a
 * node with a decision replays it to the same queues, where the deterministic job ids dedupe it.
 */
export const triggerRequestSchema = z.object({
  requestId: z.string().min(1),
  /** When it was requested (epoch ms). */
  requestedAt: z.number().int().nonnegative(),
  /** Who asked, for operators (e.g. `cli`, `console`, a user name); free text. */
  requestedBy: z.string().max(200).optional(),
  /** The leader's decision, once made: the fire time its requests carry and where they went. */
  dispatch: z
    .object({
      fireTime: z.number().int().nonnegative(),
      epoch: z.number().int().nonnegative(),
      source: z.enum(ExecutionSources),
      /** instanceId -> items it runs. */
      assignment: z.record(z.string(), z.array(z.number().int().nonnegative())),
      /** instanceId -> its queue at dispatch time. */
      queues: z.record(z.string(), z.string()),
    })
    .optional(),
});

export type TriggerRequest = z.output<typeof triggerRequestSchema>;

export const triggerRequestCodec = jsonCodec(triggerRequestSchema, 'trigger request');

/**
 * The fire time a trigger's requests carry: the request time, moved off a whole second. Cron fires
 * are whole seconds (Quartz's resolution), and an item's completed fires are keyed by fire time, so
 * a trigger can never be taken for a scheduled fire that completed, nor the other way round.
 */
export function triggerFireTime(requestedAt: number): number {
  return requestedAt % 1_000 === 0 ? requestedAt + 1 : requestedAt;
}
