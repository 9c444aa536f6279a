import * as zookeeper from 'node-zookeeper-client';
import { ErrorCodes, ShardcronError } from '../../errors';
import type { ZkStat } from '../zk-types';

/**
 * The wire form of ZooKeeper multis, written and read without node-zookeeper-client's generic
 * records. The library builds a record object per operation and per header, walks each record's
 * field list three times to size and write it (with a regular expression per vector and nested
 * field), and decodes every stat into eleven fields with six 8-byte buffers: a busy worker with
 * monitorExecution commits two small groups per item, and those objects were a large part of its
 * allocations. Here one buffer is sized and written in one pass, and a result is decoded straight
 * into what {@link ZkOpResult} needs.
 *
 * This reaches into node-zookeeper-client 1.1.3 (pinned in package.json): its connection's packet
 * queue and the module that decodes multi answers (see index.ts for every patch). The
 * checks below fail loudly at load if another version changed them, and the unit tests compare
 * these bytes with the library's own encoding.
 */

// eslint-disable-next-line @typescript-eslint/no-require-imports
const jute = require('node-zookeeper-client/lib/jute') as Jute;
// eslint-disable-next-line @typescript-eslint/no-require-imports
const validatePath = (require('node-zookeeper-client/lib/Path') as { validate(path: string): void }).validate;

interface Jute {
  OP_CODES: Record<'CREATE' | 'DELETE' | 'SET_DATA' | 'CHECK' | 'MULTI' | 'ERROR', number>;
  TransactionResponse: { prototype: { deserialize(buffer: Buffer, offset: number): number } };
}

/** What a multi answers per operation: an error code, a created path, or a set's stat. */
export interface MultiOpResult {
  type: number;
  err?: number;
  path?: string;
  stat?: ZkStat;
}

/** The library's answer object for a multi, as {@link decodeMultiResponse} fills it. */
interface TransactionResponse {
  results: MultiOpResult[];
  chrootPath?: string;
}

/** What the library's connection calls with the answer to a queued request. */
type PacketCallback = (err: unknown, response?: { payload: TransactionResponse | null }) => void;

/** The parts of node-zookeeper-client's ConnectionManager used here. */
interface ConnectionManager {
  queue(request: MultiRequest, callback: PacketCallback): void;
}

const { CREATE, DELETE, SET_DATA, CHECK, MULTI, ERROR } = jute.OP_CODES;
if (![CREATE, DELETE, SET_DATA, CHECK, MULTI, ERROR].every((code) => typeof code === 'number') || typeof jute.TransactionResponse?.prototype?.deserialize !== 'function') {
  throw new Error('node-zookeeper-client internals changed: shardcron needs version 1.1.3 (see package.json)');
}

/** An ACL entry as the library holds it at run time (its typings call `permission` `perms`). */
export interface RawAcl {
  permission: number;
  id: { scheme: string; id: string };
}

/** One operation in wire terms: absolute path, data (a string is sent as UTF-8), and what its kind needs. */
export type WireOp =
  | { type: 'check' | 'delete'; path: string; version: number }
  | { type: 'set'; path: string; data: Buffer | string; version: number }
  | { type: 'create'; path: string; data: Buffer | string; acls: readonly RawAcl[]; flags: number };

const OP_CODE = { check: CHECK, delete: DELETE, set: SET_DATA, create: CREATE } as const;
/** A multi header: type (int), done (boolean), err (int). */
const MULTI_HEADER_BYTES = 9;

function stringBytes(value: string): number {
  return 4 + Buffer.byteLength(value);
}

function writeString(buffer: Buffer, offset: number, value: string): number {
  const length = buffer.write(value, offset + 4, 'utf8');
  buffer.writeInt32BE(length, offset);
  return offset + 4 + length;
}

/** Bytes of a data field: its length, then its bytes (a string written straight in as UTF-8). */
function dataBytes(value: Buffer | string): number {
  return typeof value === 'string' ? stringBytes(value) : 4 + value.length;
}

function writeData(buffer: Buffer, offset: number, value: Buffer | string): number {
  if (typeof value === 'string') return writeString(buffer, offset, value);
  buffer.writeInt32BE(value.length, offset);
  value.copy(buffer, offset + 4);
  return offset + 4 + value.length;
}

function writeMultiHeader(buffer: Buffer, offset: number, type: number, done: boolean): number {
  buffer.writeInt32BE(type, offset);
  buffer.writeUInt8(done ? 1 : 0, offset + 4);
  buffer.writeInt32BE(-1, offset + 5);
  return offset + MULTI_HEADER_BYTES;
}

/**
 * A multi request as the library's connection queues it: a header it numbers (`xid`) right before
 * sending, and the bytes, written when it asks for them. Paths are checked as the library checks
 * them, when the request is built.
 */
export class MultiRequest {
  readonly header = { xid: 0, type: MULTI };
  private chroot = '';

  /** Throws ZK_BAD_ARGUMENTS, naming the path, on a path ZooKeeper would refuse (the library's check). */
  constructor(private readonly ops: readonly WireOp[]) {
    for (const { path } of ops) {
      try {
        validatePath(path);
      } catch (err) {
        throw new ShardcronError(ErrorCodes.ZK_BAD_ARGUMENTS, `invalid ZooKeeper path ${JSON.stringify(path)}: ${(err as Error).message}`);
      }
    }
  }

  /** The connection hands its chroot, if its connection string has one. */
  readonly payload = {
    setChrootPath: (chroot: string | undefined) => {
      this.chroot = chroot ?? '';
    },
  };

  /** As the library's own records do: the chroot itself for `/`, else the chroot and the path. */
  private pathOf(op: WireOp): string {
    if (this.chroot === '') return op.path;
    return op.path === '/' ? this.chroot : this.chroot + op.path;
  }

  /** Length prefix, request header, then each operation behind its multi header, then the end mark. */
  toBuffer(): Buffer {
    let size = 8 + MULTI_HEADER_BYTES;
    for (const op of this.ops) {
      size += MULTI_HEADER_BYTES + stringBytes(this.pathOf(op));
      if (op.type === 'create') {
        size += dataBytes(op.data) + 4 + 4;
        for (const acl of op.acls) size += 4 + stringBytes(acl.id.scheme) + stringBytes(acl.id.id);
      } else if (op.type === 'set') size += dataBytes(op.data) + 4;
      else size += 4;
    }
    const buffer = Buffer.allocUnsafe(4 + size);
    buffer.writeInt32BE(size, 0);
    buffer.writeInt32BE(this.header.xid, 4);
    buffer.writeInt32BE(this.header.type, 8);
    let at = 12;
    for (const op of this.ops) {
      at = writeMultiHeader(buffer, at, OP_CODE[op.type], false);
      at = writeString(buffer, at, this.pathOf(op));
      if (op.type === 'create') {
        at = writeData(buffer, at, op.data);
        buffer.writeInt32BE(op.acls.length, at);
        at += 4;
        for (const acl of op.acls) {
          buffer.writeInt32BE(acl.permission, at);
          at = writeString(buffer, at + 4, acl.id.scheme);
          at = writeString(buffer, at, acl.id.id);
        }
        buffer.writeInt32BE(op.flags, at);
        at += 4;
      } else {
        if (op.type === 'set') at = writeData(buffer, at, op.data);
        buffer.writeInt32BE(op.version, at);
        at += 4;
      }
    }
    writeMultiHeader(buffer, at, -1, true);
    return buffer;
  }
}

/** A ZooKeeper long read as a number (times, and ids only compared or printed). */
function readLong(buffer: Buffer, offset: number): number {
  return buffer.readInt32BE(offset) * 2 ** 32 + buffer.readUInt32BE(offset + 4);
}

function hexLong(buffer: Buffer, offset: number): string {
  return buffer.toString('hex', offset, offset + 8);
}

/** Hex without leading zeros, '0' for zero: how session ids are printed (see sessionIdHex). */
function hexId(buffer: Buffer, offset: number): string {
  let start = offset;
  while (start < offset + 7 && buffer[start] === 0) start += 1;
  const hex = buffer.toString('hex', start, offset + 8);
  return hex.charCodeAt(0) === 48 /* '0' */ && hex.length > 1 ? hex.slice(1) : hex;
}

/** Stat: czxid, mzxid, ctime, mtime (longs), version, cversion, aversion (ints), ephemeralOwner (long), dataLength, numChildren (ints), pzxid (long). */
const STAT_BYTES = 68;

export function readStat(buffer: Buffer, offset: number): ZkStat {
  return {
    czxid: hexLong(buffer, offset),
    ctimeMs: readLong(buffer, offset + 16),
    mtimeMs: readLong(buffer, offset + 24),
    version: buffer.readInt32BE(offset + 32),
    cversion: buffer.readInt32BE(offset + 36),
    ephemeralOwner: hexId(buffer, offset + 44),
    dataLength: buffer.readInt32BE(offset + 52),
    numChildren: buffer.readInt32BE(offset + 56),
  };
}

/**
 * Decodes a multi answer into `this.results`: per operation a multi header, then a created path, a
 * stat, an error code or nothing, until the header marked done. Returns the bytes read.
 */
function decodeMultiResponse(this: TransactionResponse, buffer: Buffer, offset: number): number {
  let at = offset;
  for (;;) {
    const type = buffer.readInt32BE(at);
    const done = buffer[at + 4] === 1;
    at += MULTI_HEADER_BYTES;
    if (done) break;
    if (type === CREATE) {
      const length = buffer.readInt32BE(at);
      let path = buffer.toString('utf8', at + 4, at + 4 + length);
      at += 4 + length;
      if (this.chrootPath) path = path === this.chrootPath ? '/' : path.slice(this.chrootPath.length);
      this.results.push({ type, path });
    } else if (type === SET_DATA) {
      this.results.push({ type, stat: readStat(buffer, at) });
      at += STAT_BYTES;
    } else if (type === ERROR) {
      this.results.push({ type, err: buffer.readInt32BE(at) });
      at += 4;
    } else if (type === DELETE || type === CHECK) this.results.push({ type });
    else throw new Error(`unknown operation type ${type} in a ZooKeeper multi answer`);
  }
  return at - offset;
}

let decoderInstalled = false;

/**
 * Patch: the library decodes a multi's answer into a record per operation and a stat of eleven
 * fields with six 8-byte buffers each (see the header comment); {@link decodeMultiResponse} reads it
 * into what {@link queueMulti}'s callers need, and nothing more. Process-wide (it replaces the
 * decoder of the library's module), idempotent; installed by `installDriverPatches`. Test:
 * test/unit/zk-wire.test.ts decodes the server's bytes both ways.
 */
export function installMultiDecoder(): void {
  if (decoderInstalled) return;
  jute.TransactionResponse.prototype.deserialize = decodeMultiResponse;
  decoderInstalled = true;
}

/**
 * Queues `request` on `client`'s connection, as the library's own requests are. `done` gets an
 * error only when the request itself failed; a multi the server refused answers per-op codes.
 * Needs {@link installMultiDecoder} (the answers are read in its form).
 */
export function queueMulti(client: zookeeper.Client, request: MultiRequest, done: (err: unknown, results?: MultiOpResult[]) => void): void {
  if (!decoderInstalled) throw new Error('queueMulti needs installMultiDecoder() first (installDriverPatches does it)');
  const connection = (client as unknown as { connectionManager: ConnectionManager }).connectionManager;
  connection.queue(request, (err, response) => (err ? done(err) : done(null, response?.payload?.results ?? [])));
}
