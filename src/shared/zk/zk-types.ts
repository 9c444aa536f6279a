import type { Stat } from 'node-zookeeper-client';

/** Node metadata, decoded from the wire form into plain values. */
export interface ZkStat {
  version: number;
  cversion: number;
  numChildren: number;
  dataLength: number;
  /** Hex session id owning this ephemeral node; '0' for persistent nodes. */
  ephemeralOwner: string;
  ctimeMs: number;
  mtimeMs: number;
  /** Hex id of the transaction that created the node: nodes created in one multi share it. */
  czxid: string;
}

/** Creation modes, named rather than numbered. */
export type ZkCreateMode = 'persistent' | 'ephemeral' | 'persistent_sequential' | 'ephemeral_sequential';

/** A one-shot watch notification; `path` is relative to the namespace. */
export interface ZkWatchEvent {
  type: 'created' | 'deleted' | 'dataChanged' | 'childrenChanged' | 'other';
  path: string;
}

export type ZkWatcher = (event: ZkWatchEvent) => void;

/** Data accepted by writes; strings are UTF-8 encoded. */
export type ZkData = Buffer | string | undefined;

function bufferToNumber(b: Buffer): number {
  // ZooKeeper longs are big-endian 8-byte buffers; times fit comfortably in a double.
  return b.length === 8 ? Number(b.readBigInt64BE(0)) : 0;
}

/** Hex form of an 8-byte session id buffer (what `ephemeralOwner` holds). */
export function sessionIdHex(b: Buffer | undefined): string {
  if (!b || b.length === 0) return '0';
  const hex = b.toString('hex').replace(/^0+/, '');
  return hex === '' ? '0' : hex;
}

export function toZkStat(stat: Stat): ZkStat {
  return {
    version: stat.version,
    cversion: stat.cversion,
    numChildren: stat.numChildren,
    dataLength: stat.dataLength,
    ephemeralOwner: sessionIdHex(stat.ephemeralOwner),
    ctimeMs: bufferToNumber(stat.ctime),
    mtimeMs: bufferToNumber(stat.mtime),
    czxid: Buffer.isBuffer(stat.czxid) ? stat.czxid.toString('hex') : String(stat.czxid),
  };
}

export function toBuffer(data: ZkData): Buffer | undefined {
  if (data === undefined) return undefined;
  return typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
}
