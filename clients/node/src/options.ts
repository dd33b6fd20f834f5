/**
 * Defaults and the checks of durations, shared by every lock kind. Every
 * duration of this package is in milliseconds, as ioredis and Node's timers
 * count them.
 */

/** Redisson's `lockWatchdogTimeout`: the lease of a hold taken without one, renewed every third of it. */
export const DEFAULT_WATCHDOG_TIMEOUT = 30_000;

/** Redisson's `slavesSyncTimeout`: how long an acquisition waits for the replicas. */
export const DEFAULT_SYNC_TIMEOUT = 1_000;

/** Added to a blocking call's wait for its reply to arrive before the connection is given up. */
export const REPLY_MARGIN = 5_000;

/** How long the server remembers a release's reply under its request id: Redisson's default. */
export const LATCH_TTL_MS = 13_500;

/** The module's longest lease or wait: ten years. */
export const MAX_MS = 315_360_000_000;

/**
 * After each acquisition, wait for the master's replicas to have it, as
 * Redisson does with `checkLockSyncedSlaves` (on by default).
 */
export interface ReplicaSync {
  /** Off: an acquisition returns as soon as the master has it. Default true. */
  enabled: boolean;
  /** Milliseconds to wait for every connected replica (`WAIT`); default 1000. */
  timeout: number;
  /** Where the master writes an AOF and has `WAITAOF` (7.2+), also wait for its fsync. Default true. */
  aof: boolean;
}

/** The replica sync Redisson does by default. */
export const DEFAULT_SYNC: Readonly<ReplicaSync> = Object.freeze({
  enabled: true,
  timeout: DEFAULT_SYNC_TIMEOUT,
  aof: true,
});

/**
 * A duration given by the caller as whole milliseconds for the server,
 * rounded up so a short lease never becomes 0. Throws a `RangeError` naming
 * `what` for anything the module would refuse, before anything is sent.
 */
export function toMs(value: number, what: string, min = 1): number {
  if (typeof value !== "number" || Number.isNaN(value)) {
    throw new TypeError(`${what} must be a number of milliseconds, not ${String(value)}`);
  }
  const ms = Math.ceil(value);
  if (ms < min || ms > MAX_MS) {
    throw new RangeError(`${what} must be from ${min} to ${MAX_MS} ms, not ${value}`);
  }
  return ms;
}

/**
 * A wait as `BLOCK`'s argument: `null`, `undefined` or `Infinity` wait
 * without limit (`BLOCK 0`); 0 does not wait at all (no `BLOCK`: returns
 * null); W waits up to W ms (`BLOCK W`).
 */
export function blockOf(wait: number | null | undefined): number | null {
  if (wait === null || wait === undefined || wait === Infinity) {
    return 0;
  }
  if (wait === 0) {
    return null;
  }
  return toMs(wait, "wait");
}

/** The complete replica sync policy of a partial one, checked. */
export function syncOf(sync: Partial<ReplicaSync> | undefined): ReplicaSync {
  const merged = { ...DEFAULT_SYNC, ...(sync ?? {}) };
  toMs(merged.timeout, "sync.timeout");
  return merged;
}

/**
 * What is left of a wait after `elapsedMs`, for a resend: a bounded wait
 * less what went by (none left: one try, no BLOCK); a wait without limit
 * (0) or none (null) stays as it was.
 */
export function remaining(blockMs: number | null, elapsedMs: number): number | null {
  if (blockMs === null || blockMs === 0) {
    return blockMs;
  }
  const left = Math.floor(blockMs - elapsedMs);
  return left >= 1 ? left : null;
}
