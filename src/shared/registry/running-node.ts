import { ErrorCodes } from '../errors';
import { ZkError, type ZkClient, type ZkStat } from '../zk';

/**
 * The data of `sharding/{i}/running`, the item lock: the holder's instance id, followed by
 * `\ncatch-up` when the run is catch-up work (a FAILOVER run, a fire dispatched late after a
 * leaderless window, a request that waited behind such a run). A request that finds the item held
 * by a catch-up run waits for it instead of counting as a misfire (docs/design-notes.md, "Failover
 * and catch-up"). Plain instance ids, as older versions wrote, read as regular runs.
 */
const CATCH_UP_SUFFIX = '\ncatch-up';

/** Who holds an item, as its `running` node says. */
export interface RunningHolder {
  instanceId: string;
  catchUp: boolean;
}

/** The node's data for a holder. */
export function encodeRunningNode(instanceId: string, catchUp: boolean): string {
  return catchUp ? `${instanceId}${CATCH_UP_SUFFIX}` : instanceId;
}

/** Reads a `running` node's data (any text: an instance id alone is a regular run). */
export function decodeRunningNode(data: Buffer | string): RunningHolder {
  const text = typeof data === 'string' ? data : data.toString('utf8');
  return text.endsWith(CATCH_UP_SUFFIX) ? { instanceId: text.slice(0, -CATCH_UP_SUFFIX.length), catchUp: true } : { instanceId: text, catchUp: false };
}

/** The holder of the `running` node at `path` with the node's stat, or null when the item is free. */
export async function readRunningHolder(zk: Pick<ZkClient, 'get'>, path: string): Promise<(RunningHolder & { stat: ZkStat }) | null> {
  try {
    const { data, stat } = await zk.get(path);
    return { ...decodeRunningNode(data), stat };
  } catch (err) {
    if (err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE) return null;
    throw err;
  }
}
