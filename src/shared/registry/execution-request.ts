import { z } from 'zod';

/** Why an execution happens (ElasticJob's execution sources, plus TRIGGER for manual runs). */
export const ExecutionSources = ['NORMAL', 'MISFIRE', 'FAILOVER', 'TRIGGER'] as const;
export type ExecutionSource = (typeof ExecutionSources)[number];

/**
 * One BullMQ job on an instance's queue = one request to execute one item of one fire.
 * `epoch` is the dispatching leader's epoch, kept for diagnosing split-brain questions.
 */
export const executionRequestSchema = z.object({
  job: z.string().min(1),
  item: z.number().int().nonnegative(),
  fireTime: z.number().int().nonnegative(),
  source: z.enum(ExecutionSources),
  epoch: z.number().int().nonnegative(),
  /** For FAILOVER: the instance the item was taken from. */
  from: z.string().optional(),
  /**
   * A fire the leader dispatched late because no leader could dispatch it in time (a takeover, a
   * suspension), or replayed from a dead leader's ledger: owed work, which waits for its item
   * whoever holds it and runs as catch-up work (docs/design-notes.md, "Failover and catch-up").
   */
  catchUp: z.literal(true).optional(),
  /**
   * Set by a worker on a request that waited for its item behind catch-up work: it waits no longer
   * than until its job's next fire, and its run is catch-up work too.
   */
  waited: z.literal(true).optional(),
  /**
   * FAILOVER: the fire of the same item moved with this one just before it. The target runs the
   * item's stranded fires in fire order: this request lets that one go first once it has arrived
   * (consumers may take them in any order), waiting at most a couple of seconds for it.
   */
  after: z.number().int().nonnegative().optional(),
  /**
   * Set when the job has once-per-fire listeners (its config's `fireListeners`): how many items the
   * fire dispatched. The workers count each item of the fire once when it ends (src/worker/fire-listeners.ts);
   * the one whose count completes the fire runs `afterFire`. Kept by every move of the request.
   */
  fireItems: z.number().int().positive().optional(),
  /**
   * The item will not run for this fire (its instance was lost and the job has failover off): the
   * worker that takes this request only counts the item as ended for the fire, so `afterFire` still runs.
   */
  givenUp: z.literal(true).optional(),
});

export type ExecutionRequest = z.output<typeof executionRequestSchema>;

/**
 * Deterministic BullMQ job id, so that a replayed dispatch is a no-op (BullMQ ignores an add
 * whose id exists). Failover requests get their own id (suffixed with the dead instance), since
 * they run the same (job, fire, item) again on purpose. BullMQ forbids ':' in ids.
 */
export function executionJobId(request: Pick<ExecutionRequest, 'job' | 'fireTime' | 'item' | 'source' | 'from'>): string {
  const base = `${request.job}|${request.fireTime}|${request.item}`;
  const id = request.source === 'FAILOVER' ? `${base}|failover|${request.from ?? ''}` : request.source === 'NORMAL' ? base : `${base}|${request.source.toLowerCase()}`;
  return id.replace(/:/g, '_');
}
