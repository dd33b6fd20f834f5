/**
 * rwlock-client: Redisson's distributed locks, semaphores and count-down
 * latch for Node.js, on the rwlock Redis module and ioredis. Start with
 * `Client`.
 */

export { Client, type ClientOptions, type LockOptions, type FairLockOptions, type ReadWriteLockOptions } from "./client";
export { Lock, Hold, type AcquireOptions, type HandleOptions, type LostCallback } from "./lock";
export { ReadWriteLock } from "./rwlock";
export { MultiLock, type MultiHold } from "./multi";
export { Semaphore, Permits, type PermitOptions } from "./semaphore";
export { PermitExpirableSemaphore, PermitIds, type PermitAcquireOptions, type PermitsLostCallback } from "./permit";
export { CountDownLatch } from "./latch";
export type { WaitOptions } from "./driver";
export { RedLock, quorum, drift, type RedLockOptions, type RedLockAcquireOptions } from "./redlock";
export { LockError, NotAcquired, NotHeld, NotReentrant, NotSynced, ReleaseUnknown } from "./errors";
export { DEFAULT_WATCHDOG_TIMEOUT, DEFAULT_SYNC_TIMEOUT, type ReplicaSync } from "./options";
export type { HoldKind, HoldSpec } from "./commands";
export type { RedisClient } from "./link";
