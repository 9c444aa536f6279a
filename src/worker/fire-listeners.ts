/**
 * Once-per-fire listeners (DESIGN.md "Job types contract"): `beforeFire` runs once per fire before
 * its first item starts, `afterFire` once per fire after every item ended or was given up, across
 * every item and instance, also when an instance dies mid-fire. ElasticJob's distributed listener
 * decides "last" from the instances' local views and runs more than once; here the decision is one
 * Lua script on the fire's state in Redis, so exactly one caller ever wins each claim.
 *
 * A fire's state (keys in redis-keys.ts, `fireStateKeys`): a hash with the `before` claim (the
 * claimer's id, then `done`) and the `after` claim, the set of the items that ended, and the
 * beforeFire claimer's lease. Only requests that carry `fireItems` (the leader adds it for jobs whose
 * config says `fireListeners`) come here: other jobs pay nothing. Design and limits:
 * docs/design-notes.md, "Once-per-fire listeners"; user guide: docs/listeners.md.
 */
import { sleepUnless } from '../shared/abort-listeners';
import type { FireContext, ResolvedJobDefinition } from '../shared/config/job-definition';
import type { Logger } from '../shared/logger';
import type { RedisClient } from '../shared/redis/redis-connection';
import type { ExecutionRequest } from '../shared/registry/execution-request';
import { fireStateKeys, type FireStateKeys } from '../shared/registry/redis-keys';
import { sleep } from '../shared/zk/backoff';

/**
 * KEYS: state, lease. ARGV: instanceId, leaseMs, ttlMs, items. Claims beforeFire for the caller
 * unless someone did: `claimed`, `done` (it ran), `wait` (it runs: the claimer's lease lives) or
 * `orphaned` (its claimer died while it ran: it is not run again).
 */
const BEGIN = `
local before = redis.call('HGET', KEYS[1], 'before')
if before == 'done' then return 'done' end
if before then
  if redis.call('EXISTS', KEYS[2]) == 1 then return 'wait' end
  return 'orphaned'
end
redis.call('HSET', KEYS[1], 'before', ARGV[1], 'items', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return 'claimed'`;

/** KEYS: state, lease. ARGV: instanceId, leaseMs. Renews the claimer's lease while it is still the claimer's. */
const RENEW = `
if redis.call('GET', KEYS[2]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
return 0`;

/** KEYS: state, lease. beforeFire returned: the waiters may go. */
const BEFORE_DONE = `
redis.call('HSET', KEYS[1], 'before', 'done')
redis.call('DEL', KEYS[2])
return 1`;

/**
 * KEYS: state, ended. ARGV: item, items, instanceId, ttlMs, doneTtlMs. Counts the item ended
 * (idempotent: a set) and returns 1 to the one caller whose item completes the fire, who runs
 * afterFire; the set then goes, and the claim stays for doneTtlMs so a late duplicate claims nothing.
 */
const END = `
if redis.call('HEXISTS', KEYS[1], 'after') == 1 then return 0 end
redis.call('SADD', KEYS[2], ARGV[1])
if redis.call('SCARD', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'items', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  return 0
end
redis.call('HSET', KEYS[1], 'after', ARGV[3], 'items', ARGV[2])
redis.call('DEL', KEYS[2])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1`;

/** Timings of the fire state; the defaults suit production, tests shorten them. */
export interface FireListenerTimings {
  /** The beforeFire claimer's lease, renewed every third of it while its listener runs: how long waiters wait for a claimer that died. */
  leaseMs: number;
  /** The longest pause between two looks of a waiter at the fire's state (it starts at 2 ms and doubles). */
  maxPollMs: number;
  /** Life of a fire's state while items are still to end, renewed with every item. */
  ttlMs: number;
  /** Life of a fire's state once afterFire was claimed: a duplicate of one of its requests meanwhile claims nothing. */
  doneTtlMs: number;
}

export const DEFAULT_FIRE_LISTENER_TIMINGS: Readonly<FireListenerTimings> = Object.freeze({
  leaseMs: 5_000,
  maxPollMs: 100,
  ttlMs: 24 * 3_600_000,
  doneTtlMs: 3_600_000,
});

/** What the fire listeners need of the worker. */
export interface FireListenersContext {
  namespace: string;
  instanceId: string;
  /** The worker's Redis connection (undefined before it started). */
  redis(): RedisClient | undefined;
  /** Aborted when every execution must stop: a waiter for beforeFire gives up its request then. */
  abortSignal(): AbortSignal;
  log: Logger;
  timings?: Partial<FireListenerTimings>;
}

/** Attempts at counting an item ended while Redis does not answer: an item not counted keeps afterFire from running. */
const END_ATTEMPTS = 4;

/** Runs the once-per-fire listeners of the fires whose requests this worker takes. */
export class FireListeners {
  private readonly timings: FireListenerTimings;
  /** Each fire's gate being passed on this instance: its other requests wait on the same look. */
  private readonly gates = new Map<string, Promise<boolean>>();
  /** Warnings already given, once per job: listeners in code with no `fireItems` on requests (`job`), a fire ended with no afterFire in code (`job|after`). */
  private readonly warned = new Set<string>();

  constructor(private readonly ctx: FireListenersContext) {
    this.timings = { ...DEFAULT_FIRE_LISTENER_TIMINGS, ...ctx.timings };
  }

  /**
   * Before a request's own run: passes once beforeFire of its fire ran (here, if this call claimed
   * it, or elsewhere), or its claimer died while it ran. False when the worker stopped meanwhile:
   * the request did not run and goes back to its queue. Only jobs whose code has beforeFire wait.
   */
  beforeItem(definition: ResolvedJobDefinition, request: ExecutionRequest): Promise<boolean> {
    if (!definition.listeners.beforeFire) return Promise.resolve(true);
    const key = `${request.job}|${request.fireTime}`;
    let gate = this.gates.get(key);
    if (!gate) {
      gate = this.passGate(definition, request).finally(() => this.gates.delete(key));
      this.gates.set(key, gate);
    }
    return gate;
  }

  /**
   * The request's item ended for its fire (completed, failed, timed out, skipped, or given up): counts
   * it, and runs afterFire when it was the fire's last. Never throws; a listener's error is logged.
   */
  async itemEnded(definition: ResolvedJobDefinition | undefined, request: ExecutionRequest): Promise<void> {
    const items = request.fireItems;
    if (items === undefined) return;
    const keys = fireStateKeys(this.ctx.namespace, request.job, request.fireTime);
    const { ttlMs, doneTtlMs } = this.timings;
    let last = false;
    for (let attempt = 1; ; attempt += 1) {
      try {
        last = (await this.eval(END, [keys.state, keys.ended], [request.item, items, this.ctx.instanceId, ttlMs, doneTtlMs])) === 1;
        break;
      } catch (err) {
        if (attempt >= END_ATTEMPTS) {
          this.ctx.log.error({ err, job: request.job, fireTime: request.fireTime, item: request.item }, 'could not count the item ended for its fire; afterFire of this fire will not run');
          return;
        }
        await sleep(100 * 2 ** attempt);
      }
    }
    if (!last) return;
    const afterFire = definition?.listeners.afterFire;
    if (!afterFire) {
      // A job with only beforeFire ends its fires too; code with no fire listener at all is another version's.
      if (!definition?.listeners.beforeFire && !this.warned.has(`${request.job}|after`)) {
        this.warned.add(`${request.job}|after`);
        this.ctx.log.warn(
          { job: request.job, fireTime: request.fireTime },
          'this instance ended a fire of a job whose stored config says fireListeners, but its code has no afterFire listener (another version of the job, or listeners removed without overwrite: true); not run (said once per job)',
        );
      }
      return;
    }
    await callListener(() => afterFire(this.fireContext(request, items)), this.ctx.log, 'afterFire');
  }

  /** Tells once per job that the job's code has fire listeners the stored config does not announce. */
  warnUnannounced(definition: ResolvedJobDefinition): void {
    if (this.warned.has(definition.name)) return;
    this.warned.add(definition.name);
    this.ctx.log.warn(
      { job: definition.name },
      'the job has beforeFire/afterFire listeners but its requests do not say their fire\'s size (its stored config lacked fireListeners when the leader dispatched them, or the leader runs an older shardcron): the listeners do not run for those fires (said once per job)',
    );
  }

  private async passGate(definition: ResolvedJobDefinition, request: ExecutionRequest): Promise<boolean> {
    const keys = fireStateKeys(this.ctx.namespace, request.job, request.fireTime);
    const { leaseMs, ttlMs, maxPollMs } = this.timings;
    const begin = async () => String(await this.eval(BEGIN, [keys.state, keys.lease], [this.ctx.instanceId, leaseMs, ttlMs, request.fireItems ?? 0]));
    const signal = this.ctx.abortSignal();
    try {
      let state = await begin();
      if (state === 'claimed') {
        await this.runBeforeFire(definition, request, keys);
        return true;
      }
      for (let pollMs = 2; state === 'wait'; pollMs = Math.min(maxPollMs, pollMs * 2)) {
        if (!(await sleepUnless(pollMs, signal))) return false;
        state = await begin();
      }
      if (state === 'orphaned') this.ctx.log.warn({ job: request.job, fireTime: request.fireTime }, 'the instance running beforeFire died before it returned; the fire goes on without waiting for it');
      return true;
    } catch (err) {
      // Redis does not answer: the item runs (BullMQ needs the same Redis to complete it anyway).
      this.ctx.log.error({ err, job: request.job, fireTime: request.fireTime }, 'could not read or claim beforeFire of the fire; the item runs without waiting for it');
      return true;
    }
  }

  private async runBeforeFire(definition: ResolvedJobDefinition, request: ExecutionRequest, keys: FireStateKeys): Promise<void> {
    const { leaseMs } = this.timings;
    const renew = setInterval(() => {
      this.eval(RENEW, [keys.state, keys.lease], [this.ctx.instanceId, leaseMs]).catch((err: unknown) => this.ctx.log.warn({ err, job: request.job }, 'could not renew the beforeFire lease'));
    }, Math.max(1, Math.floor(leaseMs / 3)));
    renew.unref();
    try {
      await callListener(() => definition.listeners.beforeFire!(this.fireContext(request, request.fireItems ?? 0)), this.ctx.log, 'beforeFire');
    } finally {
      clearInterval(renew);
    }
    await this.eval(BEFORE_DONE, [keys.state, keys.lease], []);
  }

  private fireContext(request: ExecutionRequest, items: number): FireContext {
    return {
      jobName: request.job,
      fireTime: request.fireTime,
      source: request.source,
      shardingTotalCount: items,
      instanceId: this.ctx.instanceId,
      log: this.ctx.log.child({ job: request.job, fireTime: request.fireTime }),
    };
  }

  private eval(script: string, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown> {
    const redis = this.ctx.redis();
    if (!redis) return Promise.reject(new Error('the worker has no Redis connection yet'));
    return redis.eval(script, keys.length, ...keys, ...args);
  }
}

async function callListener(fn: () => unknown, log: Logger, name: string): Promise<void> {
  try {
    await fn();
  } catch (err) {
    log.error({ err, listener: name }, 'fire listener threw; ignored');
  }
}


