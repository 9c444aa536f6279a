export { ZkClient, type ZkClientOptions, type ZkClientEvents, type ZkSessionOps, type ZkState } from './zk-client';
export { ZkError, toZkError, isRetryable } from './zk-errors';
export { ZkMulti, type ZkOp, type ZkOpResult } from './zk-multi';
export { ChildrenCache, type ChildrenCacheOptions, type ChildEntry, type ChildrenCacheEvents } from './children-cache';
export { NodeCache, stampReaches, type NodeCacheOptions, type NodeCacheEvents, type NodeStamp } from './node-cache';
export type { CacheListeners } from './watched-cache';
export { backoffDelayMs, sleep, type BackoffOptions } from './backoff';
export type { ZkStat, ZkCreateMode, ZkWatchEvent, ZkWatcher, ZkData } from './zk-types';
