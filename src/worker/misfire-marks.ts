/**
 * Misfire marks in ZooKeeper: `sharding/{i}/misfire` holds the latest fire time that found the item
 * running (DESIGN.md flows 3c and 4). The holder runs the item once more under that time when it
 * finishes, and the mark is deleted (by version) only in the multi that records the re-run's
 * completion, so a holder that dies during the re-run leaves it for the next one. ElasticJob clears
 * its flag before re-running, so a crash during the re-run loses it.
 */
import { ErrorCodes } from '../shared/errors';
import type { ExecutionRequest } from '../shared/registry/execution-request';
import { registryPaths } from '../shared/registry/registry-paths';
import { ZkError, type ZkClient } from '../shared/zk';
import type { MisfireMark } from './item-lock';

/** The name of the misfire mark under its item's node. */
export const MISFIRE_NODE = registryPaths.shardingMisfire('job', 0).split('/').pop()!;

const is = (err: unknown, ...codes: string[]): boolean => err instanceof ZkError && codes.includes(err.code);

/** Reads and writes the misfire marks of items. */
export class MisfireMarks {
  constructor(private readonly zk: ZkClient) {}

  /** Records the request's fire as the latest that found its item running (never moves a mark back). */
  async mark(request: ExecutionRequest): Promise<void> {
    const path = registryPaths.shardingMisfire(request.job, request.item);
    for (let attempt = 0; attempt < 5; attempt += 1) {
      try {
        const { data, stat } = await this.zk.get(path);
        if (Number(data.toString()) >= request.fireTime) return;
        await this.zk.set(path, String(request.fireTime), stat.version);
        return;
      } catch (err) {
        if (!(err instanceof ZkError)) throw err;
        if (err.code === ErrorCodes.ZK_NO_NODE) {
          await createItemNode(this.zk, path, String(request.fireTime));
          continue;
        }
        if (err.code !== ErrorCodes.ZK_BAD_VERSION && err.code !== ErrorCodes.ZK_NODE_EXISTS) throw err;
      }
    }
  }

  /** The mark, if the item's `children` name one (read then; null: none). */
  async among(children: Promise<string[]>, request: ExecutionRequest): Promise<MisfireMark | null> {
    return (await children).includes(MISFIRE_NODE) ? this.read(request) : null;
  }

  /**
   * The item's mark (null: none). A mark without a readable time (written by another tool) stands
   * for the request's own fire.
   */
  async read(request: ExecutionRequest): Promise<MisfireMark | null> {
    try {
      const { data, stat } = await this.zk.get(registryPaths.shardingMisfire(request.job, request.item));
      const fireTime = Number(data.toString());
      return { fireTime: Number.isSafeInteger(fireTime) && fireTime > 0 ? fireTime : request.fireTime, version: stat.version };
    } catch (err) {
      if (is(err, ErrorCodes.ZK_NO_NODE)) return null;
      throw err;
    }
  }
}

/**
 * Creates a node of an item unless it exists. One request when its parent exists, as it almost
 * always does: a `mkdirp` sends a create per level of the path, each answered with an error but
 * the last.
 */
export async function createItemNode(zk: ZkClient, path: string, data = ''): Promise<void> {
  await zk.createUnlessExists(path, data);
}
