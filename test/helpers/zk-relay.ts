/**
 * A TCP relay between one ZooKeeper client and the real server, for fault tests without fakes: it
 * can drop every connection and refuse new ones (a partition), lose the answer to a chosen request
 * after the server applied it, cut the link right before a chosen request, or hold requests back.
 */
import net from 'node:net';
import { LOOPBACK } from '../../src/dev/free-port';

/** ZooKeeper request opcodes (org.apache.zookeeper.ZooDefs.OpCode). */
export const OP = { create: 1, delete: 2, exists: 3, getData: 4, setData: 5, getChildren2: 12, multi: 14 } as const;

/**
 * A request the relay acts on: by opcode and, for single-path requests, by the end of its absolute
 * path (the namespace-relative path, since the namespace is the prefix).
 */
export interface Target {
  op: number;
  path?: string;
}

/**
 * Splits one direction of a ZooKeeper connection into its length-prefixed frames. The first frame
 * is the connect handshake; after it, requests start with `xid, type` and answers with `xid`.
 * `onFrame` returns false to stop reading (the connection is being dropped).
 */
function frameReader(onFrame: (frame: Buffer, index: number) => boolean): (chunk: Buffer) => void {
  let buffered = Buffer.alloc(0);
  let index = 0;
  let stopped = false;
  return (chunk) => {
    if (stopped) return;
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 4) {
      const end = 4 + buffered.readInt32BE(0);
      if (buffered.length < end) return;
      const frame = buffered.subarray(0, end);
      buffered = buffered.subarray(end);
      if (!onFrame(frame, index++)) {
        stopped = true;
        return;
      }
    }
  };
}

/**
 * Whether a request frame (`len, xid, type, [path]...`) is `target`. A multi whose first operation
 * is `target` counts too (`len, xid, 14, [op type, done, err, path]...`): the executor sends its lock
 * creates and releases as multis, merged with those of other items issued at the same time.
 */
function matches(frame: Buffer, target: Target): boolean {
  if (frame.length < 12) return false;
  let pathAt = 12;
  if (frame.readInt32BE(8) === OP.multi && target.op !== OP.multi) {
    if (frame.length < 21 || frame.readInt32BE(12) !== target.op) return false;
    pathAt = 21;
  } else if (frame.readInt32BE(8) !== target.op) return false;
  if (target.path === undefined) return true;
  if (frame.length < pathAt + 4) return false;
  const length = frame.readInt32BE(pathAt);
  if (length < 0 || pathAt + 4 + length > frame.length) return false;
  return frame.toString('utf8', pathAt + 4, pathAt + 4 + length).endsWith(target.path);
}

/** A TCP relay between one client and the real server, able to act at a chosen request. */
export interface Link {
  connectionString: string;
  /** True while the link refuses connections. */
  readonly isCut: boolean;
  /**
   * The next `target` request reaches the server and is applied; its answer is lost with the
   * connection. The client reconnects, unless `thenCut`: then the link refuses connections until
   * {@link heal}.
   */
  loseNextAnswer(target: Target, options?: { thenCut?: boolean }): void;
  /** The next `target` request never reaches the server: the link is cut before it, until {@link heal}. */
  cutAtNext(target: Target): void;
  /**
   * The next `target` request, and everything the client sends after it, is held back until the
   * returned `resume` is called (a slow network). Resolves once that request arrived.
   */
  holdNext(target: Target): Promise<() => void>;
  /** Drops every connection and refuses new ones (a partition between this client and ZooKeeper). */
  cut(): void;
  heal(): void;
  close(): Promise<void>;
}

type Armed = { target: Target; action: 'lose-answer'; thenCut: boolean } | { target: Target; action: 'cut' } | { target: Target; action: 'hold'; held: (resume: () => void) => void };

export async function startLink(serverPort: number): Promise<Link> {
  const sockets = new Set<net.Socket>();
  let isCut = false;
  let armed: Armed | undefined;
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  };
  const cut = () => {
    isCut = true;
    for (const socket of sockets) socket.destroy();
  };
  const relay = net.createServer((client) => {
    track(client);
    if (isCut) return void client.destroy();
    const upstream = net.connect(serverPort, LOOPBACK);
    track(upstream);
    /** xids of requests whose answer must not reach the client. */
    const lost = new Set<number>();
    /** Whether losing an answer also cuts the link. */
    let cutOnLoss = false;
    /** Frames held back (in order) while a hold is in place. */
    let held: Buffer[] | undefined;
    client.on(
      'data',
      frameReader((frame, index) => {
        if (held) {
          held.push(Buffer.from(frame));
          return true;
        }
        if (index > 0 && armed && matches(frame, armed.target)) {
          const act = armed;
          armed = undefined;
          if (act.action === 'cut') {
            cut();
            return false;
          }
          if (act.action === 'hold') {
            const queue: Buffer[] = [Buffer.from(frame)];
            held = queue;
            act.held(() => {
              held = undefined;
              for (const f of queue) upstream.write(f);
            });
            return true;
          }
          lost.add(frame.readInt32BE(4));
          cutOnLoss = act.thenCut;
        }
        upstream.write(frame);
        return true;
      }),
    );
    upstream.on(
      'data',
      frameReader((frame, index) => {
        if (index > 0 && frame.length >= 8 && lost.has(frame.readInt32BE(4))) {
          if (cutOnLoss) cut();
          client.destroy();
          upstream.destroy();
          return false;
        }
        client.write(frame);
        return true;
      }),
    );
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => relay.listen(0, LOOPBACK, resolve));
  const port = (relay.address() as net.AddressInfo).port;
  return {
    connectionString: `${LOOPBACK}:${port}`,
    get isCut() {
      return isCut;
    },
    loseNextAnswer: (target, options) => void (armed = { target, action: 'lose-answer', thenCut: options?.thenCut ?? false }),
    cutAtNext: (target) => void (armed = { target, action: 'cut' }),
    holdNext: (target) => new Promise((held) => (armed = { target, action: 'hold', held })),
    cut,
    heal: () => void (isCut = false),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        relay.close(() => resolve());
      }),
  };
}
