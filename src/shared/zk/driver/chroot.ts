import * as zookeeper from 'node-zookeeper-client';

/** The part of the library's connection this patch sets. */
interface Connection {
  chrootPath?: string;
  queue?: unknown;
}

function connectionOf(client: zookeeper.Client): Connection | undefined {
  const connection = (client as unknown as { connectionManager?: Connection }).connectionManager;
  return connection && 'chrootPath' in connection && typeof connection.queue === 'function' ? connection : undefined;
}

let supported: boolean | undefined;

/**
 * Whether this version of the library lets {@link enterChroot} work: checked once, on a client
 * that never connects (making one opens nothing). A namespace decides from it, before any request,
 * whether its paths go out relative or absolute.
 */
export function chrootSupported(): boolean {
  return (supported ??= connectionOf(zookeeper.createClient('127.0.0.1:1')) !== undefined);
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
 * Only where {@link chrootSupported}; throws otherwise.
 */
export function enterChroot(client: zookeeper.Client, root: string): void {
  const connection = connectionOf(client);
  if (!connection) throw new Error('node-zookeeper-client connection without a chroot (driver/chroot.ts)');
  if (root === '/' || root === '') return;
  connection.chrootPath = `${connection.chrootPath ?? ''}${root}`;
}
