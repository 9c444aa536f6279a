import type * as zookeeper from 'node-zookeeper-client';
import type { Socket } from 'node:net';

/** The library's CONNECTING state: the TCP connection is up, the session's answer not yet in. */
const CONNECTING = 1;
/** The least a handshake is given before the connection is dropped and tried again. */
const MIN_HANDSHAKE_MS = 1_000;

/** The part of node-zookeeper-client's ConnectionManager this patch touches. */
interface ConnectionManager {
  onSocketConnected(): void;
  state: number;
  socket?: Socket;
  /** The library's TCP connect timeout: the session timeout over the number of servers. */
  connectTimeout: number;
}

/**
 * Patch. The library times the TCP connect only: once the socket is up it sends its connect
 * request and waits for the answer without a limit. A ZooKeeper 3.8.0 server that is still loading
 * its database accepts connections, fails to close one it cannot serve (a NullPointerException in
 * `removeCnxn`: the socket stays open, unread) and never answers it, so a client that reconnected in
 * that window waited until its session expired and beyond: in 1 of 8 kill -9 and restart cycles
 * with two busy loops beside it (the cause of the local-services and zk-faults CI failures). Here
 * a handshake not answered within a third of the connect timeout (at least 1 s) drops the socket,
 * and the library connects again. Installed on one client before it connects (the socket's
 * 'connect' listener binds the method then). Test: test/integration/zk-client.test.ts, a server that
 * never answers the first handshake.
 */
export function installHandshakeTimeout(client: zookeeper.Client): boolean {
  const connection = (client as unknown as { connectionManager?: ConnectionManager }).connectionManager;
  const connected = connection?.onSocketConnected;
  if (!connection || typeof connected !== 'function' || typeof connection.connectTimeout !== 'number') return false;
  connection.onSocketConnected = function (this: ConnectionManager) {
    connected.call(this);
    const socket = this.socket;
    if (!socket) return;
    const timer = setTimeout(() => {
      if (this.socket === socket && this.state === CONNECTING) socket.destroy();
    }, Math.max(MIN_HANDSHAKE_MS, Math.floor(this.connectTimeout / 3)));
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  };
  return true;
}
