/**
 * Dispatch planning without I/O: the requests of one fire from its assignment, and the reroute of
 * requests whose instance left before they were enqueued. Unit-tested in dispatch-plan.test.ts; the
 * I/O around them is FireDispatcher's (ledgers, enqueue) and FireLoop's (when).
 */
import type { ExecutionRequest, ExecutionSource } from '../shared/registry/execution-request';
import type { Assignment } from '../shared/sharding/assignment';

/** One fire of one job, as planned. */
export interface FireRequests {
  /** queue -> the requests it gets, in item order per instance. */
  requests: Map<string, ExecutionRequest[]>;
  /** instanceId -> the items it runs this fire (disabled items left out): the ledger's assignment. */
  dispatched: Record<string, number[]>;
  /** instanceId -> its queue: the ledger's queues. */
  queues: Record<string, string>;
}

/** What {@link fireRequests} needs to know. */
export interface FireRequestsInput {
  job: string;
  fireTime: number;
  source: ExecutionSource;
  epoch: number;
  /** The fire came due while no leader could dispatch it: its requests are owed work. */
  catchUp: boolean;
  assignment: Assignment;
  /** The queue of a live instance named by the assignment. */
  queueOf(instanceId: string): string;
  itemDisabled(item: number): boolean;
  /** The job has once-per-fire listeners: each request says how many items the fire has ({@link ExecutionRequest.fireItems}). */
  fireListeners?: boolean;
}

/** The number of items a fire dispatched, from its ledger's (or a trigger decision's) assignment. */
export function dispatchedItems(assignment: Readonly<Record<string, readonly number[]>>): number {
  let count = 0;
  for (const items of Object.values(assignment)) count += items.length;
  return count;
}

/** `request` with the fire's item count when the job has once-per-fire listeners (and the fire has items). */
export function withFireItems(request: ExecutionRequest, fireListeners: boolean | undefined, fireItems: number): ExecutionRequest {
  return fireListeners && fireItems > 0 ? { ...request, fireItems } : request;
}

/** One request per enabled item of the assignment, grouped per instance queue. */
export function fireRequests(input: FireRequestsInput): FireRequests {
  const { job, fireTime, source, epoch, catchUp } = input;
  const requests = new Map<string, ExecutionRequest[]>();
  const dispatched: Record<string, number[]> = {};
  const queues: Record<string, string> = {};
  for (const [instanceId, items] of Object.entries(input.assignment)) {
    const enabled = items.filter((item) => !input.itemDisabled(item));
    if (enabled.length === 0) continue;
    const queue = input.queueOf(instanceId);
    dispatched[instanceId] = enabled;
    queues[instanceId] = queue;
    const list = requests.get(queue) ?? [];
    for (const item of enabled) list.push(catchUp ? { job, item, fireTime, source, epoch, catchUp } : { job, item, fireTime, source, epoch });
    requests.set(queue, list);
  }
  // Only jobs with once-per-fire listeners pay for a second pass (the count is known at the end).
  if (input.fireListeners) {
    const fireItems = dispatchedItems(dispatched);
    for (const list of requests.values()) for (let i = 0; i < list.length; i += 1) list[i] = withFireItems(list[i], true, fireItems);
  }
  return { requests, dispatched, queues };
}

/** An instance as the reroute sees it now: its current queue and state, undefined when it is gone. */
export type InstanceNow = { queue: string; state: string } | undefined;

/** Requests moved off one instance by {@link reroute}. */
export interface Rerouted {
  from: string;
  items: number[];
}

/**
 * Sends the requests planned for instances that died or began draining since the plan was made
 * (their queue is not the live `ready` one any more) to `targets` instead: nothing ran yet, so this
 * is what planning now would have done. Mutates `requests`; returns what moved. Requests of an
 * instance whose items have nowhere to go stay where they were (failover moves them later).
 */
export function reroute(
  requests: Map<string, ExecutionRequest[]>,
  plannedQueues: Readonly<Record<string, string>>,
  instanceNow: (instanceId: string) => InstanceNow,
  targets: (items: number[], except: string) => ReadonlyMap<number, { queue: string }>,
): Rerouted[] {
  const moved: Rerouted[] = [];
  // The plan as it was: a request moved here is not moved again when its target's turn comes.
  const planned = new Map([...requests].map(([queue, list]) => [queue, [...list]]));
  for (const [instanceId, queue] of Object.entries(plannedQueues)) {
    const now = instanceNow(instanceId);
    if (now && now.queue === queue && now.state === 'ready') continue;
    const list = planned.get(queue) ?? [];
    const to = targets(list.map((r) => r.item), instanceId);
    if (to.size === 0) continue;
    // What was moved onto this queue stays; what was planned for it leaves.
    const staying = requests.get(queue)?.filter((r) => !list.includes(r)) ?? [];
    if (staying.length > 0) requests.set(queue, staying);
    else requests.delete(queue);
    for (const request of list) {
      const target = to.get(request.item)!.queue;
      const onTarget = requests.get(target);
      if (onTarget) onTarget.push(request);
      else requests.set(target, [request]);
    }
    moved.push({ from: instanceId, items: list.map((r) => r.item) });
  }
  return moved;
}
