import * as zookeeper from 'node-zookeeper-client';
import { installSocketDataFix } from '../../src/shared/zk/driver/socket-data-fix';
import { installMultiDecoder, MultiRequest, readStat, type RawAcl, type WireOp } from '../../src/shared/zk/driver/zk-wire';

// The library's own records, to hold our bytes against.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const jute = require('node-zookeeper-client/lib/jute');

const acls = (zookeeper.ACL as unknown as { CREATOR_ALL_ACL: RawAcl[]; OPEN_ACL_UNSAFE: RawAcl[] });

interface LibraryTransaction {
  ops: Array<{ version: number }>;
  create(path: string, data: Buffer, acls: readonly RawAcl[], mode: number): void;
  setData(path: string, data: Buffer, version: number): void;
  check(path: string, version: number): void;
  remove(path: string, version: number): void;
}

/** What node-zookeeper-client itself sends for `ops`, with request number `xid`. */
function libraryBytes(ops: readonly WireOp[], xid: number, chroot?: string): Buffer {
  // A client that never connects: only its transaction builder is used.
  const tx = zookeeper.createClient('127.0.0.1:1').transaction() as unknown as LibraryTransaction;
  for (const op of ops) {
    if (op.type === 'create') tx.create(op.path, Buffer.from(op.data), op.acls, op.flags);
    else if (op.type === 'set') tx.setData(op.path, Buffer.from(op.data), op.version);
    else if (op.type === 'check') tx.check(op.path, op.version);
    else tx.remove(op.path, op.version);
    // The library turns version 0 into -1 (`version || -1`): put the real one back, as we send it.
    if (op.type !== 'create') tx.ops[tx.ops.length - 1].version = op.version;
  }
  const header = new jute.protocol.RequestHeader();
  header.type = jute.OP_CODES.MULTI;
  header.xid = xid;
  const payload = new jute.TransactionRequest(tx.ops);
  if (chroot) payload.setChrootPath(chroot);
  return new jute.Request(header, payload).toBuffer();
}

const ops: WireOp[] = [
  { type: 'check', path: '/ns/leader/election/c_0000000001', version: 0 },
  { type: 'create', path: '/ns/jobs/a/sharding/3/running', data: Buffer.from('inst-1@host'), acls: acls.OPEN_ACL_UNSAFE, flags: 1 },
  { type: 'create', path: '/ns/jobs/ü/empty', data: Buffer.alloc(0), acls: acls.CREATOR_ALL_ACL, flags: 0 },
  { type: 'set', path: '/ns/jobs/a/sharding/3', data: Buffer.from('[1700000000000]'), version: -1 },
  { type: 'set', path: '/ns/jobs/a/sharding/4', data: Buffer.alloc(0), version: 7 },
  { type: 'set', path: '/ns/jobs/a/sharding/5', data: 'données [1700000000000]', version: 2 },
  { type: 'create', path: '/ns/jobs/a/sharding/5/running', data: 'inst-2@hôte', acls: acls.OPEN_ACL_UNSAFE, flags: 1 },
  { type: 'delete', path: '/ns/jobs/a/sharding/3/running', version: -1 },
  { type: 'delete', path: '/ns/jobs/a/sharding/3/misfire', version: 0 },
];

describe('MultiRequest', () => {
  it('writes the bytes node-zookeeper-client writes for the same multi', () => {
    const request = new MultiRequest(ops);
    request.header.xid = 4242;
    expect(request.toBuffer().equals(libraryBytes(ops, 4242))).toBe(true);
  });

  it('puts the connection chroot in front of every path, and the xid it was given last', () => {
    const request = new MultiRequest(ops);
    request.payload.setChrootPath('/root');
    request.header.xid = 1;
    request.toBuffer();
    request.header.xid = 2;
    expect(request.toBuffer().equals(libraryBytes(ops, 2, '/root'))).toBe(true);
  });

  it('sends the chroot itself for the root path, as the library does (a namespace-relative "/" on a chrooted connection)', () => {
    const rootOps: WireOp[] = [{ type: 'check', path: '/', version: 3 }];
    const request = new MultiRequest(rootOps);
    request.payload.setChrootPath('/apps/ns');
    request.header.xid = 9;
    expect(request.toBuffer().equals(libraryBytes(rootOps, 9, '/apps/ns'))).toBe(true);
  });

  it('refuses a path ZooKeeper would refuse, as the library does', () => {
    expect(() => new MultiRequest([{ type: 'delete', path: '/a//b', version: -1 }])).toThrow(/empty node name/);
    expect(() => new MultiRequest([{ type: 'check', path: '/a/', version: -1 }])).toThrow(/must not end/);
  });
});

describe('multi answers', () => {
  // The patch that decodes them (the library's own decoder stays until it is installed).
  beforeAll(() => installMultiDecoder());
  const stat = {
    czxid: Buffer.from('0000000100000a0b', 'hex'),
    mzxid: Buffer.from('0000000100000a0c', 'hex'),
    ctime: Buffer.from('0000018bcfe56800', 'hex'),
    mtime: Buffer.from('0000018bcfe56c00', 'hex'),
    version: 3,
    cversion: 12,
    aversion: 0,
    ephemeralOwner: Buffer.from('000a1b2c3d4e5f60', 'hex'),
    dataLength: 15,
    numChildren: 2,
    pzxid: Buffer.from('0000000100000a0d', 'hex'),
  };

  /** An answer as the server writes it, built from the library's records. */
  function answer(parts: Array<[type: number, body?: { record: string; values: object }]>): Buffer {
    const records: Array<{ byteLength(): number; serialize(b: Buffer, o: number): number }> = [];
    for (const [type, body] of parts) {
      records.push(new jute.protocol.MultiHeader(type, false, type === -1 ? 1 : 0));
      if (body) records.push(Object.assign(new jute.protocol[body.record](), body.values));
    }
    records.push(new jute.protocol.MultiHeader(-1, true, -1));
    const buffer = Buffer.alloc(records.reduce((n, r) => n + r.byteLength(), 0) + 3);
    let at = 3; // decoding starts inside a larger packet
    for (const r of records) at += r.serialize(buffer, at);
    return buffer;
  }

  function decode(buffer: Buffer, chroot?: string) {
    const response = new jute.TransactionResponse();
    if (chroot) response.setChrootPath(chroot);
    const read = response.deserialize(buffer, 3);
    return { read, results: response.results };
  }

  it('reads created paths, stats, deletes and checks, and stops at the end mark', () => {
    const withStat = Object.assign(new jute.data.Stat(), stat);
    const buffer = answer([
      [1, { record: 'CreateResponse', values: { path: '/root/ns/a/running' } }],
      [5, { record: 'SetDataResponse', values: { stat: withStat } }],
      [2],
      [13],
    ]);
    const { read, results } = decode(buffer, '/root');
    expect(read).toBe(buffer.length - 3);
    expect(results).toEqual([
      { type: 1, path: '/ns/a/running' },
      {
        type: 5,
        stat: {
          czxid: '0000000100000a0b',
          ctimeMs: 0x18bcfe56800,
          mtimeMs: 0x18bcfe56c00,
          version: 3,
          cversion: 12,
          ephemeralOwner: 'a1b2c3d4e5f60',
          dataLength: 15,
          numChildren: 2,
        },
      },
      { type: 2 },
      { type: 13 },
    ]);
  });

  it('reads per-op error codes of a refused multi', () => {
    const buffer = answer([
      [-1, { record: 'ErrorResponse', values: { err: 0 } }],
      [-1, { record: 'ErrorResponse', values: { err: -110 } }],
      [-1, { record: 'ErrorResponse', values: { err: -2 } }],
    ]);
    expect(decode(buffer).results).toEqual([
      { type: -1, err: 0 },
      { type: -1, err: -110 },
      { type: -1, err: -2 },
    ]);
  });

  it('prints session ids as the rest of the client does: hex without leading zeros, 0 for none', () => {
    const at = (owner: string) => {
      const b = Buffer.alloc(68);
      Buffer.from(owner, 'hex').copy(b, 44);
      return readStat(b, 0).ephemeralOwner;
    };
    expect(at('0000000000000000')).toBe('0');
    expect(at('0000000000000001')).toBe('1');
    expect(at('0100000000000000')).toBe('100000000000000');
    expect(at('1000000000000000')).toBe('1000000000000000');
  });
});

describe('socket reads holding many answers', () => {
  /** `count` ping answers (reply header: xid -2, zxid, err 0), each behind its length. */
  function pings(count: number): Buffer {
    const one = Buffer.alloc(20);
    one.writeInt32BE(16, 0);
    one.writeInt32BE(-2, 4);
    return Buffer.concat(Array.from({ length: count }, () => one));
  }

  /** A client's connection, never connected, in the state where it reads answers. */
  function connection() {
    const client = zookeeper.createClient('127.0.0.1:1');
    expect(installSocketDataFix(client)).toBe(true);
    const manager = (client as unknown as { connectionManager: { state: number; pendingBuffer: Buffer | null; onSocketData(b: Buffer): void } }).connectionManager;
    manager.state = 2; // CONNECTED
    return manager;
  }

  it('reads 100,000 answers of one read without a stack frame per answer', () => {
    const manager = connection();
    // The library's own handler calls itself once per answer: this many overflow the stack.
    expect(() => manager.onSocketData(pings(100_000))).not.toThrow();
    expect(manager.pendingBuffer).toBeNull();
  });

  it('keeps a partial answer at the end of a read for the next one', () => {
    const manager = connection();
    const partial = pings(1).subarray(0, 7);
    manager.onSocketData(Buffer.concat([pings(3), partial]));
    expect(manager.pendingBuffer?.equals(partial)).toBe(true);
    manager.onSocketData(pings(1).subarray(7));
    expect(manager.pendingBuffer).toBeNull();
  });
});
