/**
 * Every use of node-zookeeper-client's internals (version 1.1.3, pinned in package.json), installed
 * explicitly by {@link installDriverPatches} when a session's client is made. Each patch names the
 * problem it solves and the test that checks it in its own file:
 * - zk-wire.ts: multis written and read in one pass, without the library's records (allocations);
 * - socket-data-fix.ts: several answers in one socket read handled in a loop (copies, stack depth);
 * - watch-registry.ts: one map of watchers instead of an EventEmitter per path (memory);
 * - stackless-exceptions.ts: the library's answer errors built without a stack trace (CPU);
 * - chroot.ts: the namespace as the connection's chroot once its root exists (memory);
 * - handshake-timeout.ts: a connect handshake the server never answers is dropped and tried again (availability).
 */
import type * as zookeeper from 'node-zookeeper-client';
import { installHandshakeTimeout } from './handshake-timeout';
import { installSocketDataFix } from './socket-data-fix';
import { installStacklessExceptions } from './stackless-exceptions';
import { installWatchRegistry } from './watch-registry';
import { installMultiDecoder } from './zk-wire';

export { chrootSupported, enterChroot } from './chroot';
export { withoutStack } from './stackless-exceptions';
export { queueMulti, MultiRequest, type MultiOpResult, type RawAcl, type WireOp } from './zk-wire';

/**
 * Installs the patches on `client` before it connects; returns the names of those that could not
 * be installed because the library's internals look different (the library's own code stays then).
 */
export function installDriverPatches(client: zookeeper.Client): string[] {
  installMultiDecoder();
  const skipped: string[] = [];
  if (!installWatchRegistry(client)) skipped.push('watch registry');
  if (!installSocketDataFix(client)) skipped.push('socket-data handler');
  if (!installStacklessExceptions()) skipped.push('stackless exceptions');
  if (!installHandshakeTimeout(client)) skipped.push('handshake timeout');
  return skipped;
}
