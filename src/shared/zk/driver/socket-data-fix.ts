import type * as zookeeper from 'node-zookeeper-client';

/** The part of node-zookeeper-client's ConnectionManager this patch touches. */
interface ConnectionManager {
  onSocketData(buffer: Buffer): void;
  pendingBuffer: Buffer | null;
}

/**
 * Patch. The library's socket handler, when a read holds several answers, handles the first and calls
 * itself with an empty buffer, which it joins to the rest: a copy of the whole remainder per
 * answer, and a stack frame per answer. A worker reads many answers per socket read (its multis and
 * the reads sent behind them), so the copies grew with the square of the answers. Here the nested
 * call only notes that more is pending, and the outer call hands the remainder over as it is, in a
 * loop: no copy, and the stack stays as deep as for one answer.
 * Installed on one client before it connects (the socket listener binds the handler then). Test:
 * test/unit/zk-wire.test.ts feeds it many answers in one read (100,000 overflowed the library's stack).
 */
export function installSocketDataFix(client: zookeeper.Client): boolean {
  const connection = (client as unknown as { connectionManager?: ConnectionManager }).connectionManager;
  const handler = connection?.onSocketData;
  if (!connection || typeof handler !== 'function') return false;
  let handling = false;
  let more = false;
  connection.onSocketData = function (this: ConnectionManager, buffer: Buffer) {
    if (handling && buffer.length === 0) {
      more = true;
      return;
    }
    if (handling) return handler.call(this, buffer);
    handling = true;
    try {
      handler.call(this, buffer);
      while (more) {
        more = false;
        const pending = this.pendingBuffer;
        if (!pending) break;
        this.pendingBuffer = null;
        handler.call(this, pending);
      }
    } finally {
      handling = false;
      more = false;
    }
  };
  return true;
}
