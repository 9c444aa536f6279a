import type * as zookeeper from 'node-zookeeper-client';

/** The part of the library's connection this patch sets. */
interface Connection {
  chrootPath?: string;
  queue?: unknown;
}

/**
 * Patch: chroots `client`'s connection to `root` (under the connection string's own chroot, if it
 * has one) once that node exists, as if the connection string had named it. The library then adds
 * the chroot to each request's paths while it writes them, and takes it off the paths it reads back
 * (answers, watch events, SetWatches, the multi codec of zk-wire.ts), so every path the process
 * keeps is namespace-relative. Before, {@link ZkNamespace} built an absolute path per request, and
 * the watch registry kept it as the key of each watch: a second string per watched path, next to
 * the cache's own (a leader watches eight paths per job: 350 bytes per job, bench/tools/leader-rss.ts).
 * The connection string cannot name the root itself: the root must be created first, through the
 * same session, before any request goes under it.
 * Test: test/integration/zk-client.test.ts (namespaces, chroot in the connection string).
 * Returns false, changing nothing, if the connection does not look as expected.
 */
export function enterChroot(client: zookeeper.Client, root: string): boolean {
  const connection = (client as unknown as { connectionManager?: Connection }).connectionManager;
  if (!connection || !('chrootPath' in connection) || typeof connection.queue !== 'function') return false;
  if (root === '/' || root === '') return true;
  connection.chrootPath = `${connection.chrootPath ?? ''}${root}`;
  return true;
}
