/**
 * A new leader's replay of a job's last fire goes on the leader's task chain, never beside a task
 * that runs there: a queue move of an instance lost meanwhile reads the queue and then obliterates
 * it, and requests a replay added in between were deleted unseen. The replays due at once still
 * start in one turn, so that they share their addBulk calls.
 */
import type { JobState } from '../../src/leader/fire-dispatcher';
import { TaskChain } from '../../src/leader/task-chain';
import { Takeover, type TakeoverDeps } from '../../src/leader/takeover';
import { silentLogger } from '../../src/shared/logger';
import type { ExecutionRequest } from '../../src/shared/registry/execution-request';
import type { FireLedger } from '../../src/shared/registry/fire-ledger';
import { FakeClock } from '../helpers/fake-clock';

const NOW = 1_800_000_000_000;
const LEAD_MS = 200;

/** What the takeover handed to the queue pool, turn by turn. */
interface Enqueues {
  calls: Array<ReadonlyMap<string, readonly ExecutionRequest[]>>;
  /** enqueueGathered calls per event-loop turn (the ones that share addBulk calls). */
  turns: number[];
}

/**
 * A takeover over a real TaskChain on a hand-driven clock. The queue pool records what it is given
 * (queue-pool.test.ts covers the enqueue itself, on a real Redis); each job's view knows one live
 * instance `w1` with queue `q1`, and its last ledger is `ledgers[job]`.
 */
function takeover(ledgers: Record<string, FireLedger>) {
  const clock = new FakeClock(NOW);
  const chain = new TaskChain(clock, silentLogger);
  const enqueues: Enqueues = { calls: [], turns: [] };
  let turnOpen = false;
  const states = new Map<string, JobState>();
  const view = { config: { shardingTotalCount: 2 }, instance: (id: string) => (id === 'w1' ? { queue: 'q1' } : undefined), targetsFor: () => new Map() };
  for (const job of Object.keys(ledgers)) states.set(job, { view } as unknown as JobState);
  const deps = {
    log: silentLogger,
    clock,
    chain,
    jobs: states,
    queues: {
      enqueueGathered: (byQueue: ReadonlyMap<string, readonly ExecutionRequest[]>) => {
        enqueues.calls.push(byQueue);
        if (!turnOpen) {
          turnOpen = true;
          enqueues.turns.push(0);
          setImmediate(() => (turnOpen = false));
        }
        enqueues.turns[enqueues.turns.length - 1] += 1;
        return Promise.resolve();
      },
    },
    moves: { afterEnqueue: () => undefined },
    deliveryLeadMs: () => LEAD_MS,
    reads: { facts: (job: string) => ({ ledger: JSON.stringify(ledgers[job]), noIntents: true, laidOut: 2 }) },
  } as unknown as TakeoverDeps;
  return { clock, chain, enqueues, states, prepare: (job: string) => new Takeover(deps).prepareJob(job, states.get(job)!) };
}

const ledger = (fireTime: number): FireLedger => ({ fireTime, epoch: 3, source: 'NORMAL', assignment: { w1: [0, 1] }, queues: { w1: 'q1' } });

/** A chain task that runs until the test lets it end (a queue move, say). */
function holdChain(chain: TaskChain): { started: Promise<void>; release: () => void } {
  let release!: () => void;
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  void chain.run(() => {
    started();
    return new Promise<void>((resolve) => (release = resolve));
  }, 'held');
  return { started: running, release: () => release() };
}

describe('Takeover: the replay of a fire already due', () => {
  it('waits for the task the chain runs (a queue move) instead of enqueuing beside it', async () => {
    const { chain, enqueues, prepare } = takeover({ a: ledger(NOW - 1_000) });
    const move = holdChain(chain);
    await move.started;
    const prepared = prepare('a');
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    // The move still runs: nothing of the replay reached the queue.
    expect(enqueues.calls).toHaveLength(0);
    move.release();
    await expect(prepared).resolves.toBe(NOW - 1_000);
    expect(enqueues.calls).toHaveLength(1);
    const requests = enqueues.calls[0].get('q1')!;
    expect(requests.map((r) => [r.item, r.fireTime, r.source, r.catchUp])).toEqual([
      [0, NOW - 1_000, 'NORMAL', true],
      [1, NOW - 1_000, 'NORMAL', true],
    ]);
  });

  it('joins the replays due while it waits: they start in one turn, so they share their addBulk calls', async () => {
    const ledgers = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`j${i}`, ledger(NOW - 2_000 - i)]));
    const { chain, enqueues, prepare } = takeover(ledgers);
    const move = holdChain(chain);
    await move.started;
    const prepared = Object.keys(ledgers).map((job) => prepare(job));
    await new Promise((resolve) => setImmediate(resolve));
    move.release();
    await Promise.all(prepared);
    expect(enqueues.calls).toHaveLength(20);
    expect(enqueues.turns).toEqual([20]);
  });

  it('leaves a fire still ahead of its delivery lead waiting off the chain until then', async () => {
    const { clock, enqueues, prepare } = takeover({ a: ledger(NOW + 5_000) });
    await prepare('a');
    expect(enqueues.calls).toHaveLength(0);
    expect(clock.pendingAt()).toBe(5_000 - LEAD_MS);
  });
});
